"""Stop-gradient in SymPy: ``Frozen(expr)`` has the value of ``expr`` and derivative 0.

This is how a detached quantity (``jax.lax.stop_gradient``: an importance weight, a
mask,
a target) appears in a symbolic specification. Differentiating treats it as a constant;
evaluating it (``.doit()`` or substitution followed by ``unfreeze``) gives its value.

Examples:
    >>> import sympy as sp
    >>> z = sp.Symbol("z", real=True)
    >>> e = Frozen(sp.exp(z)) * z
    >>> sp.diff(e, z)
    Frozen(exp(z))
    >>> unfreeze(sp.diff(e, z))
    exp(z)
"""

from __future__ import annotations

import sympy as sp


class Frozen(sp.Function):
    """An expression whose value is kept and whose derivative is zero."""

    nargs = 1

    def fdiff(self, argindex=1):
        return sp.S.Zero

    def _eval_is_real(self):
        return self.args[0].is_real


def unfreeze(expr: sp.Expr) -> sp.Expr:
    """Replaces every ``Frozen(e)`` by ``e`` (after differentiation)."""
    return expr.replace(lambda e: isinstance(e, Frozen), lambda e: e.args[0])

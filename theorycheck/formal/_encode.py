"""SymPy -> z3 translation: one table, polynomial arithmetic only.

``exp`` and ``log`` (and every other transcendental function) never reach z3: the
encoder
raises ``NotImplementedError`` naming them, so a claim that still contains them is
reported ``unknown`` instead of being decided on a wrong encoding.
"""

from __future__ import annotations

from collections.abc import Mapping

import sympy as sp
import z3

__all__ = ["encode"]


def _pow(base, exponent):
    if not (exponent.is_Integer):
        raise NotImplementedError(f"non-integer power {exponent} has no z3 encoding")
    n = int(exponent)
    if n >= 0:
        out = z3.RealVal(1)
        for _ in range(n):
            out = out * base
        return out
    return 1 / _pow(base, sp.Integer(-n))


def _piecewise(args, enc):
    out = None
    for value, cond in reversed(args):
        v, c = enc(value), enc(cond)
        out = v if out is None or cond == sp.true else z3.If(c, v, out)
    return out


_TABLE = {
    sp.Add: lambda a, enc: z3.Sum([enc(t) for t in a.args]),
    sp.Mul: lambda a, enc: z3.Product([enc(t) for t in a.args]),
    sp.Pow: lambda a, enc: _pow(enc(a.base), a.exp),
    sp.Piecewise: lambda a, enc: _piecewise(a.args, enc),
    sp.ITE: lambda a, enc: z3.If(enc(a.args[0]), enc(a.args[1]), enc(a.args[2])),
    sp.StrictGreaterThan: lambda a, enc: enc(a.lhs) > enc(a.rhs),
    sp.GreaterThan: lambda a, enc: enc(a.lhs) >= enc(a.rhs),
    sp.StrictLessThan: lambda a, enc: enc(a.lhs) < enc(a.rhs),
    sp.LessThan: lambda a, enc: enc(a.lhs) <= enc(a.rhs),
    sp.Equality: lambda a, enc: enc(a.lhs) == enc(a.rhs),
    sp.Unequality: lambda a, enc: enc(a.lhs) != enc(a.rhs),
    sp.And: lambda a, enc: z3.And([enc(t) for t in a.args]),
    sp.Or: lambda a, enc: z3.Or([enc(t) for t in a.args]),
    sp.Not: lambda a, enc: z3.Not(enc(a.args[0])),
    sp.Implies: lambda a, enc: z3.Implies(enc(a.args[0]), enc(a.args[1])),
}


def encode(expr: sp.Basic, variables: Mapping[sp.Symbol, z3.ArithRef]) -> z3.ExprRef:
    """Encodes a polynomial/rational SymPy expression or relation as a z3 term.

    Args:
        expr: SymPy expression built from rationals, the given symbols, ``+ * /``,
            integer powers, ``Piecewise``/``ITE``, relations and logic.
        variables: SymPy symbol -> z3 real variable.

    Returns:
        A z3 term (arithmetic or boolean).

    Raises:
        NotImplementedError: for ``exp``, ``log`` or any other unsupported node, naming
        it.

    Examples:
        >>> x, y = sp.symbols("x y", real=True)
        >>> encode(x * y + sp.Rational(1, 2) >= 0, {x: z3.Real("x"), y: z3.Real("y")})
        0 <= 1/2 + x*y
    """

    def enc(e):
        if e is sp.true or e == sp.true:
            return z3.BoolVal(True)
        if e is sp.false or e == sp.false:
            return z3.BoolVal(False)
        if isinstance(e, sp.Symbol):
            if e not in variables:
                raise NotImplementedError(f"free symbol {e} has no z3 variable")
            return variables[e]
        if isinstance(e, sp.Rational):
            return z3.RealVal(f"{e.p}/{e.q}")
        for kind, rule in _TABLE.items():
            if type(e) is kind:
                return rule(e, enc)
        raise NotImplementedError(
            f"{type(e).__name__} ({e}) has no z3 encoding (exp/log never reach z3)"
        )

    return enc(sp.sympify(expr))

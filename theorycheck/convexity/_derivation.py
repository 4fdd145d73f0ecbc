r"""Derivation stage: the loss at one V as SymPy, with its logit gradient and Hessian
in probability coordinates (the input of every structure theorem).

The JAX loss is translated by :mod:`theorycheck.bridge` (the same function the
numeric stages run), differentiated with frozen (``stop_gradient``) values held
constant, and rewritten in :math:`p_i = \pi_i` when it is shift invariant.
"""

from __future__ import annotations

import dataclasses

import sympy as sp

from theorycheck import symbolic
from theorycheck.bridge import AffineMap, affine_sympy_from_jax, sympy_from_jax
from theorycheck.symbolic import is_transcendental, tidy_probability

__all__ = ["Derived", "derive"]


@dataclasses.dataclass(frozen=True)
class Derived:
    r"""The loss at one V: expression, gradient and Hessian in probability
    coordinates.

    With ``affine`` set, every form is of :math:`\tilde L` in the logits
    :math:`z' = \alpha \odot z + \beta` (see :func:`derive`).

    ``gradient_w``/``hessian_w`` are the same forms with every frozen
    (``stop_gradient``) value left as an opaque symbol; ``frozen`` maps those symbols
    to their values in probability coordinates. An identity that holds with the
    symbols free holds for their values (the structure fits use this).
    """

    vocab: int
    logits: tuple[sp.Symbol, ...]
    expr: sp.Expr
    gradient: symbolic.ProbabilityForm
    hessian: symbolic.ProbabilityForm
    hessian_z: sp.Matrix
    gradient_w: symbolic.ProbabilityForm | None = None
    hessian_w: symbolic.ProbabilityForm | None = None
    frozen: tuple[tuple[sp.Symbol, sp.Expr], ...] = ()
    affine: AffineMap | None = None


def _substitute(form: symbolic.ProbabilityForm, values) -> symbolic.ProbabilityForm:
    """``form`` with the frozen symbols replaced by their values (cells folded)."""
    out = tidy_probability(form.expr.xreplace(dict(values)), fold=False)
    return symbolic.ProbabilityForm(
        out, form.variables, form.shift_invariant, is_transcendental(out)
    )


def derive(
    loss, vocab: int, sampled: int, exact_inputs, *, affine: bool = False
) -> Derived:
    r"""Translates the JAX loss at ``V = vocab`` and derives its logit
    gradient/Hessian.

    With ``affine=True`` an affine map of the logits at the top of the loss
    (:math:`z' = \alpha \odot z + \beta`, e.g. a temperature) is taken out first
    (:func:`theorycheck.bridge.affine_sympy_from_jax`): the forms are then those of
    :math:`\tilde L(z')`, whose Hessian is PSD exactly where the loss's is, at the
    corresponding point, and ``Derived.affine`` holds the map.

    Frozen values (masks, weights, targets) are constants of the derivatives: they
    are converted to probability coordinates once each, not once per Hessian entry.
    """
    z = sp.symbols(f"z0:{vocab}", real=True)
    amap = None
    if affine:
        expr, amap = affine_sympy_from_jax(
            loss, z, sampled=sampled, inputs=exact_inputs
        )
    else:
        expr = sympy_from_jax(loss, z, sampled=sampled, inputs=exact_inputs)
    hess = symbolic.logit_hessian(expr, z)
    frozen = sorted(expr.atoms(symbolic.Frozen), key=sp.default_sort_key)
    if frozen:
        marks = [sp.Dummy(f"w{j}", real=True) for j in range(len(frozen))]
        body = expr.xreplace(dict(zip(frozen, marks)))
        grad_w = symbolic.to_probability(sp.Matrix(symbolic.logit_gradient(body, z)), z)
        hess_w = symbolic.to_probability(symbolic.logit_hessian(body, z), z)
        used = [(m, f) for m, f in zip(marks, frozen) if m in body.free_symbols]
        values = [
            (m, symbolic.to_probability(symbolic.unfreeze(f), z)) for m, f in used
        ]
        if (
            grad_w.shift_invariant
            and hess_w.shift_invariant
            and all(v.shift_invariant for _, v in values)
        ):
            values = tuple((m, v.expr) for m, v in values)
            return Derived(
                vocab,
                z,
                expr,
                _substitute(grad_w, values),
                _substitute(hess_w, values),
                hess,
                grad_w,
                hess_w,
                values,
                amap,
            )
    grad = sp.Matrix(symbolic.logit_gradient(expr, z))
    return Derived(
        vocab,
        z,
        expr,
        symbolic.to_probability(grad, z),
        symbolic.to_probability(hess, z),
        hess,
        affine=amap,
    )

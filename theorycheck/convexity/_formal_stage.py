r"""Formal stage: z3 decides PSD of the logit Hessian at one small V.

In probability coordinates (``p_i > 0``, ``Σ p = 1``, substituted as
:math:`p_{V-1} = 1 - \sum_{i<V-1} p_i`) the claim is

.. math::
    \forall p, w:\quad w^\top H(p)\, w \ge 0 ,

with :math:`w_{V-1} = 0` when ``H 1 = 0`` (shift-invariant losses: ``w`` and
:math:`w + c\mathbf 1` give the same form). A z3 model is a counterexample ``(p, w)``,
re-checked in exact rational arithmetic by :func:`theorycheck.formal.prove`.
"""

from __future__ import annotations

import dataclasses
from fractions import Fraction

import sympy as sp

from theorycheck import formal
from theorycheck.convexity._structural import Derived

__all__ = ["FormalOutcome", "formal_psd"]


@dataclasses.dataclass(frozen=True)
class FormalOutcome:
    """Result of the PSD claim at one V.

    Attributes:
        status: ``proved``/``refuted``/``unknown``.
        detail: solver detail.
        point: for ``refuted``: exact probabilities (or ``e_i = exp(z_i)``) and
            ``direction`` (exact), and ``curvature`` (exact ``wᵀHw``).
        coordinates: ``"p"`` (simplex) or ``"e"`` (positive reals).
    """

    status: str
    detail: str
    probabilities: list[Fraction] | None = None
    direction: list[Fraction] | None = None
    curvature: Fraction | None = None
    coordinates: str = "p"


def formal_psd(derived: Derived, *, timeout_ms: int) -> FormalOutcome:
    """Proves or refutes PSD of the derived Hessian at its V.

    Args:
        derived: the derived forms at one V.
        timeout_ms: z3 timeout.

    Returns:
        A :class:`FormalOutcome`.
    """
    form = derived.hessian
    n = derived.vocab
    if form.transcendental:
        return FormalOutcome("unknown", "Hessian keeps exp/log: no z3 encoding")
    # Plain real symbols: positivity must be an explicit assumption z3 sees.
    x = [sp.Symbol(v.name, real=True) for v in form.variables]
    w = list(sp.symbols(f"w0:{n}", real=True))
    h = form.expr.xreplace(dict(zip(form.variables, x)))
    assumptions = [xi > 0 for xi in x]
    if form.shift_invariant:
        last = 1 - sp.Add(*x[:-1])
        h = h.xreplace({x[-1]: last})
        assumptions = [xi > 0 for xi in x[:-1]] + [last > 0]
        w[-1] = sp.Integer(0)
        free = x[:-1] + w[:-1]
    else:
        free = x + w
    quad = (
        sp.expand((sp.Matrix([w]) * h * sp.Matrix(w))[0, 0])
        if not h.has(sp.Piecewise)
        else (sp.Matrix([w]) * h * sp.Matrix(w))[0, 0]
    )
    res = formal.prove(quad >= 0, free, assumptions=assumptions, timeout_ms=timeout_ms)
    if res.status != "refuted":
        return FormalOutcome(res.status, res.detail)
    ce = res.counterexample
    point = {s: sp.Rational(ce[s.name].numerator, ce[s.name].denominator) for s in free}
    probs = [point[xi] for xi in x[:-1]] + (
        [last.xreplace(point)] if form.shift_invariant else [point[x[-1]]]
    )
    direction = [
        point.get(wi, sp.Integer(0)) if isinstance(wi, sp.Symbol) else wi for wi in w
    ]
    curvature = sp.sympify(quad.xreplace(point))
    if not (isinstance(curvature, sp.Rational) and curvature < 0):
        return FormalOutcome("unknown", "counterexample failed the exact re-check")
    return FormalOutcome(
        "refuted",
        res.detail,
        [Fraction(int(t.p), int(t.q)) for t in map(sp.Rational, probs)],
        [Fraction(int(t.p), int(t.q)) for t in map(sp.Rational, direction)],
        Fraction(int(sp.Rational(curvature).p), int(sp.Rational(curvature).q)),
        "p" if form.shift_invariant else "e",
    )

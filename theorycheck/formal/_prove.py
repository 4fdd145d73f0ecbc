r"""``prove(claim) -> ProofResult``: z3 decides a universally quantified real claim.

The claim holds for all values of its variables satisfying the assumptions iff
``assumptions ∧ ¬claim`` is unsatisfiable. Each call builds a fresh solver with a fixed
random seed and a timeout; it never prints. ``sat`` yields a model, which is turned into
exact rationals (algebraic values are rounded to nearby rationals) and **re-checked in
exact SymPy arithmetic** before it is reported; a model that does not survive the
re-check makes the result ``unknown``, never ``refuted``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from fractions import Fraction

import sympy as sp
import z3

from theorycheck.formal._encode import encode

__all__ = ["ProofResult", "prove"]

#: the seed every solver uses (fixed, so results are reproducible).
SEED = 42


@dataclasses.dataclass(frozen=True)
class ProofResult:
    """Outcome of one claim.

    Attributes:
        status: ``"proved"``, ``"refuted"`` or ``"unknown"``.
        counterexample: for ``refuted``: symbol name -> exact ``Fraction`` value,
        already
            re-checked to violate the claim; otherwise None.
        detail: why (solver answer, timeout, unsupported operation, re-check failure).
    """

    status: str
    counterexample: Mapping[str, Fraction] | None = None
    detail: str = ""


def _to_fraction(value: z3.ExprRef, digits: int) -> Fraction:
    if isinstance(value, z3.RatNumRef):
        return Fraction(value.numerator_as_long(), value.denominator_as_long())
    if isinstance(value, z3.AlgebraicNumRef):
        approx = value.approx(digits)
        return Fraction(approx.numerator_as_long(), approx.denominator_as_long())
    if isinstance(value, z3.IntNumRef):
        return Fraction(value.as_long())
    raise ValueError(f"unexpected z3 value {value}")


def _holds(expr: sp.Basic, point: Mapping[sp.Symbol, sp.Rational]) -> bool:
    val = expr.xreplace(point)
    val = val.doit() if hasattr(val, "doit") else val
    return bool(val)


#: Digits of the rational enclosure of a transcendental constant.
ENCLOSURE_DIGITS = 30


def _enclose_constants(exprs: Sequence[sp.Basic]):
    """Replaces each maximal irrational numeric subexpression (``exp(-20)``,
    ``log(2)``, ``sqrt(e^{1/5} - e^{1/10})``) by a fresh variable ``k`` with
    ``lo <= k <= hi``, ``lo``/``hi`` rationals 10⁻³⁰ apart around its value.

    A proof for every ``k`` in the enclosure is a proof for the true constant; a
    counterexample is re-checked with the true constants (see :func:`prove`).

    Returns:
        ``(rewritten exprs, new variables, enclosure assumptions)``.
    """
    found: dict[sp.Basic, sp.Symbol] = {}
    bounds: list[sp.Basic] = []

    def walk(e):
        if (
            isinstance(e, sp.Expr)
            and e.is_number
            and not e.is_Rational
            and not isinstance(e, sp.Piecewise)
        ):
            if e not in found:
                value = sp.N(e, ENCLOSURE_DIGITS + 10)
                if not (value.is_Float and value.is_finite):
                    return e
                k = sp.Symbol(f"const{len(found)}", real=True)
                mid = sp.Rational(str(value))
                slack = sp.Rational(1, 10**ENCLOSURE_DIGITS) * max(1, abs(mid))
                found[e] = k
                bounds.extend([k >= mid - slack, k <= mid + slack])
            return found[e]
        if not e.args:
            return e
        return e.func(*[walk(a) for a in e.args])

    out = [walk(sp.sympify(e)) for e in exprs]
    return out, list(found.values()), bounds


def prove(
    claim: sp.Basic,
    variables: Sequence[sp.Symbol],
    *,
    assumptions: Sequence[sp.Basic] = (),
    timeout_ms: int = 10_000,
) -> ProofResult:
    r"""Decides :math:`\forall x:\ \text{assumptions}(x) \Rightarrow \text{claim}(x)`.

    Args:
        claim: a SymPy relation/boolean in ``variables`` (polynomial or rational terms).
        variables: the universally quantified real symbols.
        assumptions: SymPy relations restricting the domain (e.g. ``p > 0``).
        timeout_ms: z3 timeout for this claim.

    Returns:
        A :class:`ProofResult`. ``unknown`` (timeout, unsupported term, or a model that
        failed the exact re-check) is never a pass.

    Examples:
        >>> x = sp.Symbol("x", real=True)
        >>> prove(x**2 - 2*x + 1 >= 0, [x]).status
        'proved'
        >>> r = prove(x**2 - 2 >= 0, [x], assumptions=[x > 0])
        >>> r.status, float(r.counterexample["x"]) ** 2 < 2
        ('refuted', True)
    """
    rewritten, consts, bounds = _enclose_constants([claim, *assumptions])
    names = {s: z3.Real(s.name) for s in [*variables, *consts]}
    try:
        goal = encode(rewritten[0], names)
        context = [encode(a, names) for a in [*rewritten[1:], *bounds]]
    except NotImplementedError as err:
        return ProofResult("unknown", None, f"not encodable: {err}")
    solver = z3.Solver()
    solver.set("random_seed", SEED)
    solver.set("timeout", int(timeout_ms))
    solver.add(*context)
    solver.add(z3.Not(goal))
    answer = solver.check()
    if answer == z3.unsat:
        return ProofResult("proved", None, "z3: negation unsatisfiable")
    if answer == z3.unknown:
        return ProofResult("unknown", None, f"z3: {solver.reason_unknown()}")
    model = solver.model()
    for digits in (20, 40, 80):
        values = {}
        for s in variables:
            v = model.eval(names[s], model_completion=True)
            values[s] = _to_fraction(v, digits)
        point = {s: sp.Rational(f.numerator, f.denominator) for s, f in values.items()}
        if all(_holds(a, point) for a in assumptions) and not _holds(claim, point):
            return ProofResult(
                "refuted",
                {s.name: f for s, f in values.items()},
                "z3 model, re-checked exactly",
            )
    return ProofResult("unknown", None, "z3 model did not survive the exact re-check")

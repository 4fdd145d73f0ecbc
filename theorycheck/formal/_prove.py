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
    names = {s: z3.Real(s.name) for s in variables}
    try:
        goal = encode(claim, names)
        context = [encode(a, names) for a in assumptions]
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

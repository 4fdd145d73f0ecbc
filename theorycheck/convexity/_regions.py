r"""Regions of the sampled-token theorem: where :math:`f' \le 0` and the margin
:math:`f''(1-\pi_k) - f'\pi_k \ge 0` hold, in :math:`\pi_k \in (0, 1)`.

Two routes, by the form of :math:`f', f''`:

* rational in :math:`\pi_k` (branch by branch): SymPy's ``solveset`` on each
  Piecewise cell gives exact regions (``pi_k >= 1/2``);
* transcendental (``exp``/``log`` of :math:`\pi_k`, e.g. SAPO's
  :math:`e^{\tau(r-1)}`): validated interval bisection
  (:func:`theorycheck.formal.sign_regions`), whose boundaries are exact points or
  isolating intervals of width at most ``1e-12``; ``solveset`` is not trusted there.

:func:`q_annotated` states how a region moves with the behavior probability
:math:`q`: each boundary of the region at ``q`` that equals :math:`c\,q` for a ratio
:math:`c` shared by at least two tested ``q`` is marked ``[= c*q]`` (exact at each
tested ``q``; the pattern itself is observed, not proved for every ``q``).
"""

from __future__ import annotations

import re
from fractions import Fraction

import sympy as sp

from theorycheck import formal, symbolic

__all__ = [
    "MODERATE",
    "interior_witness",
    "negative_at",
    "q_annotated",
    "scan",
    "solved_region",
    "validated_region",
]

#: mpmath digits for re-checking a transcendental condition at a point.
HIGH_PRECISION = 50


def _solve(cond: sp.Basic, p: sp.Symbol) -> sp.Set:
    """Region of (0, 1) where ``cond`` holds; Piecewise sides are solved branch by
    branch
    (each branch value on its own region), which is far cheaper than solveset on
    them."""
    domain = sp.Interval.open(0, 1)
    if isinstance(cond, sp.And):
        return sp.Intersection(*[_solve(c, p) for c in cond.args])
    if isinstance(cond, sp.Or):
        return sp.Union(*[_solve(c, p) for c in cond.args])
    if (
        isinstance(cond, sp.core.relational.Relational)
        and cond.rhs == 0
        and isinstance(cond.lhs, sp.Piecewise)
    ):
        remaining: sp.Set = domain
        out: sp.Set = sp.S.EmptySet
        for value, branch in cond.lhs.args:
            region = sp.Intersection(
                symbolic.condition_set(branch, p, domain), remaining
            )
            if region != sp.S.EmptySet:
                out = sp.Union(
                    out,
                    symbolic.condition_set(cond.func(value, 0), p, domain).intersect(
                        region
                    ),
                )
            remaining = sp.Complement(remaining, region)
        return out
    return symbolic.condition_set(cond, p, domain)


def solved_region(cond: sp.Basic, p: sp.Symbol) -> str | None:
    try:
        region = _solve(cond, p)
    except (NotImplementedError, TypeError, ValueError, AttributeError):
        return None
    if not isinstance(region, sp.Set) or isinstance(region, sp.ConditionSet):
        return None
    if region == sp.S.EmptySet:
        return "never"
    if region == sp.Interval.open(0, 1):
        return "always"
    pieces = region.args if isinstance(region, sp.Union) else (region,)
    if all(isinstance(r, sp.Interval) for r in pieces):
        return " or ".join(_interval_text(r) for r in pieces)
    return f"pi_k in {region}"


def _interval_text(region: sp.Interval) -> str:
    parts = []
    if region.start > 0:
        parts.append(
            f"pi_k {'>' if region.left_open else '>='} {sp.sstr(region.start)}"
        )
    if region.end < 1:
        parts.append(f"pi_k {'<' if region.right_open else '<='} {sp.sstr(region.end)}")
    return " and ".join(parts)


#: The moderate grid 1/64..63/64 (witnesses float64 can confirm).
MODERATE = [Fraction(i, 64) for i in range(1, 64)]


def negative_at(expr: sp.Expr, p: sp.Symbol, grid) -> list[tuple[Fraction, sp.Expr]]:
    """``(x, expr(x))`` for the grid points where ``expr < 0`` at 50 digits."""
    out = []
    for x in grid:
        at = sp.Rational(x.numerator, x.denominator)
        val = sp.N(expr.subs(p, at), HIGH_PRECISION)
        if val.is_real and val < 0:
            out.append((x, val))
    return out


def scan(cond_expr: sp.Expr, p: sp.Symbol) -> Fraction | None:
    """Finds a grid point in (0, 1) where ``cond_expr < 0`` at high precision."""
    grid = [Fraction(1, 10**e) for e in range(12, 1, -1)]
    grid += MODERATE
    grid += [1 - Fraction(1, 10**e) for e in range(2, 12)]
    for x in grid:
        if negative_at(cond_expr, p, [x]):
            return x
    return None


def interior_witness(expr: sp.Expr, p: sp.Symbol, found: Fraction) -> Fraction:
    """A point where ``expr < 0``, away from the boundary when possible.

    z3 tends to answer a boundary point (e.g. exactly where a mask switches), where
    float64 rounds to the other side and cannot confirm. Among the grid points
    1/64..63/64 where ``expr < 0`` (50 digits), the one with the largest
    ``|expr| p (1 - p)`` (the witness curvature scales with ``p (1 - p)``) is
    preferred; otherwise the solver's point stands.
    """
    bad = negative_at(expr, p, MODERATE)
    if not bad:
        return found
    return min(bad, key=lambda xv: xv[1] * float(xv[0] * (1 - xv[0])))[0]


def validated_region(f1: sp.Expr, f2: sp.Expr, p: sp.Symbol, covers=None):
    r"""Validated regions of the theorem's conditions (interval route).

    Args:
        f1: :math:`f'` as a function of ``p`` alone.
        f2: :math:`f''`.
        p: the symbol :math:`\pi_k`.
        covers: sign covers already computed (``formal.sign_regions``), by
            condition expression; the missing ones are computed here.

    Returns:
        ``(text for V >= 3, text for V = 2, segments for V >= 3)``, or None when a
        cell stays undecided.
    """
    margin = f2 * (1 - p) - f1 * p
    covers = {} if covers is None else covers
    try:
        for expr in (-f1, margin):
            if expr not in covers:
                covers[expr] = formal.sign_regions(expr, p)
    except (NotImplementedError, TypeError, ValueError):
        return None
    fprime, margin_cover = covers[-f1], covers[margin]
    if fprime is None or margin_cover is None:
        return None
    both = formal.intersect(fprime, margin_cover)
    return formal.region_text(both), formal.region_text(margin_cover), tuple(both)


_NUMBER = re.compile(r"(?<![\w.])(\d+(?:/\d+)?(?:\.\d+)?(?:e-?\d+)?)")


def _boundaries(text: str) -> list[Fraction]:
    return [
        Fraction(m) if "e" not in m else Fraction(float(m))
        for m in _NUMBER.findall(text or "")
    ]


def q_annotated(conditions: dict[Fraction, str | None]) -> dict[str, str | None]:
    """Marks region boundaries that scale with ``q`` (see the module docstring).

    Args:
        conditions: region text by ``q``.

    Returns:
        The same texts keyed by ``str(q)``, with ``[= c*q]`` after such boundaries.

    Examples:
        >>> F = Fraction
        >>> q_annotated({F(1, 5): "pi_k > 6/25", F(1, 4): "pi_k > 3/10"})
        {'1/5': 'pi_k > 6/25 [= 6/5*q]', '1/4': 'pi_k > 3/10 [= 6/5*q]'}
    """
    ratios: dict[Fraction, set[Fraction]] = {}
    for q, text in conditions.items():
        for b in _boundaries(text):
            if 0 < b < 1:
                ratios.setdefault(b / q, set()).add(q)
    shared = {c for c, qs in ratios.items() if len(qs) >= 2}
    out = {}
    for q, text in conditions.items():
        if text is None:
            out[str(q)] = None
            continue

        def mark(m, q=q):
            b = Fraction(m.group(1)) if "e" not in m.group(1) else None
            if b is None or not 0 < b < 1 or b / q not in shared:
                return m.group(1)
            c = b / q
            return f"{m.group(1)} [= {'' if c == 1 else str(c) + '*'}q]"

        out[str(q)] = _NUMBER.sub(mark, text)
    return out

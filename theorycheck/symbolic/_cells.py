r"""Piecewise expressions whose conditions depend on one variable: split into cells.

A loss built from ``where``/``clip``/``minimum`` becomes a SymPy ``Piecewise``; after
differentiation and ``piecewise_fold`` its conditions grow combinatorially (products of
branches, conjunctive normal forms), although for a sampled-token rule every condition
is a relation in the single probability :math:`\pi_k`. This module decides such an
expression *cell by cell*: the boundaries of every relational atom's solution set cut
the domain into open intervals and points; on each cell every atom has a fixed truth
value, so the whole Piecewise collapses to one smooth value.

.. math::
    E(x) = \sum_{\text{cells } C} [x \in C]\; E_C(x), \qquad
    E \equiv 0 \iff E_C \equiv 0 \text{ for every cell } C

The boundaries come from SymPy's ``solveset``; as a guard, every atom is evaluated
exactly at three points of each open cell and the split is refused (``None``) when
they disagree. Callers then fall back to ``piecewise_fold``.
"""

from __future__ import annotations

import functools

import sympy as sp

__all__ = ["condition_set", "fold_cells", "piecewise_cells"]

#: Digits used to order boundary points (their exact order is then checked).
_DIGITS = 50
#: More relational atoms than this: no cell split (the caller falls back).
MAX_ATOMS = 24


@functools.lru_cache(maxsize=4096)
def condition_set(cond: sp.Basic, x: sp.Symbol, domain: sp.Set) -> sp.Set:
    """The set of ``x`` in ``domain`` where the boolean ``cond`` holds (SymPy solveset).

    Examples:
        >>> x = sp.Symbol("x", positive=True)
        >>> condition_set((x >= 2) & (x < 3), x, sp.Interval.open(0, 10))
        Interval.Ropen(2, 3)
    """
    if cond == sp.true:
        return domain
    if cond == sp.false:
        return sp.S.EmptySet
    if isinstance(cond, sp.And):
        return sp.Intersection(*[condition_set(c, x, domain) for c in cond.args])
    if isinstance(cond, sp.Or):
        return sp.Union(*[condition_set(c, x, domain) for c in cond.args])
    if isinstance(cond, sp.Not):
        return sp.Complement(domain, condition_set(cond.args[0], x, domain))
    return sp.solveset(cond, x, domain)


def _relations(expr: sp.Basic) -> set[sp.Basic]:
    rels: set[sp.Basic] = set()
    for pw in expr.atoms(sp.Piecewise):
        for _, cond in pw.args:
            rels |= sp.sympify(cond).atoms(sp.core.relational.Relational)
    return rels


@functools.lru_cache(maxsize=4096)
def _boundary(rel: sp.Basic, x: sp.Symbol, domain: sp.Interval):
    """Boundary points of ``{x in domain: rel}`` inside ``domain``, or None."""
    try:
        region = condition_set(rel, x, domain)
    except (NotImplementedError, TypeError, ValueError):
        return None
    if region == sp.S.EmptySet or region == domain:
        return frozenset()
    if isinstance(region, sp.ConditionSet) or not isinstance(region, sp.Set):
        return None
    edge = region.boundary
    if edge == sp.S.EmptySet:
        return frozenset()
    if not isinstance(edge, sp.FiniteSet):
        return None
    inside = set()
    for point in edge:
        if not point.is_real:
            return None
        if point in (domain.start, domain.end):
            continue
        if bool(domain.contains(point)):
            inside.add(point)
    return frozenset(inside)


def _ordered(points: set[sp.Expr]) -> list[sp.Expr] | None:
    """Points sorted with their strict order proved; the same number written two ways
    is kept once (None if an order or an equality cannot be proved)."""
    out: list[sp.Expr] = []
    for b in sorted(points, key=lambda t: sp.N(t, _DIGITS)):
        if out:
            gap = sp.simplify(b - out[-1])
            if gap == 0:
                continue
            if gap.is_positive is not True:
                return None
        out.append(b)
    return out


def _samples(a: sp.Expr, b: sp.Expr) -> list[sp.Expr]:
    if b is sp.oo:
        return [a + sp.Rational(1, 2), a + 1, a + 7]
    return [a + (b - a) * sp.Rational(t, 8) for t in (2, 4, 6)]


@functools.lru_cache(maxsize=65536)
def _truth(rel: sp.Basic, x: sp.Symbol, at: sp.Expr) -> bool | None:
    """Exact truth of ``rel`` at ``x = at`` (None when undecided).

    A gap clearly away from zero at 50 digits decides by its sign (mpmath's
    adaptive evaluation guarantees those digits); otherwise SymPy decides exactly.
    """
    gap = (rel.lhs - rel.rhs).xreplace({x: at})
    approx = gap.evalf(_DIGITS)
    if approx.is_Number and abs(approx) > sp.Float(10) ** (-_DIGITS // 2):
        return bool(rel.func(1 if approx > 0 else -1, 0))
    for attempt in (gap, sp.simplify(sp.expand_log(gap, force=True))):
        if attempt.is_zero:
            return bool(rel.func(0, 0))
        if attempt.is_positive:
            return bool(rel.func(1, 0))
        if attempt.is_negative:
            return bool(rel.func(-1, 0))
    return None


def piecewise_cells(
    expr: sp.Basic, x: sp.Symbol | None = None, domain: sp.Interval | None = None
) -> list[tuple[sp.Set, sp.Expr]] | None:
    """Splits ``expr`` into ``(cell, smooth value)`` pairs covering ``domain``.

    Args:
        expr: a SymPy expression whose Piecewise conditions are relations in ``x``
            only (its values may hold other symbols).
        x: the condition variable; inferred when every relation has the same one.
        domain: an interval of ``x`` (default ``(0, oo)`` for a positive ``x``).

    Returns:
        Cells in increasing order (open intervals and the points between them), each
        with the Piecewise-free value of ``expr`` there; ``None`` when the conditions
        are not univariate, a boundary cannot be solved or ordered exactly, or an
        atom's truth is not constant on a cell.

    Examples:
        >>> p = sp.Symbol("p", positive=True)
        >>> e = sp.Piecewise((0, p < sp.Rational(1, 2)), (p, True))
        >>> [(str(c), v) for c, v in piecewise_cells(e, p, sp.Interval.open(0, 1))]
        [('Interval.open(0, 1/2)', 0), ('{1/2}', p), ('Interval.open(1/2, 1)', p)]
    """
    rels = _relations(expr)
    if not rels:
        return None
    syms = set().union(*(r.free_symbols for r in rels))
    if len(rels) > MAX_ATOMS or len(syms) != 1 or (x is not None and syms != {x}):
        return None
    (x,) = syms
    if domain is None:
        if not x.is_positive:
            return None
        domain = sp.Interval.open(0, sp.oo)
    points: set[sp.Expr] = set()
    for rel in rels:
        edge = _boundary(rel, x, domain)
        if edge is None:
            return None
        points |= edge
    pts = _ordered(points)
    if pts is None:
        return None
    ends = [domain.start, *pts, domain.end]
    cells: list[tuple[sp.Set, list[sp.Expr]]] = []
    for i, (a, b) in enumerate(zip(ends, ends[1:])):
        cells.append((sp.Interval.open(a, b), _samples(a, b)))
        if i < len(pts):
            cells.append((sp.FiniteSet(b), [b]))
    out = []
    for cell, samples in cells:
        assignment = {}
        for rel in rels:
            truths = {_truth(rel, x, s) for s in samples}
            if truths == {None} and isinstance(cell, sp.FiniteSet):
                # Exactly on a boundary where SymPy cannot prove the gap is 0:
                # membership in the solved region decides (structural for intervals).
                inside = condition_set(rel, x, domain).contains(samples[0])
                truths = {bool(inside)} if inside in (sp.true, sp.false) else {None}
            if len(truths) != 1 or None in truths:
                return None
            assignment[rel] = sp.true if truths.pop() else sp.false
        value = expr.xreplace(assignment)
        if any(x in pw.free_symbols for pw in value.atoms(sp.Piecewise)):
            return None
        out.append((cell, value))
    return out


def fold_cells(
    expr: sp.Basic,
    x: sp.Symbol | None = None,
    domain: sp.Interval | None = None,
    simplify=sp.cancel,
) -> sp.Expr | None:
    """``expr`` as a compact Piecewise with interval conditions (runs of equal cells
    merged), each value passed through ``simplify``; None when it cannot be split.

    Examples:
        >>> p = sp.Symbol("p", positive=True)
        >>> half = sp.Rational(1, 2)
        >>> e = sp.Piecewise((0, p < half), (p, True))
        >>> e = e * sp.Piecewise((2, p < 1), (3, True))
        >>> fold_cells(e, p, sp.Interval.open(0, 1))
        Piecewise((0, p < 1/2), (2*p, True))
    """
    cells = piecewise_cells(expr, x, domain)
    if cells is None:
        return None
    x = next(iter(_relations(expr))).free_symbols.pop() if x is None else x
    runs: list[list] = []  # [first cell, last cell, value]
    for cell, value in cells:
        value = simplify(value)
        if runs and runs[-1][2] == value:
            runs[-1][1] = cell
        else:
            runs.append([cell, cell, value])
    if len(runs) == 1:
        return runs[0][2]
    branches = []
    for first, last, value in runs[:-1]:
        lower = (
            x >= first.inf
            if isinstance(first, sp.FiniteSet)
            else (x > first.inf if first.inf != cells[0][0].inf else sp.true)
        )
        upper = x <= last.sup if isinstance(last, sp.FiniteSet) else x < last.sup
        branches.append((value, sp.And(lower, upper)))
    branches.append((runs[-1][2], True))
    return sp.Piecewise(*branches)

r"""Validated sign regions of one-variable conditions: where :math:`g(x) \ge 0`.

:func:`sign_regions` splits the compact coordinate into cells that are certified
nonnegative (the arguments of :mod:`theorycheck.formal._bisect`), certified negative
(enclosure below 0, or strictly negative at an end and monotone away from it), or
*boundary* cells: a simple root (opposite certified signs at the two ends and a
derivative enclosure that excludes 0, so exactly one root) or a Piecewise switch,
narrowed to width at most ``BOUNDARY_WIDTH``. :func:`intersect` overlays several
conditions (``f' ≤ 0`` and the margin ≥ 0 of the sampled-token theorem) and
:func:`region_text` prints the nonnegative set, each boundary as an exact point or
an isolating interval.
"""

from __future__ import annotations

import dataclasses
from fractions import Fraction

import sympy as sp

from theorycheck.formal._bisect import MAX_CELLS, UNIT, Chart, _Cells, classify

__all__ = ["Segment", "intersect", "region_text", "sign_regions"]

#: Width of an isolating interval of a region boundary.
BOUNDARY_WIDTH = Fraction(1, 10**12)


@dataclasses.dataclass(frozen=True)
class Segment:
    """``[lo, hi]`` of the compact coordinate with label ``"+"`` (g ≥ 0 proved),
    ``"-"`` (g < 0 proved) or ``"?"`` (a boundary cell no wider than
    ``BOUNDARY_WIDTH``)."""

    lo: Fraction
    hi: Fraction
    label: str


def _root_cell(cells: _Cells, lo: Fraction, hi: Fraction, enc) -> bool:
    """Exactly one simple root in ``[lo, hi]``: opposite strict signs at the ends and a
    derivative enclosure excluding 0."""
    if enc is None or enc.switched:
        return False
    a, b = cells.sign_at(0, lo), cells.sign_at(0, hi)
    if a is None or b is None or a * b >= 0:
        return False
    d = cells.enclose(1, lo, hi)
    return d is not None and not d.switched and (d.value.a > 0 or d.value.b < 0)


def sign_regions(
    expr: sp.Expr, x: sp.Symbol, chart: Chart = UNIT, *, max_cells: int = MAX_CELLS
) -> list[Segment] | None:
    r"""Covers the domain by certified ``+``/``-`` segments and thin boundary cells.

    Args:
        expr: :math:`g(x)`.
        x: the variable.
        chart: the domain's chart (``UNIT``: :math:`x \in (0, 1)`).
        max_cells: budget of examined cells.

    Returns:
        Sorted, merged segments covering the compact domain, or None when a cell
        could not be decided within the budget (or stays wider than
        ``BOUNDARY_WIDTH``).

    Examples:
        >>> p = sp.Symbol("p", real=True)
        >>> [s.label for s in sign_regions(p - sp.Rational(1, 2), p)]
        ['-', '+']
    """
    cells = _Cells(expr, x, chart)
    lo0, hi0 = chart.bounds
    stack = [(lo0, hi0)]
    out: list[Segment] = []
    examined = 0
    while stack:
        lo, hi = stack.pop()
        examined += 1
        if examined > max_cells:
            return None
        label, info = classify(cells, lo, hi)
        if label is not None:
            out.append(Segment(lo, hi, label))
            continue
        if hi - lo <= BOUNDARY_WIDTH:
            if info is not None and (info.switched or _root_cell(cells, lo, hi, info)):
                out.append(Segment(lo, hi, "?"))
                continue
            return None
        mid = (lo + hi) / 2
        stack += [(mid, hi), (lo, mid)]
    return _merge(sorted(out, key=lambda s: s.lo))


def _merge(segments: list[Segment]) -> list[Segment]:
    merged: list[Segment] = []
    for s in segments:
        if merged and merged[-1].label == s.label and merged[-1].hi == s.lo:
            merged[-1] = Segment(merged[-1].lo, s.hi, s.label)
        else:
            merged.append(s)
    return merged


def intersect(*covers: list[Segment]) -> list[Segment]:
    """Overlay of covers of the same domain: ``+`` where all are ``+``, ``-`` where
    any is ``-``, ``?`` elsewhere.

    Examples:
        >>> F = Fraction
        >>> a = [Segment(F(0), F(1, 2), "+"), Segment(F(1, 2), F(1), "-")]
        >>> b = [Segment(F(0), F(1, 4), "-"), Segment(F(1, 4), F(1), "+")]
        >>> [(str(s.lo), s.label) for s in intersect(a, b)]
        [('0', '-'), ('1/4', '+'), ('1/2', '-')]
    """
    points = sorted({p for cover in covers for s in cover for p in (s.lo, s.hi)})
    out = []
    for lo, hi in zip(points, points[1:]):
        labels = []
        for cover in covers:
            labels.append(next(s.label for s in cover if s.lo <= lo and hi <= s.hi))
        label = "+" if all(t == "+" for t in labels) else "?"
        label = "-" if "-" in labels else label
        out.append(Segment(lo, hi, label))
    return _merge(out)


def _bound(lo: Fraction, hi: Fraction) -> str:
    if lo == hi:
        return str(lo)
    mid = float((lo + hi) / 2)
    return f"{mid:.12g} (boundary in [{float(lo):.15g}, {float(hi):.15g}])"


def region_text(segments: list[Segment], name: str = "pi_k") -> str:
    """The nonnegative set in words: ``always``, ``never``, or pieces joined by ``or``.

    A piece ``[a, b]`` bounded by boundary cells reads ``name >= a'`` with the boundary
    cell's isolating interval; an edge of the domain is left out. A boundary cell with
    the same sign on both sides (a Piecewise switch where both branches are
    nonnegative but the cell straddling it is not certified) is not a boundary: it is
    named at the end as ``(undecided inside [a, b])``.

    Examples:
        >>> F = Fraction
        >>> region_text([Segment(F(0), F(1, 2), "-"), Segment(F(1, 2), F(1), "+")])
        'pi_k >= 1/2'
        >>> region_text([Segment(F(0), F(1, 3), "+"), Segment(F(1, 3), F(1, 2), "?"),
        ...              Segment(F(1, 2), F(1), "+")])
        'always (undecided inside [0.333333333333333, 0.5])'
    """
    segments, holes = _absorb_holes(segments)
    note = "".join(
        f" (undecided inside [{float(h.lo):.15g}, {float(h.hi):.15g}])" for h in holes
    )
    labels = {s.label for s in segments}
    if labels == {"+"}:
        return "always" + note
    if "+" not in labels:
        return "never" + note
    lo0, hi0 = segments[0].lo, segments[-1].hi
    pieces = []
    for i, s in enumerate(segments):
        if s.label != "+":
            continue
        parts = []
        if s.lo > lo0:
            prev = segments[i - 1]
            left = _bound(prev.lo, prev.hi) if prev.label == "?" else str(s.lo)
            parts.append(f"{name} >= {left}")
        if s.hi < hi0:
            nxt = segments[i + 1]
            right = _bound(nxt.lo, nxt.hi) if nxt.label == "?" else str(s.hi)
            parts.append(f"{name} <= {right}")
        pieces.append(" and ".join(parts) if parts else "always")
    return " or ".join(pieces) + note


def _absorb_holes(segments: list[Segment]):
    """Merges ``?`` cells whose neighbours carry one and the same sign into them."""
    out: list[Segment] = []
    holes: list[Segment] = []
    for i, s in enumerate(segments):
        near = {n.label for n in segments[max(i - 1, 0) : i + 2] if n is not s}
        if s.label == "?" and len(near) == 1 and "?" not in near:
            holes.append(s)
            s = Segment(s.lo, s.hi, near.pop())
        out.append(s)
    return _merge(out), holes

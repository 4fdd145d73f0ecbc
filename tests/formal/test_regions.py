"""Validated sign regions: exact boundaries, isolating intervals, overlays."""

from fractions import Fraction

import sympy as sp

from theorycheck.formal import (
    UNIT,
    intersect,
    region_text,
    sign_regions,
)
from theorycheck.formal._regions import BOUNDARY_WIDTH

P = sp.Symbol("pi_k", real=True)


def test_sign_regions_exact_boundary_at_a_dyadic_root():
    segs = sign_regions(sp.exp(P) * (P - sp.Rational(1, 4)), P)
    assert [s.label for s in segs] == ["-", "+"]
    assert segs[1].lo == Fraction(1, 4)
    assert region_text(segs) == "pi_k >= 1/4"


def test_sign_regions_isolates_a_transcendental_root():
    # -log(p) - 1 >= 0 iff p <= 1/e.
    segs = sign_regions(-sp.log(P) - 1, P, UNIT)
    boundary = [s for s in segs if s.label == "?"]
    assert len(boundary) == 1
    cell = boundary[0]
    assert cell.hi - cell.lo <= BOUNDARY_WIDTH
    assert cell.lo <= sp.exp(-1) <= cell.hi
    assert region_text(segs).startswith("pi_k <= 0.367879441171")


def test_sign_regions_piecewise_switch_is_a_boundary():
    pw = sp.Piecewise((-1, P <= sp.Rational(1, 3)), (1, True))
    segs = sign_regions(pw, P)
    assert [s.label for s in segs] == ["-", "?", "+"]
    assert segs[1].lo <= sp.Rational(1, 3) <= segs[1].hi


def test_intersect_needs_both_conditions():
    a = sign_regions(P - sp.Rational(1, 4), P)
    b = sign_regions(sp.Rational(3, 4) - P, P)
    text = region_text(intersect(a, b))
    assert text == "pi_k >= 1/4 and pi_k <= 3/4"


def test_region_text_always_and_never():
    assert region_text(sign_regions(sp.exp(P), P)) == "always"
    assert region_text(sign_regions(-sp.exp(P), P)) == "never"

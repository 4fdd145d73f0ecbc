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


def test_sign_regions_computes_each_enclosure_and_point_sign_once(monkeypatch):
    # The cover asks again for the enclosures and point signs of shared cell ends
    # and repeated arguments; each is computed once (the memo of _Cells), and the
    # cover is the one computed without the memo.
    from theorycheck.formal import _bisect

    expr = sp.exp(3 * P) * (P - sp.Rational(1, 2)) ** 2 - sp.Rational(1, 50)
    plain_enclose = _bisect._Cells.enclose
    plain_sign = _bisect._Cells.sign_at
    monkeypatch.setattr(_bisect._Cells, "enclose", _bisect._Cells._enclose)
    monkeypatch.setattr(_bisect._Cells, "sign_at", _bisect._Cells._sign_at)
    reference = sign_regions(expr, P)
    monkeypatch.setattr(_bisect._Cells, "enclose", plain_enclose)
    monkeypatch.setattr(_bisect._Cells, "sign_at", plain_sign)
    computed = []
    enclose, sign = _bisect._Cells._enclose, _bisect._Cells._sign_at
    monkeypatch.setattr(
        _bisect._Cells,
        "_enclose",
        lambda self, n, lo, hi: (
            computed.append(("e", n, lo, hi)) or enclose(self, n, lo, hi)
        ),
    )
    monkeypatch.setattr(
        _bisect._Cells,
        "_sign_at",
        lambda self, n, c: computed.append(("s", n, c)) or sign(self, n, c),
    )
    assert sign_regions(expr, P) == reference
    assert len(computed) == len(set(computed)) > 0
    assert [s.label for s in reference].count("?") == 2  # two simple roots isolated

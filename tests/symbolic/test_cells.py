"""Cell splitting of univariate Piecewise expressions (``symbolic._cells``)."""

import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from theorycheck.symbolic import _cells, is_zero
from theorycheck.symbolic._cells import fold_cells, piecewise_cells

P = sp.Symbol("p", positive=True)
Q = sp.Symbol("q", positive=True)
UNIT = sp.Interval.open(0, 1)

fractions = st.integers(1, 99).map(lambda n: sp.Rational(n, 100))
relations = st.sampled_from([sp.Lt, sp.Le, sp.Gt, sp.Ge])


@settings(max_examples=40, deadline=None)  # each example solves 2-3 relations
@given(fractions, fractions, relations, relations, st.integers(-3, 3), fractions)
def test_fold_cells_equals_the_piecewise_everywhere(a, b, r1, r2, c, at):
    # A product of two Piecewise and a nested one, as piecewise_fold would see them.
    inner = sp.Piecewise((P**2, r2(P, b)), (c, True))
    expr = sp.Piecewise((Q * P, r1(P, a)), (inner, True)) * sp.Piecewise(
        (2, r2(P, b)), (P + c, True)
    )
    folded = fold_cells(expr, P, UNIT)
    assert folded is not None
    for x in {at, a, b}:  # a generic point and both boundaries (exact)
        assert sp.expand(folded.subs(P, x) - expr.subs(P, x)) == 0


def test_cells_cover_the_domain_in_order():
    half = sp.Rational(1, 2)
    cells = piecewise_cells(sp.Piecewise((0, P < half), (1, True)), P, UNIT)
    assert [c for c, _ in cells] == [
        sp.Interval.open(0, half),
        sp.FiniteSet(half),
        sp.Interval.open(half, 1),
    ]
    assert [v for _, v in cells] == [0, 1, 1]


def test_transcendental_boundary_is_decided_exactly():
    # DPPO binary-KL's mask: KL(q=1/2 || p) < 1/20 with boundary points
    # 1/2 -+ sqrt(e^{1/5} - e^{1/10}) e^{-1/10} / 2, where the gap is exactly 0.
    kl = sp.log(P) / 2 + sp.log(1 - P) / 2 + sp.log(2)
    expr = sp.Piecewise((0, kl < -sp.Rational(1, 20)), (P, True))
    cells = piecewise_cells(expr, P, UNIT)
    assert len(cells) == 5
    lo = cells[1][0].args[0]
    expected = 0.5 - (sp.exp(0.2) - sp.exp(0.1)) ** 0.5 * sp.exp(-0.1) / 2
    assert abs(float(lo) - expected) < 1e-12
    # On the boundary the strict inequality is false, so the second branch holds.
    assert [v for _, v in cells] == [0, P, P, P, 0]


def test_multivariate_conditions_are_refused():
    expr = sp.Piecewise((0, P < Q), (1, True))
    assert piecewise_cells(expr) is None
    assert fold_cells(expr) is None


def test_no_piecewise_is_refused():
    assert piecewise_cells(P**2, P, UNIT) is None


def test_a_wrong_solver_boundary_is_caught(monkeypatch):
    # Meta-test of the guard: if solveset put the boundary of p < 3/5 at 1/3, the cell
    # (1/3, 1) would hold both truth values and the split must be refused.
    real = _cells.condition_set

    def wrong(cond, x, domain):
        if cond == (P < sp.Rational(3, 5)):
            return sp.Interval.open(0, sp.Rational(1, 3))
        return real(cond, x, domain)

    _cells._boundary.cache_clear()
    monkeypatch.setattr(_cells, "condition_set", wrong)
    try:
        expr = sp.Piecewise((0, P < sp.Rational(3, 5)), (P, True))
        assert piecewise_cells(expr, P, UNIT) is None
    finally:
        _cells._boundary.cache_clear()


def test_is_zero_uses_cells_and_still_detects_nonzero():
    half = sp.Rational(1, 2)
    # is_zero works on (0, oo) for a positive symbol: the factor is 2 there.
    two = sp.Piecewise((2, P > 0), (3, True))
    a = sp.Piecewise((P * Q, P < half), (Q, True)) * two
    b = sp.Piecewise((2 * P * Q, P < half), (2 * Q, True))
    assert is_zero(a - b)
    c = sp.Piecewise((2 * P * Q, P <= half), (2 * Q, True))  # differs at p = 1/2 only
    assert not is_zero(a - c)


def test_one_boundary_written_two_ways_is_one_point():
    # log(4)/4 and log(2)/2 are the same number; SymPy keeps both forms.
    assert sp.log(4) / 4 != sp.log(2) / 2
    a = sp.Piecewise((0, P < sp.log(4) / 4), (P, True))
    b = sp.Piecewise((1, P <= sp.log(2) / 2), (2, True))
    cells = piecewise_cells(a + b, P, UNIT)
    assert cells is not None and len(cells) == 3
    assert [v for _, v in cells] == [1, P + 1, P + 2]  # the point: p + 1

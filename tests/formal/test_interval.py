"""Interval enclosures: every enclosure contains the float64 values it encloses."""

from fractions import Fraction

import numpy as np
import pytest
import sympy as sp

from theorycheck.formal._interval import (
    IntervalUndefined,
    enclose,
    enclosure_fn,
    interval,
)

X = sp.Symbol("x", real=True)

EXPRS = [
    X * sp.log(X),
    sp.cosh(X) - X**2,
    sp.tanh(3 * X) / (1 + X**2),
    sp.sinh(X - sp.Rational(1, 2)) ** 2,
    sp.exp(-X) * sp.atanh(X / 4),
    sp.Piecewise((X**2, X <= sp.Rational(1, 3)), (1 - X, True)),
    X ** sp.Rational(17, 7) + sp.Abs(X - sp.Rational(1, 2)),
    sp.Max(X, 1 - X) * sp.log(1 + X),
]


@pytest.mark.parametrize("expr", EXPRS, ids=str)
def test_enclose_contains_sampled_values(expr):
    rng = np.random.default_rng(0)
    fn = sp.lambdify(X, expr, "numpy")
    for _ in range(40):
        a, b = sorted(rng.uniform(0.01, 2.0, size=2))
        lo, hi = (
            Fraction(a).limit_denominator(10**6),
            Fraction(b).limit_denominator(10**6),
        )
        if lo == hi:
            continue
        enc = enclose(expr, X, lo, hi).value
        pts = np.linspace(float(lo), float(hi), 7)
        vals = fn(pts)
        # float64 rounding of the sample is far below this slack.
        assert np.all(vals >= float(enc.a) - 1e-12) and np.all(
            vals <= float(enc.b) + 1e-12
        )


def test_enclose_handles_the_pole_of_log_at_zero():
    enc = enclose(-2 * X * sp.log(X) - 2 * X + 2, X, Fraction(0), Fraction(1, 4))
    assert enc.value.a >= 0  # -2 x log x >= 0 and 2 - 2x > 0 on [0, 1/4]


def test_enclose_compactified_line_reaches_infinity():
    fn = enclosure_fn(1 / sp.cosh(sp.atanh(X)) ** 2, X)
    enc = fn(interval(Fraction(1, 2), Fraction(1))).value
    assert enc.a == 0 and float(enc.b) == pytest.approx(0.75)


def test_enclose_piecewise_switch_is_flagged():
    pw = sp.Piecewise((0, X <= sp.Rational(1, 2)), (1, True))
    fn = enclosure_fn(pw, X)
    assert not fn(interval(Fraction(0), Fraction(1, 4))).switched
    straddle = fn(interval(Fraction(1, 4), Fraction(3, 4)))
    assert straddle.switched and straddle.value.a == 0 and straddle.value.b == 1


def test_enclose_refuses_log_of_negatives():
    with pytest.raises(IntervalUndefined):
        enclose(sp.log(X - 1), X, Fraction(0), Fraction(1, 2))


def test_enclosure_fn_rejects_other_symbols():
    with pytest.raises(NotImplementedError):
        enclosure_fn(X + sp.Symbol("y"), X)


def _sapo_like():
    """A margin in the form SymPy gives SAPO's (a rational function of exponentials
    behind a Piecewise switch): the same exponentials recur in numerator and
    denominator, and more so in its derivatives."""
    e1, e2 = sp.exp(sp.Rational(21, 10) * X), sp.exp(sp.Rational(63, 10) * X)
    body = (X * e1 - 3 * X**2 * e2 + e1 * e2) / (e2 + 2 * e1 + sp.exp(1) * e1 * e2)
    return sp.Piecewise((0, X <= sp.exp(-20) / 2), (body, True))


def _outcome(fn, lo, hi):
    try:
        enc = fn(interval(lo, hi))
    except IntervalUndefined as err:
        return "undefined", str(err)
    return enc.value._mpi_, enc.switched


@pytest.mark.parametrize(
    "expr",
    [_sapo_like(), sp.diff(_sapo_like(), X), sp.diff(_sapo_like(), X, 2)]
    + [sp.log(X) * sp.log(X) - sp.log(X - sp.Rational(1, 3)) * sp.exp(sp.log(X))]
    + EXPRS,
    ids=["margin", "margin'", "margin''", "log-undefined"] + [str(e) for e in EXPRS],
)
def test_shared_subexpressions_give_the_same_enclosure_bit_for_bit(expr):
    # Evaluating each distinct subexpression once must not change a single bit of
    # any endpoint, the switch flag, or where the enclosure is undefined.
    shared, plain = enclosure_fn(expr, X), enclosure_fn(expr, X, shared=False)
    rng = np.random.default_rng(1)
    cells = [(Fraction(0), Fraction(1)), (Fraction(0), Fraction(1, 2**40))]
    for _ in range(60):
        depth, width = (int(d) for d in rng.integers(0, 45, size=2))
        lo = Fraction(int(rng.integers(0, 2**depth + 1)), 2**depth)
        cells.append((lo, min(Fraction(1), lo + Fraction(1, 2**width))))
    kinds = set()
    for lo, hi in cells:
        out = _outcome(shared, lo, hi)
        assert out == _outcome(plain, lo, hi), (lo, hi)
        kinds.add(out[0] == "undefined")
    if expr.has(sp.log(X - sp.Rational(1, 3))):
        assert kinds == {True, False}  # undefined cells are compared too

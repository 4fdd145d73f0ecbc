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

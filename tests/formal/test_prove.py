"""prove(): proved / refuted (re-checked exactly) / unknown, never a silent pass."""

import sympy as sp

from theorycheck.formal import prove

X, Y = sp.symbols("x y", real=True)


def test_prove_proves_a_true_inequality():
    res = prove(X**2 + Y**2 - 2 * X * Y >= 0, [X, Y])
    assert res.status == "proved" and res.counterexample is None


def test_prove_refutes_with_exact_counterexample():
    claim = X * Y <= 1
    res = prove(claim, [X, Y], assumptions=[X > 0, Y > 0])
    assert res.status == "refuted"
    point = {
        X: sp.Rational(
            res.counterexample["x"].numerator, res.counterexample["x"].denominator
        ),
        Y: sp.Rational(
            res.counterexample["y"].numerator, res.counterexample["y"].denominator
        ),
    }
    assert claim.xreplace(point) == sp.false
    assert point[X] > 0 and point[Y] > 0


def test_prove_irrational_model_is_rounded_and_rechecked():
    # The only violations have x^2 < 2 with x > 1: z3 may answer an algebraic number.
    res = prove(sp.Or(X**2 >= 2, X <= 1), [X])
    assert res.status == "refuted"
    x = res.counterexample["x"]
    assert 1 < x and x * x < 2


def test_prove_unknown_for_exp():
    res = prove(sp.exp(X) >= X + 1, [X])  # true, but exp never reaches z3
    assert res.status == "unknown" and "not encodable" in res.detail


def test_prove_respects_assumptions():
    assert prove(X >= 0, [X], assumptions=[X**2 <= 0]).status == "proved"
    assert prove(X >= 0, [X]).status == "refuted"


def test_prove_is_deterministic():
    a = prove(X * Y <= 1, [X, Y], assumptions=[X > 0, Y > 0])
    b = prove(X * Y <= 1, [X, Y], assumptions=[X > 0, Y > 0])
    assert a == b


def test_transcendental_constants_are_enclosed_for_proofs():
    # exp(-20) and log(2) become variables inside rational enclosures 1e-30 wide.
    tiny = sp.exp(-20)
    assert prove(tiny * X >= 0, [X], assumptions=[X > 0]).status == "proved"
    assert prove(X - sp.log(2) > 0, [X], assumptions=[X > 1]).status == "proved"
    assert prove(X - sp.log(2) > 0, [X], assumptions=[X > 0]).status == "refuted"
    # A gap far below the enclosure width would need the exact constant: never a
    # false proof. x = exp(-20)/2 exactly violates x > exp(-20)/2; z3 finds a model
    # and the exact re-check (true constants) confirms it.
    res = prove(X > tiny / 2, [X], assumptions=[X > 0, X < 1])
    assert res.status == "refuted"
    frac = res.counterexample["x"]
    x = sp.Rational(frac.numerator, frac.denominator)
    assert x <= tiny / 2


def test_enclosure_refutation_is_rechecked_with_true_constants():
    # Claim true for the real constant (x >= e^-20 - x, x >= e^-20 / 2 assumed) but a
    # model inside the enclosure could only violate it by rounding: the re-check uses
    # exp(-20) itself, so the answer is proved or unknown, never a false refutation.
    tiny = sp.exp(-20)
    res = prove(2 * X >= tiny, [X], assumptions=[X >= tiny / 2])
    assert res.status in {"proved", "unknown"}

"""The engine adapters: z3 results, hypothesis properties, two-route comparisons."""

from fractions import Fraction

import numpy as np
import sympy as sp
from hypothesis import strategies as st

from theorycheck.claims import Outcome, compare, from_proof, property_check
from theorycheck.formal import prove


def test_from_proof_maps_the_three_answers():
    x = sp.Symbol("x", real=True)
    assert from_proof(prove(x**2 >= 0, [x]), "x^2 >= 0").outcome is Outcome.PASS
    bad = from_proof(prove(x**2 >= 2, [x]), "x^2 >= 2")
    assert bad.outcome is Outcome.FAIL
    x0 = Fraction(bad.counterexample["x"])
    assert x0 * x0 < 2


def test_property_check_passes_and_fails_with_rechecked_example():
    ok = property_check(lambda a: a * a >= 0, st.floats(-10, 10), what="a^2 >= 0")
    assert ok.outcome is Outcome.PASS and ok.data["examples"] > 0
    bad = property_check(lambda a: a < 5, st.floats(0, 10), what="a < 5", quick=True)
    assert bad.outcome is Outcome.FAIL
    assert bad.counterexample["arg0"] >= 5


def _false_assert(x):
    assert x < 0.5
    return True


def _true_assert(x):
    assert 0 <= x <= 1


def _no_verdict(x):
    x + 1


def test_a_false_assert_style_property_fails_with_its_counterexample():
    res = property_check(_false_assert, st.floats(0, 1), what="x < 1/2")
    assert res.outcome is Outcome.FAIL
    assert res.counterexample["arg0"] >= 0.5  # shrunk and re-checked
    assert "raised AssertionError" in res.detail


def test_a_true_assert_style_property_holds():
    res = property_check(_true_assert, st.floats(0, 1), what="0 <= x <= 1")
    assert res.outcome is Outcome.PASS and res.data["examples"] > 1


def test_any_exception_of_the_property_falsifies_it():
    def prop(x):
        if x > 3:
            raise ValueError("too big")
        return True

    res = property_check(prop, st.integers(0, 10), what="x <= 3")
    assert res.outcome is Outcome.FAIL and res.counterexample == {"arg0": 4}
    assert "ValueError: too big" in res.detail


def test_a_property_with_no_verdict_is_refused_in_one_line():
    import pytest

    with pytest.raises(TypeError, match="returned no verdict") as err:
        property_check(_no_verdict, st.floats(0, 1), what="nothing")
    assert "\n" not in str(err.value)
    with pytest.raises(TypeError, match="returned no verdict"):
        property_check(lambda x: 1.0, st.floats(0, 1), what="a float is no verdict")


def test_a_numpy_testing_call_counts_as_asserting():
    def prop(x):
        np.testing.assert_allclose(x * 2, x + x)

    assert property_check(prop, st.floats(-1, 1), what="2x = x + x").outcome is (
        Outcome.PASS
    )


def test_a_refused_property_makes_its_check_unknown():
    from theorycheck.claims import Check, Method, run_check

    def check():
        return property_check(_no_verdict, st.floats(0, 1), what="nothing")

    res = run_check(Check("no verdict", Method.PROPERTY, check))
    assert res.outcome is Outcome.UNKNOWN and "returned no verdict" in res.error


def test_compare_passes_within_tolerance_and_fails_outside():
    a = np.array([1.0, 2.0, 3.0])
    assert compare("same", a, a + 1e-13, rtol=1e-12, atol=0).outcome is Outcome.PASS
    bad = compare("off", a, a + np.array([0, 0, 1e-3]), rtol=1e-6, atol=0)
    assert bad.outcome is Outcome.FAIL
    assert bad.counterexample["index"] == 2


def test_constructors_build_each_outcome():
    from theorycheck.claims import Outcome, failed, passed, undecided

    assert passed("ok", data={"a": 1}, b=2).data == {"a": 1, "b": 2}
    res = failed("no", {"x": 1}, n=3)
    assert res.outcome is Outcome.FAIL and res.counterexample == {"x": 1}
    assert undecided("?").outcome is Outcome.UNKNOWN


def test_from_proof_on_a_formula_that_cannot_be_built_is_unknown():
    import sympy as sp

    from theorycheck.claims import Outcome, from_proof
    from theorycheck.formal import prove

    x = sp.Symbol("x", real=True)

    def build():  # comparing zoo raises TypeError while the formula is built
        return prove(sp.Integer(1) / 0 >= x, [x])

    res = from_proof(build, "zoo >= x")
    assert res.outcome is Outcome.UNKNOWN
    assert "could not build the formula" in res.detail

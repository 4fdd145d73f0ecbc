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

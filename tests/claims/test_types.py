"""The harness's data types refuse malformed claims and results."""

import pytest

from theorycheck.claims import Check, CheckResult, Claim, Method, Outcome


def _ok():
    return CheckResult(Outcome.PASS, "ok")


def test_check_result_fail_needs_counterexample():
    with pytest.raises(ValueError, match="counterexample"):
        CheckResult(Outcome.FAIL, "broken")
    result = CheckResult(Outcome.FAIL, "broken", counterexample={"x": 1})
    assert result.outcome is Outcome.FAIL


def test_check_result_coerces_outcome_strings():
    assert CheckResult("pass", "ok").outcome is Outcome.PASS
    with pytest.raises(ValueError):
        CheckResult("maybe", "?")


def test_check_coerces_method_and_needs_callable():
    assert Check("x", "z3", _ok).method is Method.Z3
    with pytest.raises(TypeError, match="callable"):
        Check("x", Method.Z3, 3)


@pytest.mark.parametrize("bad", ["", "1abc", "a..b", "a b", "a.b-c"])
def test_claim_id_must_be_dotted_identifier(bad):
    with pytest.raises(ValueError, match="claim id"):
        Claim(bad, "s", "PAPER", "st", ())


def test_claim_provenance_must_be_a_known_tag():
    with pytest.raises(ValueError, match="provenance"):
        Claim("a.b", "s", "paper", "st", ())
    assert Claim("a.b", "s", "NOT FOUND", "st", ()).provenance == "NOT FOUND"


def test_claim_methods_are_distinct_in_order():
    checks = [
        Check("a", Method.Z3, _ok),
        Check("b", Method.NUMERIC, _ok),
        Check("c", Method.Z3, _ok),
    ]
    claim = Claim("a.b", "s", "PAPER", "st", checks)
    assert isinstance(claim.checks, tuple)
    assert claim.methods == (Method.Z3, Method.NUMERIC)

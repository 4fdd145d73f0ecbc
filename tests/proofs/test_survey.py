"""The survey claims: expected statuses (regression) and one mutation meta-test per
method kind (a wrong sign or value flips the check to FAIL)."""

from __future__ import annotations

import pytest
import sympy as sp

from theorycheck.claims import Method, Outcome, Status, evaluate

from ._helpers import check_named, claims

EXPECTED = {
    "survey.dual_clip_example": Status.HOLDS,
    "survey.dppo_vs_ppo_example": Status.HOLDS,
    "survey.weight_form_same_gradient": Status.HOLDS,
    "survey.all_rules_agree_on_policy": Status.HOLDS,
    "survey.reduction_weights_are_not_gradient_norms": Status.HOLDS,
}


@pytest.fixture(scope="module")
def survey():
    return claims("survey")


def _run(check, **kwargs):
    return check.run(quick=True, **kwargs)


def test_survey_claims_are_all_present_with_two_kinds(survey):
    assert set(survey) == set(EXPECTED)
    for claim in survey.values():
        assert len(claim.methods) >= 2, claim.id


#: quick results already evaluated in this process (the registry test reads the
#: numeric check's result of the status test instead of running it a second time)
_QUICK: dict = {}


@pytest.mark.parametrize("cid", sorted(EXPECTED))
def test_survey_claim_status(survey, cid):
    result = _QUICK[cid] = evaluate(survey[cid], quick=True)
    assert result.status is EXPECTED[cid], [m.result.detail for m in result.methods]


def test_all_rules_covers_the_whole_registry(survey):
    from theorycheck.losses import TOKEN_RULES

    cid = "survey.all_rules_agree_on_policy"
    check = check_named(survey[cid], "float64")
    done = _QUICK.get(cid)
    if done is not None:  # the status test ran here: its numeric check's result
        (result,) = [m.result for m in done.methods if m.name == check.name]
    else:
        result = _run(check)
    assert result.outcome is Outcome.PASS
    assert sorted(result.data["rules"]) == sorted(TOKEN_RULES)


# --- mutation meta-tests: one per method kind -----------------------------------------


def test_mutation_numeric_wrong_sign_of_the_ppo_coefficient(survey):
    check = check_named(survey["survey.dual_clip_example"], "float64")
    assert check.method is Method.NUMERIC and _run(check).outcome is Outcome.PASS
    wrong = {"ppo": (4.0, -4.0), "dual_clip": (0.0, -3.0)}
    res = _run(check, expected=wrong)
    assert res.outcome is Outcome.FAIL and res.counterexample["rule"] == "ppo"


def test_mutation_symbolic_squared_weight(survey):
    check = check_named(survey["survey.weight_form_same_gradient"], "sympy")
    assert check.method is Method.SYMBOLIC and _run(check).outcome is Outcome.PASS
    assert _run(check, weight=lambda r: r**2).outcome is Outcome.FAIL


def test_mutation_symbolic_dppo_gate_value(survey):
    check = check_named(survey["survey.dppo_vs_ppo_example"], "exact")
    wrong = {"ppo": -0.74 / 0.90, "dppo_binary_tv": -0.74 / 0.90}  # "DPPO keeps it"
    assert _run(check, expected=wrong).outcome is Outcome.FAIL


def test_mutation_z3_wrong_threshold(survey):
    check = check_named(survey["survey.dppo_vs_ppo_example"], "z3")
    assert check.method is Method.Z3 and _run(check).outcome is Outcome.PASS
    res = _run(check, threshold=sp.Rational(4, 5))  # q = 0.76 is a counterexample
    assert (
        res.outcome is Outcome.FAIL
        and float(sp.Rational(res.counterexample["q"])) <= 0.8
    )


def test_mutation_property_clipped_weight(survey):
    check = check_named(survey["survey.weight_form_same_gradient"], "hypothesis")
    assert check.method is Method.PROPERTY
    # CISPO's default bounds 0.5-5 clip w: then w != r and the gradients differ.
    assert _run(check, bounds={"low": 0.5, "high": 5.0}).outcome is Outcome.FAIL

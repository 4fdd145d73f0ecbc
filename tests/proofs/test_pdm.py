"""The predictive-divergence-mask claims: expected statuses (regression) and one
mutation meta-test per method kind (a wrong sign or a missing term flips the check)."""

from __future__ import annotations

import pytest

from theorycheck.claims import Method, Outcome, Status, evaluate

from ._helpers import check_named, claims, module_of, outcome
from .test_new_claims import NEW_IDS

EXPECTED = {
    "pdm.lemma_softmax_direction": Status.HOLDS,
    "pdm.prop1_ddot_closed_form": Status.HOLDS,
    "pdm.local_term_is_ratio_sign": Status.HOLDS,
    "pdm.topk_aggregated_exact_on_reduced": Status.HOLDS,
    "pdm.topk_uniform_exact_on_uniform_tail": Status.HOLDS,
    "pdm.binary_reduction": Status.HOLDS,
    "pdm.tv_extension": Status.HOLDS,
    "pdm.first_order_sign": Status.HOLDS,
    "pdm.first_order_sign_any_step": Status.FAILS,
}
MEASURED = {
    "pdm.sign_disagreement_exists": Status.HOLDS,
    "pdm.remark2_small_step_premise": Status.FAILS,
}


@pytest.fixture(scope="module")
def pdm():
    return claims("pdm")


def test_pdm_claims_are_all_present_with_two_kinds(pdm):
    assert set(pdm) - NEW_IDS["pdm"] == set(EXPECTED) | set(MEASURED)
    for claim in pdm.values():
        assert len(claim.methods) >= 2, claim.id


@pytest.mark.parametrize("cid", sorted(EXPECTED))
def test_pdm_claim_status(pdm, cid):
    result = evaluate(pdm[cid], quick=True)
    assert result.status is EXPECTED[cid], [m.result.detail for m in result.methods]


@pytest.mark.slow
def test_pdm_sign_disagreement_on_smollm2(pdm):
    result = evaluate(pdm["pdm.sign_disagreement_exists"], quick=True)
    assert result.status is Status.HOLDS
    rate = result.methods[1].result.data["mean_disagreement_rate"]
    assert 0.0 < rate < 1.0


def test_pdm_first_order_counterexamples_are_kept(pdm):
    result = evaluate(pdm["pdm.first_order_sign_any_step"], quick=True)
    kinds = {m.result.counterexample["kind"] for m in result.methods}
    assert kinds == {"kl", "tv"}
    assert all(m.outcome is Outcome.FAIL for m in result.methods)


# --- mutations: each method kind must notice a wrong formula --------------------------


def test_mutation_prop1_missing_global_term(pdm, monkeypatch):
    claim = pdm["pdm.prop1_ddot_closed_form"]
    mod = module_of(claim)
    before = {c.method: outcome(c) for c in claim.checks}
    assert set(before.values()) == {Outcome.PASS}
    monkeypatch.setattr(mod, "global_term", lambda mu, pi: 0 * pi[0])
    after = {c.method: outcome(c) for c in claim.checks}
    assert after == {
        Method.SYMBOLIC: Outcome.FAIL,
        Method.NUMERIC: Outcome.FAIL,
        Method.PROPERTY: Outcome.FAIL,
    }


def test_mutation_lemma_wrong_sign(pdm, monkeypatch):
    claim = pdm["pdm.lemma_softmax_direction"]
    mod = module_of(claim)
    rate, factored = mod.rate, mod.rate_k_factored
    monkeypatch.setattr(mod, "rate", lambda pi, v: [-x for x in rate(pi, v)])
    monkeypatch.setattr(mod, "rate_k_factored", lambda pi, k: -factored(pi, k))
    after = {c.method: outcome(c) for c in claim.checks}
    assert after == {
        Method.SYMBOLIC: Outcome.FAIL,
        Method.Z3: Outcome.FAIL,
        Method.NUMERIC: Outcome.FAIL,
    }
    assert evaluate(claim, quick=True).status is Status.FAILS


def test_mutation_topk_uniform_missing_division(pdm, monkeypatch):
    claim = pdm["pdm.topk_uniform_exact_on_uniform_tail"]
    mod = module_of(claim)
    agg = mod.aggregated  # the aggregated estimator lacks the 1/(V - |S|)
    monkeypatch.setattr(mod, "uniform", lambda mu, pi, k, s, v: agg(mu, pi, k, s))
    assert {outcome(c) for c in claim.checks} == {Outcome.FAIL}


def test_mutation_binary_reduction_wrong_sign(pdm, monkeypatch):
    claim = pdm["pdm.binary_reduction"]
    mod = module_of(claim)
    full = mod.binary_full
    monkeypatch.setattr(mod, "binary_full", lambda m, p, k: -full(m, p, k))
    after = {c.method: outcome(c) for c in claim.checks}
    assert after == {
        Method.SYMBOLIC: Outcome.FAIL,
        Method.Z3: Outcome.FAIL,
        Method.NUMERIC: Outcome.FAIL,
    }


def test_mutation_first_order_curvature_missing_mean(pdm, monkeypatch):
    claim = pdm["pdm.first_order_sign"]
    mod = module_of(claim)
    monkeypatch.setattr(
        mod, "line_curvature", lambda pi, v: sum(p * x**2 for p, x in zip(pi, v))
    )
    check = check_named(claim, "sympy")
    assert check.method is Method.SYMBOLIC
    assert outcome(check) is Outcome.FAIL


@pytest.mark.slow
def test_pdm_small_step_premise_on_smollm2(pdm):
    """Remark 2's premise at lr 1e-6 on SmolLM2: the measured figure and its setting
    are in the result; a flip is re-checked at 50 digits."""
    result = evaluate(pdm["pdm.remark2_small_step_premise"], quick=True)
    measured, certified = result.methods
    data = measured.result.data
    assert "lr = 1e-06" in data["setting"] and data["tokens"] == 11
    assert 0 < data["sign_flips"] < data["tokens"]
    cx = measured.result.counterexample
    assert (cx["first_order"] > 0) != (cx["realized_50"] > 0)
    assert certified.result.data["certified"] < data["tokens"]


def test_mutation_disagreement_without_global_term_finds_no_witness(pdm, monkeypatch):
    claim = pdm["pdm.sign_disagreement_exists"]
    mod = module_of(claim)
    monkeypatch.setattr(mod, "ddot_kl", lambda mu, pi, k: pi[k] - mu[k])
    check = check_named(claim, "z3")
    assert outcome(check) is Outcome.UNKNOWN


@pytest.mark.slow
def test_mutation_measurement_without_global_term_sees_no_disagreement(
    pdm, monkeypatch
):
    claim = pdm["pdm.sign_disagreement_exists"]
    mod = module_of(claim)
    monkeypatch.setattr(mod, "global_rows", lambda mu, pi: 0.0 * mu[:, :1])
    check = check_named(claim, "SmolLM2")
    assert check.method is Method.MEASUREMENT
    assert outcome(check) is Outcome.UNKNOWN

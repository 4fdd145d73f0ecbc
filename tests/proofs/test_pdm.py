"""The predictive-divergence-mask claims: expected statuses (regression) and one
mutation meta-test per method kind (a wrong sign or a missing term flips the check)."""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path

import pytest

from theorycheck.claims import Method, Outcome, Status, evaluate, run_check

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


def test_premise_committed_measurement_is_current(pdm):
    """Remark 2's premise on SmolLM2 is a committed measurement: its file was made by
    ``prove --remeasure`` at today's settings with today's measuring code (else a
    plain prove would measure again), and its rows give the stated verdict: a sign
    flip of the first-order term that survives 50 digits."""
    from theorycheck.claims._measured import code_hash

    mod = module_of(pdm["pdm.remark2_small_step_premise"])
    common = sys.modules[mod.__package__ + "._common"]
    stored = json.loads(Path(common.PREMISE_STORE).read_text())
    prov, rows = stored["provenance"], stored["data"]["rows"]
    assert prov["command"] == "theorycheck prove --remeasure"
    assert len(prov["commit"]) == 40 and prov["dirty"] is False
    assert prov["settings"] == json.loads(json.dumps(common.PREMISE_FULL))
    measure = functools.partial(common.measure_premise, common.PREMISE_FULL)
    assert prov["code_sha256"] == code_hash(measure)
    assert common.premise_measurement(False).fresh is False  # read back, not redone
    assert [r["position"] for r in rows] == list(range(31))
    result = mod.premise_verdict(rows, "committed")
    assert result.outcome is Outcome.FAIL
    assert 0 < result.data["sign_flips"] < result.data["tokens"] == 31
    cx = result.counterexample
    assert (cx["first_order"] > 0) != (cx["realized_50"] > 0)
    assert (cx["realized"] > 0) == (cx["realized_50"] > 0)
    sure = [r for r in rows if abs(r["first_order"]) > r["remainder_bound"]]
    assert len(sure) < len(rows)
    # a row whose flip does not survive 50 digits is no counterexample
    undone = [{**r, "realized_50": -r["realized"]} for r in rows]
    assert mod.premise_verdict(undone, "x").outcome is Outcome.UNKNOWN


@pytest.mark.slow
def test_smollm2_measurements_on_the_checkpoint(pdm, monkeypatch):
    """One SmolLM2 load for the real-checkpoint routes: the sign-disagreement
    measurement (and its mutation), and the premise's recomputation route, which
    re-scores the committed rows and must notice rows of another model or text."""
    check = check_named(pdm["pdm.sign_disagreement_exists"], "SmolLM2")
    assert check.method is Method.MEASUREMENT
    result = run_check(check, quick=False).result
    assert result.outcome is Outcome.PASS
    assert 0.0 < result.data["mean_disagreement_rate"] < 1.0

    premise = pdm["pdm.remark2_small_step_premise"]
    mod = module_of(premise)
    common = sys.modules[mod.__package__ + "._common"]
    measured_check = check_named(premise, "SmolLM2")
    res = run_check(measured_check, quick=False).result
    assert res.outcome is Outcome.FAIL, res.detail
    assert "the committed measurement" in res.detail
    assert res.data["replay"]["within_tolerance"] is True
    rows = common.premise_measurement(False).data["rows"]
    mu, _, pi = common.precision_pair(False)
    ids = common.smollm2()[2].encode(common.MEASURE_TEXT).ids
    assert common.replay_gap(rows, mu, pi, ids)["within_tolerance"]
    other = [{**r, "logp_trainer": r["logp_trainer"] + 0.01} for r in rows]
    assert not common.replay_gap(other, mu, pi, ids)["within_tolerance"]
    shifted = [{**r, "token": ids[r["position"] + 2]} for r in rows]
    gap = common.replay_gap(shifted, mu, pi, ids)
    assert gap["tokens_match"] is False and not gap["within_tolerance"]
    monkeypatch.setattr(mod, "premise_replay_gap", lambda r, q: gap)
    assert run_check(measured_check, quick=False).outcome is Outcome.UNKNOWN

    disagreement = module_of(pdm["pdm.sign_disagreement_exists"])
    monkeypatch.setattr(disagreement, "global_rows", lambda mu, pi: 0.0 * mu[:, :1])
    assert run_check(check, quick=False).outcome is Outcome.UNKNOWN


def test_mutation_disagreement_without_global_term_finds_no_witness(pdm, monkeypatch):
    claim = pdm["pdm.sign_disagreement_exists"]
    mod = module_of(claim)
    monkeypatch.setattr(mod, "ddot_kl", lambda mu, pi, k: pi[k] - mu[k])
    check = check_named(claim, "z3")
    assert outcome(check) is Outcome.UNKNOWN

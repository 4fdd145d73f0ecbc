"""The nine claims added for DPPO §2-3, PDM Remark 3 / top-K / Appendix D and LCO
§4.1-4.2: discovered, >= 2 method kinds, quick status, and mutations caught."""

from __future__ import annotations

from fractions import Fraction

import pytest

from theorycheck.claims import Kind, Outcome, Status, evaluate

from ._helpers import check_named, claims, module_of, outcome

#: id -> (folder, expected quick status, kind)
NEW = {
    "dppo.theorem2_1": ("dppo", Status.HOLDS_WITH_CORRECTION, Kind.THEOREM),
    "dppo.theorem3_1": ("dppo", Status.HOLDS, Kind.THEOREM),
    "dppo.theorem3_2": ("dppo", Status.HOLDS, Kind.THEOREM),
    "dppo.pinsker": ("dppo", Status.HOLDS, Kind.EQUATION),
    "pdm.remark3_multi_token": ("pdm", Status.FAILS, Kind.ASSUMPTION),
    "pdm.topk_estimators_track_ddot": ("pdm", Status.HOLDS, Kind.ASSUMPTION),
    "pdm.topk_estimators_track_ddot_low_mass": ("pdm", Status.FAILS, Kind.EXTENSION),
    "pdm.appendix_d_topk_tv": ("pdm", Status.HOLDS, Kind.EQUATION),
    "lco.eq13_dpo_advantage": ("lco", Status.HOLDS, Kind.EQUATION),
    "lco.lco_optimum_solves_rl": ("lco", Status.HOLDS, Kind.PROPOSITION),
    "dppo.core_divergences_match_the_paper": ("dppo", Status.HOLDS, Kind.EQUATION),
    "dppo.worked_example_ratio_blind_to_mass": ("dppo", Status.HOLDS, Kind.REMARK),
    "dppo.token_ratio_misses_prefix_shift": ("dppo", Status.HOLDS, Kind.REMARK),
    "pdm.ddot_along_unit_direction": ("pdm", Status.HOLDS, Kind.PROPOSITION),
    "lco.optimal_logits_unique_up_to_shift": (
        "lco",
        Status.HOLDS_WITH_CORRECTION,
        Kind.PROPOSITION,
    ),
}
#: the new ids of each folder (the folder tests subtract them)
NEW_IDS = {f: {i for i, v in NEW.items() if v[0] == f} for f in ("dppo", "pdm", "lco")}
SLOW = {"pdm.remark3_multi_token"}


@pytest.fixture(scope="module")
def found():
    out = {}
    for folder in ("dppo", "pdm", "lco"):
        out.update(claims(folder))
    return out


def test_new_claims_are_discovered_with_metadata(found):
    for cid, (_, _, kind) in NEW.items():
        claim = found[cid]
        assert len(claim.methods) >= 2, cid
        assert claim.kind is kind, cid
        assert claim.quote and claim.location and claim.assumptions, cid
        if kind is Kind.EXTENSION:
            assert claim.extends in NEW and found[claim.extends].kind is not kind
        else:
            assert claim.extends is None, cid
        if claim.correction is not None:
            kinds = {c.method for c in claim.correction.checks}
            assert len(kinds) >= 2, cid


@pytest.mark.parametrize("cid", sorted(set(NEW) - SLOW))
def test_new_claim_quick_status(found, cid):
    result = evaluate(found[cid], quick=True)
    assert result.status is NEW[cid][1], [m.result.detail for m in result.methods]
    assert not result.errors, [m.error for m in result.errors]


def test_remark3_measured_fails_on_the_tiny_model(found):
    result = evaluate(found["pdm.remark3_multi_token"], quick=True)
    assert result.status is Status.FAILS
    by_kind = {m.method.value: m.result for m in result.methods}
    assert by_kind["simulation"].outcome is Outcome.FAIL
    assert by_kind["measurement"].outcome in (Outcome.FAIL, Outcome.PASS)
    cx = by_kind["simulation"].counterexample
    # the reversal is the batch's: the token's own update keeps the predicted sign
    pred = cx["predicted_A_ddot"]
    assert pred * cx["realized_batch_delta_kl_50_digits"] < 0
    assert pred * cx["realized_own_delta_kl_50_digits"] > 0


# --- the counterexample of Theorem 2.1, exactly --------------------------------------


def test_theorem2_1_counterexample_exact(found):
    mod = module_of(found["dppo.theorem2_1"])
    g, alpha, eps = Fraction(1, 2), Fraction(1, 10), Fraction(1, 100)
    P, R, mu, pi, rho0 = mod.family(g, alpha, eps)
    dppo, diff, lin, xi, tv = mod._bound_gap(P, R, mu, pi, rho0, g, 2)
    trpo = mod._bound_gap(P, R, mu, pi, rho0, g, 4)[0]
    assert (diff, lin, xi, tv) == (Fraction(178, 555), Fraction(198, 505), 1, alpha)
    assert dppo < 0 <= trpo


def test_mutation_theorem2_1_constant_4_is_not_refuted(found, monkeypatch):
    claim = found["dppo.theorem2_1"]
    mod = module_of(claim)
    monkeypatch.setattr(mod, "DPPO_C", 4)
    assert outcome(check_named(claim, "exact policy")) is not Outcome.FAIL


def test_mutation_theorem2_1_sharpness_of_3_fails(found, monkeypatch):
    claim = found["dppo.theorem2_1"]
    mod = module_of(claim)
    monkeypatch.setattr(mod, "TRPO_C", 3)
    check = check_named(claim, "sympy, sharpness", correction=True)
    assert outcome(check) is not Outcome.PASS


def test_mutation_theorem3_1_wrong_delta_is_caught(found, monkeypatch):
    claim = found["dppo.theorem3_1"]
    mod = module_of(claim)
    real = mod.decomposition

    def wrong(mu, pi, reward, seqs):
        diff, lp, delta = real(mu, pi, reward, seqs)
        return diff, lp, 2 * delta

    monkeypatch.setattr(mod, "decomposition", wrong)
    assert outcome(check_named(claim, "exact enumeration")) is Outcome.FAIL
    assert outcome(check_named(claim, "sympy")) is Outcome.FAIL


def test_mutation_theorem3_2_without_penalty_is_refuted(found, monkeypatch):
    claim = found["dppo.theorem3_2"]
    monkeypatch.setattr(module_of(claim), "T32_C", 0)
    assert outcome(check_named(claim, "z3")) is Outcome.FAIL


def test_mutation_pinsker_quarter_is_refuted(found, monkeypatch):
    claim = found["dppo.pinsker"]
    monkeypatch.setattr(module_of(claim), "PINSKER_C", 0.25)
    assert outcome(check_named(claim, "hypothesis")) is Outcome.FAIL
    assert outcome(check_named(claim, "sympy")) is Outcome.FAIL  # C >= 1/2 needed


def test_mutation_lco_wrong_temperature_is_caught(found, monkeypatch):
    claim = found["lco.lco_optimum_solves_rl"]
    mod = module_of(claim)
    real = mod.pi_star
    monkeypatch.setattr(mod, "pi_star", lambda q, a, b: real(q, a, 2 * b))
    assert outcome(check_named(claim, "float64 minimisation")) is Outcome.FAIL


def test_mutation_eq13_without_beta_is_caught(found, monkeypatch):
    claim = found["lco.eq13_dpo_advantage"]
    mod = module_of(claim)
    real = mod._soft_values
    # soft values on the wrong scale (2 V*): the identity must no longer close
    monkeypatch.setattr(
        mod, "_soft_values", lambda *a: {k: 2 * v for k, v in real(*a).items()}
    )
    assert outcome(check_named(claim, "float64 marginals")) is Outcome.FAIL


def test_mutation_track_threshold_decides(found, monkeypatch):
    claim = found["pdm.topk_estimators_track_ddot_low_mass"]
    mod = module_of(claim)
    check = check_named(claim, "random")
    assert outcome(check) is Outcome.FAIL
    monkeypatch.setattr(mod, "TRACK_THRESHOLD", 0.5)
    assert outcome(check) is Outcome.PASS


def test_mutation_appendix_d_sign_flip_is_caught(found, monkeypatch):
    claim = found["pdm.appendix_d_topk_tv"]
    mod = module_of(claim)
    real = mod._reduced_tv_fd
    monkeypatch.setattr(mod, "_reduced_tv_fd", lambda *a, **k: -real(*a, **k))
    assert outcome(check_named(claim, "jax.jvp")) is Outcome.FAIL

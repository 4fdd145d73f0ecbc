"""The DPPO claims: expected statuses (regression) and mutation meta-tests."""

from __future__ import annotations

import pytest

from theorycheck.claims import Method, Outcome, Status, evaluate, run_check

from ._helpers import check_named, claims, module_of, outcome
from .test_new_claims import NEW_IDS

EXPECTED = {
    "dppo.binary_divergence_lower_bound": Status.HOLDS,
    "dppo.topk_divergence_lower_bound": Status.HOLDS,
    "dppo.ppo_ratio_is_single_sample_tv": Status.HOLDS,
    "dppo.eq10_truncated_sampling": Status.HOLDS_WITH_CORRECTION,
    "dppo.mask_direction_rule": Status.HOLDS,
}


@pytest.fixture(scope="module")
def dppo():
    return claims("dppo")


def test_dppo_claims_are_all_present_with_two_kinds(dppo):
    assert set(dppo) - NEW_IDS["dppo"] == set(EXPECTED)
    for claim in dppo.values():
        assert len(claim.methods) >= 2, claim.id


@pytest.mark.parametrize("cid", sorted(EXPECTED))
def test_dppo_claim_status(dppo, cid):
    result = evaluate(dppo[cid], quick=True)
    assert result.status is EXPECTED[cid], [m.result.detail for m in result.methods]


def test_dppo_eq10_counterexample_is_exact(dppo):
    result = evaluate(dppo["dppo.eq10_truncated_sampling"], quick=True)
    cx = result.methods[0].result.counterexample
    assert (cx["tv"], cx["single_sample"]) == ("1/2", "1/4")


def test_mutation_binary_tv_doubled_is_refuted_by_z3(dppo, monkeypatch):
    claim = dppo["dppo.binary_divergence_lower_bound"]
    mod = module_of(claim)
    bt = mod.binary_tv
    monkeypatch.setattr(mod, "binary_tv", lambda m, p: 2 * bt(m, p))
    check = check_named(claim, "z3")
    assert check.method is Method.Z3 and outcome(check) is Outcome.FAIL


def test_mutation_kl_chain_rule_missing_weight(dppo, monkeypatch):
    claim = dppo["dppo.topk_divergence_lower_bound"]
    mod = module_of(claim)
    kl = mod.kl_terms
    # Drop the last term of every KL sum: the chain rule no longer closes.
    monkeypatch.setattr(mod, "kl_terms", lambda m, p: kl(m[:-1], p[:-1]))
    check = check_named(claim, "sympy")
    assert check.method is Method.SYMBOLIC and outcome(check) is Outcome.FAIL


def test_mutation_gate_with_wrong_direction(dppo, monkeypatch):
    import sympy as sp

    claim = dppo["dppo.mask_direction_rule"]
    mod = module_of(claim)

    def flipped(div, p, q, adv, delta):
        r = p / q
        return sp.And(
            div > delta, sp.Or(sp.And(adv > 0, r < 1), sp.And(adv < 0, r > 1))
        )

    monkeypatch.setattr(mod, "eq12_masked", flipped)
    assert outcome(check_named(claim, "z3")) is Outcome.FAIL


def test_mutation_eq10_correction_wrong_factor(dppo, monkeypatch):
    claim = dppo["dppo.eq10_truncated_sampling"]
    mod = module_of(claim)
    unseen = mod.unseen_mass
    monkeypatch.setattr(mod, "unseen_mass", lambda mu, pi: 2 * unseen(mu, pi))
    check = check_named(claim, "Monte Carlo, full", correction=True)
    assert check.method is Method.NUMERIC and outcome(check) is Outcome.FAIL


def test_mutation_eq10_full_support_dropped_term(dppo, monkeypatch):
    claim = dppo["dppo.ppo_ratio_is_single_sample_tv"]
    mod = module_of(claim)
    monkeypatch.setattr(
        mod, "tv", lambda mu, pi: 0.9 * sum(abs(m - p) for m, p in zip(mu, pi)) / 2
    )
    check = check_named(claim, "Monte Carlo, full")
    assert check.method is Method.NUMERIC and outcome(check) is Outcome.FAIL


def test_z3_on_an_unbuildable_eq10_correction_is_a_clean_unknown(dppo, monkeypatch):
    """A mutation that leaves SymPy's zoo (complex infinity) in the z3 formula is an
    UNKNOWN naming the reason, not an error."""
    import sympy as sp

    claim = dppo["dppo.eq10_truncated_sampling"]
    mod = module_of(claim)
    monkeypatch.setattr(mod, "unseen_mass_weight", lambda: sp.Integer(1) / 0)
    result = run_check(check_named(claim, "z3", correction=True))
    assert result.outcome is Outcome.UNKNOWN and result.error is None
    assert "zoo" in result.result.detail

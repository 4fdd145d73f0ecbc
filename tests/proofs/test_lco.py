"""The LCO claims: expected statuses (regression) and one mutation meta-test per
method kind (a wrong sign, a missing term or factor flips the check to FAIL)."""

from __future__ import annotations

import inspect
import math

import pytest
import sympy as sp

from theorycheck.claims import Method, Outcome, Status, evaluate
from theorycheck.losses import LOSSES

from ._helpers import check_named, claims
from .test_new_claims import NEW_IDS

EXPECTED = {
    "lco.optimal_policy_closed_form": Status.HOLDS,
    "lco.sft_logits_convex": Status.HOLDS,
    "lco.ppo_not_logits_convex": Status.HOLDS,
    "lco.ppo_psd_region": Status.HOLDS,
    "lco.lco_losses_logits_convex": Status.HOLDS,
    "lco.prop4_4_gradient_directionality": Status.HOLDS_WITH_CORRECTION,
    "lco.prop4_7_norms_diminish_without_sigma_bound": Status.HOLDS_WITH_CORRECTION,
    "lco.prop4_8_mse_linear_convergence": Status.HOLDS,
    "lco.prop4_9_lch_linear_convergence": Status.HOLDS,
    "lco.target_shift_mean_zero": Status.HOLDS_WITH_CORRECTION,
    "lco.deployed_target_moves": Status.HOLDS_WITH_CORRECTION,
    "lco.assumption4_2_parameter_transfer": Status.FAILS,
}


@pytest.fixture(scope="module")
def lco():
    return claims("lco")


def _run(check, **kwargs):
    return check.run(quick=True, **kwargs)


def test_lco_claims_are_all_present_with_two_kinds(lco):
    assert set(lco) - NEW_IDS["lco"] == set(EXPECTED)
    for claim in lco.values():
        assert len(claim.methods) >= 2, claim.id
        if claim.correction is not None:
            kinds = {c.method for c in claim.correction.checks}
            assert len(kinds) >= 2, claim.id


@pytest.mark.parametrize("cid", sorted(EXPECTED))
def test_lco_claim_status(lco, cid):
    result = evaluate(lco[cid], quick=True)
    details = [m.result.detail for m in result.methods]
    assert result.status is EXPECTED[cid], details
    if EXPECTED[cid] is Status.HOLDS_WITH_CORRECTION:
        # every statement check found the counterexample (two routes to it)
        assert all(m.outcome is Outcome.FAIL for m in result.methods), details


def test_ppo_psd_witness_is_an_unclipped_exact_psd_point(lco):
    check = check_named(lco["lco.ppo_psd_region"], "z3: PSD region")
    res = _run(check)
    assert res.outcome is Outcome.PASS
    witness = res.data["witness"]
    eig = [sp.Rational(e) for e in witness["eigenvalues"]]
    assert min(eig) >= 0
    ratio = sp.Rational(witness["pi"][0]) / sp.Rational(witness["mu_k"])
    assert 1 < ratio < sp.Rational(6, 5)  # unclipped for PPO's default eps = 0.2


def test_ppo_region_is_right_at_zero_advantage(lco):
    """At A = 0 the Hessian is 0 (PSD for every pi_k): the region check samples it,
    and the old region (A >= 0 and pi_k >= 1/2) is refuted there."""
    check = check_named(lco["lco.ppo_psd_region"], "float64 eigenvalues")
    res = _run(check)
    assert res.outcome is Outcome.PASS and "A in -1.5, -0.4, 0," in res.detail


def test_mutation_ppo_lemma_witness_inside_the_psd_region(lco, monkeypatch):
    # The lemma's symbolic route: moved to pi_k = 2/3 (inside the PSD region for
    # A > 0), the state no longer shows negative curvature for both signs of A.
    claim = lco["lco.ppo_not_logits_convex"]
    check = check_named(claim, "sympy")
    assert check.method is Method.SYMBOLIC and _run(check).outcome is Outcome.PASS
    mod = inspect.getmodule(check.run)
    monkeypatch.setattr(
        mod, "UNIFORM", [sp.Rational(2, 3), sp.Rational(1, 6), sp.Rational(1, 6)]
    )
    assert _run(check).outcome is Outcome.FAIL


def test_target_shift_counterexample_is_minus_one_over_beta_v(lco):
    check = check_named(lco["lco.target_shift_mean_zero"], "sympy")
    res = _run(check)
    assert res.counterexample["sparse"]["c_star"] == "-1/8"  # -A/(beta V), V=4, beta=2


# --- mutation meta-tests: one per method kind -----------------------------------------


def test_mutation_symbolic_wrong_sign_of_the_target(lco):
    check = check_named(lco["lco.optimal_policy_closed_form"], "sympy")
    assert check.method is Method.SYMBOLIC and _run(check).outcome is Outcome.PASS

    def wrong(old, adv, beta):  # pi_old exp(-A/beta) / Z
        w = [o * sp.exp(-a / beta) for o, a in zip(old, adv)]
        return [x / sp.Add(*w) for x in w]

    assert _run(check, candidate=wrong).outcome is Outcome.FAIL


def test_mutation_z3_negated_sft_spec(lco):
    check = check_named(lco["lco.sft_logits_convex"], "z3")
    assert check.method is Method.Z3 and _run(check).outcome is Outcome.PASS
    spec = LOSSES["sft"].symbolic
    res = _run(check, spec=lambda z, k: -spec(z, k))
    assert res.outcome is Outcome.FAIL and res.counterexample


def test_mutation_numeric_missing_clip_term(lco):
    claim = lco["lco.ppo_psd_region"]
    check = check_named(claim, "float64 eigenvalues")
    assert check.method is Method.NUMERIC and _run(check).outcome is Outcome.PASS
    # is_pg = PPO without its clip: the clipped states are no longer PSD.
    assert _run(check, name="is_pg").outcome is Outcome.FAIL


def test_mutation_numeric_wrong_sign_of_the_lco_losses(lco):
    check = check_named(lco["lco.lco_losses_logits_convex"], "float64")
    assert _run(check, sign=-1.0).outcome is Outcome.FAIL


def test_mutation_simulation_rate_of_the_fastest_mode(lco):
    check = check_named(lco["lco.prop4_8_mse_linear_convergence"], "GD")
    assert check.method is Method.SIMULATION and _run(check).outcome is Outcome.PASS

    def fastest(lams, eta, vocab):  # min instead of max over the modes
        return min(abs(1.0 - eta * lam / vocab) for lam in lams)

    assert _run(check, rate=fastest).outcome is Outcome.FAIL


def test_mutation_simulation_lch_rate_without_kappa(lco):
    check = check_named(lco["lco.prop4_9_lch_linear_convergence"], "GD")

    def no_kappa(lams, eta, vocab, loss0):  # as if log-cosh were strongly convex
        return 1.0 - eta * min(lams) / vocab

    assert _run(check, rate=no_kappa).outcome is Outcome.FAIL


def test_mutation_symbolic_exact_rate(lco):
    check = check_named(lco["lco.prop4_8_mse_linear_convergence"], "exact")
    assert check.method is Method.SYMBOLIC and _run(check).outcome is Outcome.PASS

    def fastest(lams, eta, vocab):  # min instead of max over the modes
        return min(abs(1.0 - eta * lam / vocab) for lam in lams)

    assert _run(check, rate=fastest).outcome is Outcome.FAIL


def test_mutation_property_bound_missing_factor_two(lco):
    claim = lco["lco.prop4_7_norms_diminish_without_sigma_bound"]
    check = check_named(claim, "hypothesis", correction=True)
    assert check.method is Method.PROPERTY and _run(check).outcome is Outcome.PASS

    def no_two(name, loss, vocab):  # sqrt(L/V): the MSE bound is an equality at 2L/V
        return math.sqrt(loss / vocab) if name == "lco_mse" else math.sqrt(2 * loss)

    assert _run(check, g=no_two).outcome is Outcome.FAIL


def test_mutation_property_directionality_without_slack(lco):
    claim = lco["lco.prop4_4_gradient_directionality"]
    check = check_named(claim, "hypothesis", correction=True)
    assert _run(check, slack=3.0).outcome is Outcome.FAIL


def test_mutation_symbolic_linear_model_transfers_the_sign(lco):
    claim = lco["lco.assumption4_2_parameter_transfer"]
    check = check_named(claim, "exact")
    assert check.method is Method.SYMBOLIC and _run(check).outcome is Outcome.FAIL
    # without the curvature of z(theta) (a linear model) the signs agree
    assert _run(check, model=lambda x: 2 * x).outcome is Outcome.PASS

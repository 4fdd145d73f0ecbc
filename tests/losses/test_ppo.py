"""The survey's worked examples and exact clip boundaries of the PPO family."""

from __future__ import annotations

import pytest

from theorycheck.losses import LOSSES


def _c(name, p, q, adv, **params):
    c, gated = LOSSES[name].coefficient(p, q, adv, **params)
    return float(c), bool(gated)


def test_ppo_coefficient_survey_r4():
    assert _c("ppo", 0.4, 0.1, -1.0) == (pytest.approx(-4.0), False)


def test_dual_clip_coefficient_survey_kappa3():
    assert _c("dual_clip", 0.4, 0.1, -1.0) == (0.0, True)
    assert _c("dual_clip", 0.4, 0.1, 1.0)[0] == 0.0  # A > 0: PPO's upper clip


def test_ppo_coefficient_survey_dppo_example():
    c, gated = _c("ppo", 0.74, 0.90, -1.0)
    assert c == pytest.approx(-0.8222222222, rel=1e-9) and not gated
    assert _c("dppo_binary_tv", 0.74, 0.90, -1.0) == (0.0, True)


def test_ppo_coefficient_keeps_ties_at_the_clip():
    # p / q = 1.25 and 0.75 exactly (dyadic): on the boundary the token is kept.
    assert _c("ppo", 0.625, 0.5, 2.0, eps_high=0.25) == (2.5, False)
    assert _c("ppo", 0.375, 0.5, -2.0, eps_low=0.25) == (-1.5, False)
    assert _c("dual_clip", 0.75, 0.25, -1.0)[0] == -3.0  # r = kappa = 3 kept


def test_all_token_rules_reduce_to_adv_on_policy():
    # Survey: at p = q every rule gives c = A (GSPO: A s / L with s = 1, L = 1).
    for name in (
        "pg",
        "is_pg",
        "ppo",
        "dapo",
        "dual_clip",
        "cispo",
        "glm5",
        "sapo",
        "gspo",
        "gspo_token",
        "dppo_binary_tv",
        "dppo_binary_kl",
        "dppo_capped",
    ):
        assert _c(name, 0.3, 0.3, -0.7)[0] == pytest.approx(-0.7, rel=1e-12), name

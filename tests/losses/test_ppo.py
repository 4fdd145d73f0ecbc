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


def test_literal_jax_min_clip_splits_a_tie_three_quarters():
    # The registry keeps a token exactly on the clip (c = r A, above). A literal
    # min(r A, clip(r) A) in JAX splits both min and clip 0.5 / 0.5 at the tie, so
    # autodiff gives c = r dj/dr = 0.75 r A there (the convention stated in
    # docs/losses.md); just inside the window it is r A again.
    import jax
    import jax.numpy as jnp

    adv = 2.0

    def literal(r):
        return jnp.minimum(r * adv, jnp.clip(r, 0.75, 1.25) * adv)

    for r in (1.25, 1.25 - 2.0**-20):
        c = r * float(jax.grad(literal)(r))
        want = 0.75 * r * adv if r == 1.25 else r * adv
        assert c == want
    assert _c("ppo", 0.625, 0.5, adv, eps_high=0.25)[0] == 1.25 * adv


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

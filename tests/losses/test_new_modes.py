"""verl's dro, geo_mean (GMPO), clip_cov, kl_cov and TRL's luspo, vespo: the registry's
coefficient against autodiff of its JAX loss and against each peer's formula written
out in numpy from its source (verl-project/verl 1dda039, huggingface/trl f2cd577)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from theorycheck.losses import LOSSES
from theorycheck.losses._verl_modes import cov_scores

RNG = np.random.default_rng(7)
P = RNG.uniform(0.02, 0.98, 40)
Q = np.clip(P * np.exp(RNG.normal(0, 0.6, 40)), 0.01, 0.99)
ADV = RNG.choice([-1.3, -0.4, 0.7, 1.5], 40)


def _autodiff(name, p, q, adv, **kw):
    """d(-loss)/d log pi_k of the JAX loss on a 3-token vocabulary."""
    spec = LOSSES[name]
    out = []
    for pi, qi, ai in zip(p, q, adv):
        z = jnp.log(jnp.array([pi, (1 - pi) / 2, (1 - pi) / 2]))
        mu = jnp.log(jnp.array([qi, (1 - qi) / 2, (1 - qi) / 2]))
        g = jax.grad(
            lambda zz, ai=ai, mu=mu: -spec.loss(zz, 0, adv=ai, behavior_logp=mu, **kw)
        )(z)
        out.append(float(g[0]) / (1 - pi))
    return np.array(out)


def _torch_like_grad(f, lp, eps=1e-6):
    """Central difference of a peer formula in log pi (a third route, no autodiff)."""
    return (f(lp + eps) - f(lp - eps)) / (2 * eps)


def test_dro_matches_verl_formula():
    beta = 0.3
    lq = np.log(Q)

    def verl_dro_objective(lp):  # -(pg_losses) of compute_policy_loss_dro
        return lp * ADV - 0.5 * beta * (lp - lq) ** 2

    peer = _torch_like_grad(verl_dro_objective, np.log(P))
    c, gated = LOSSES["dro"].coefficient(P, Q, ADV, beta=beta)
    assert not np.any(gated)
    np.testing.assert_allclose(np.asarray(c), peer, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(_autodiff("dro", P, Q, ADV, beta=beta), c, rtol=1e-9)


def _verl_geo_mean_ratio(lp, lq, adv, eps_low, eps_high, mask):
    """verl compute_policy_loss_geo_mean, one response, numpy."""
    nkl = lp - lq
    sgn = np.sign(adv)
    clamp = np.clip(nkl, -eps_low, eps_high)
    star = sgn * np.minimum(sgn * nkl, sgn * clamp)
    return np.exp((star * mask).sum() / (mask.sum() + 1e-8))


@pytest.mark.parametrize("adv", [1.2, -0.8])
def test_gmpo_matches_verl_geo_mean_per_position(adv):
    length = 5
    lp = np.log(RNG.uniform(0.05, 0.9, length))
    lq = lp + RNG.normal(0, 0.5, length)
    mask = np.ones(length)
    eps = 0.4
    spec = LOSSES["gmpo"]
    for t in range(length):
        star = np.where(adv > 0, np.minimum(lp - lq, eps), np.maximum(lp - lq, -eps))
        other = star.sum() - star[t]

        def objective(x, t=t):
            lpt = lp.copy()
            lpt[t] = x
            return adv * _verl_geo_mean_ratio(lpt, lq, adv, eps, eps, mask)

        h = 1e-6
        peer = (objective(lp[t] + h) - objective(lp[t] - h)) / (2 * h)
        c, gated = spec.coefficient(
            np.exp(lp[t]), np.exp(lq[t]), adv, other_log_ratio=other, length=length
        )
        assert float(c) == pytest.approx(peer, rel=1e-5, abs=1e-9)
        assert bool(gated) == (peer == 0.0)


def test_gmpo_clip_is_not_inverted():
    # TRL #6078 asks whether GMPO's one-sided clip is inverted. The coefficient says:
    # for A > 0 the gradient stops once log r > eps_high (the direction A pushes r),
    # and flows for log r < -eps_low; for A < 0 the reverse. That is PPO's one-sided
    # clip, moved to log space.
    c = LOSSES["gmpo"].coefficient
    e = 0.4
    hi, lo = np.exp(e + 0.1), np.exp(-e - 0.1)
    assert float(c(hi * 0.1, 0.1, 1.0)[0]) == 0.0
    assert float(c(lo * 0.5, 0.5, 1.0)[0]) == pytest.approx(lo)
    assert float(c(lo * 0.5, 0.5, -1.0)[0]) == 0.0
    assert float(c(hi * 0.1, 0.1, -1.0)[0]) == pytest.approx(-hi)


def test_clip_cov_zeroes_selected_tokens_only():
    sel = (RNG.uniform(size=40) < 0.3).astype(float)
    c_sel, g_sel = LOSSES["clip_cov"].coefficient(P, Q, ADV, selected=sel)
    c_ppo, g_ppo = LOSSES["ppo"].coefficient(P, Q, ADV, log_ratio_clamp=np.inf)
    np.testing.assert_allclose(np.asarray(c_sel), np.where(sel > 0, 0.0, c_ppo))
    assert np.all(np.asarray(g_sel) == (np.asarray(g_ppo) | (sel > 0)))
    for s in (0.0, 1.0):
        auto = _autodiff("clip_cov", P, Q, ADV, selected=s)
        c, _ = LOSSES["clip_cov"].coefficient(P, Q, ADV, selected=s)
        np.testing.assert_allclose(auto, c, rtol=1e-9, atol=1e-12)


def test_kl_cov_matches_verl_formula():
    coef = 0.1
    lq = np.log(Q)
    for s in (0.0, 1.0):

        def verl_objective(lp, s=s):  # -(pg_losses) of compute_policy_loss_kl_cov
            return np.exp(lp - lq) * ADV - coef * s * np.abs(lp - lq)

        peer = _torch_like_grad(verl_objective, np.log(P))
        c, _ = LOSSES["kl_cov"].coefficient(P, Q, ADV, selected=s, kl_coef=coef)
        np.testing.assert_allclose(np.asarray(c), peer, rtol=1e-6, atol=1e-8)
        auto = _autodiff("kl_cov", P, Q, ADV, selected=s, kl_coef=coef)
        np.testing.assert_allclose(auto, c, rtol=1e-9, atol=1e-12)


def test_cov_scores_are_centred_and_mask_invalid():
    adv = np.array([[1.0, 1.0, 0.0], [-1.0, -1.0, -1.0]])
    lp = np.array([[-0.1, -2.0, -5.0], [-0.5, -0.2, -3.0]])
    mask = np.array([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])
    cov = cov_scores(adv, lp, mask)
    assert cov[0, 2] == -np.inf
    a_bar, l_bar = -1 / 5, (-0.1 - 2.0 - 0.5 - 0.2 - 3.0) / 5
    assert cov[1, 1] == pytest.approx((-1 - a_bar) * (-0.2 - l_bar))


def test_luspo_is_length_times_gspo_and_matches_trl():
    length, other = 4, 0.3
    c_l, g_l = LOSSES["luspo"].coefficient(
        P, Q, ADV, other_log_ratio=other, length=length
    )
    lq = np.log(Q)

    def trl_luspo(lp):  # -(per_token_loss * |y|): coef_1 = exp(mean log r)
        s = np.exp((lp - lq + other) / length)
        s2 = np.clip(s, 0.8, 1.2)
        return length * np.minimum(s * ADV, s2 * ADV)

    peer = _torch_like_grad(trl_luspo, np.log(P))
    np.testing.assert_allclose(np.asarray(c_l), peer, rtol=1e-5, atol=1e-8)


def _trl_gamma_weight(log_ratio_sum, adv):
    """TRL get_gamma_weights for one sequence (no vLLM IS term)."""
    log_w = np.clip(log_ratio_sum, np.log(1e-8), 20.0)
    k, lam = (2.0, 3.0) if adv >= 0 else (3.0, 2.0)
    return np.exp(lam + k * log_w - lam * np.exp(log_w))


def test_vespo_matches_trl_gamma_weights():
    seq = RNG.normal(0, 1.0, 40)
    c, gated = LOSSES["vespo"].coefficient(P, Q, ADV, seq_log_ratio=seq)
    peer = np.array([a * _trl_gamma_weight(s, a) for s, a in zip(seq, ADV)])
    np.testing.assert_allclose(np.asarray(c), peer, rtol=1e-12)
    assert not np.any(gated)
    # phi(1) = 1: on-policy, VESPO is REINFORCE
    assert float(LOSSES["vespo"].coefficient(0.3, 0.3, 1.0)[0]) == pytest.approx(1.0)
    auto = _autodiff("vespo", P, Q, ADV)
    c1, _ = LOSSES["vespo"].coefficient(P, Q, ADV)
    np.testing.assert_allclose(auto, c1, rtol=1e-9, atol=1e-300)

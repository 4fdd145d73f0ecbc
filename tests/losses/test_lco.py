"""LCO forms: closed-form gradients (two routes) and the code's dense-advantage fill."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from theorycheck.losses import LOSSES, estimate_vocab_adv
from theorycheck.testing import assert_close

RNG = np.random.default_rng(0)
Z = RNG.normal(size=7)
OLD = RNG.normal(size=7)


def _grad(name, adv, **params):
    return jax.grad(
        lambda z: LOSSES[name].loss(z, 2, adv=adv, old_logits=OLD, **params)
    )(Z)


@pytest.mark.parametrize("adv", [1.5, -0.8, np.linspace(-1, 1, 7)])
def test_lco_kld_gradient_is_pi_minus_target(adv):
    a = np.zeros(7)
    a[2] = adv if np.ndim(adv) == 0 else 0.0
    a = adv if np.ndim(adv) == 1 else a
    target = jax.nn.softmax(OLD + a / 2.0)
    assert_close(_grad("lco_kld", adv), jax.nn.softmax(Z) - target)


def test_lco_kld_is_minimised_at_the_target_up_to_a_shift():
    adv = 1.2
    z_star = jnp.asarray(OLD).at[2].add(adv / 2.0) + 3.0
    loss = LOSSES["lco_kld"].loss
    g = jax.grad(lambda z: loss(z, 2, adv=adv, old_logits=OLD))(z_star)
    assert_close(g, np.zeros(7))


@pytest.mark.parametrize("adv,beta_eff", [(1.5, 2.0), (-0.8, 200.0)])
def test_lco_code_gradients_are_constant(adv, beta_eff):
    e = np.zeros(7)
    e[2] = 1.0
    assert_close(_grad("lco_mse_code", adv), -2 * adv / beta_eff * e)
    assert_close(_grad("lco_lch_code", adv), -np.tanh(adv / beta_eff) * e)


def test_lco_mse_paper_gradient_is_residual_over_v():
    a = np.zeros(7)
    a[2] = 0.9
    assert_close(_grad("lco_mse", 0.9), (Z - (OLD + a / 2.0)) / 7)


def test_estimate_vocab_adv_is_zero_mean_under_pi_old():
    for k in range(7):
        a = estimate_vocab_adv(OLD, -1.3, k)
        pi = jax.nn.softmax(OLD)
        if 1 - float(pi[k]) >= 0.1:
            assert abs(float(jnp.sum(pi * a))) < 1e-12
        assert float(a[k]) == pytest.approx(-1.3 * (1 - float(pi[k])))

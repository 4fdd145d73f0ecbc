"""The log-ratio guard: its value clamp and its derivative saturation."""

from __future__ import annotations

import math

import jax
import numpy as np
import pytest

from tests.losses._cases import behavior_with_prob, logits_with_prob
from theorycheck.losses import LOSSES
from theorycheck.losses._common import log_ratio, ratio_terms


def _point(log_r):
    rng = np.random.default_rng(0)
    p = 0.5
    z = logits_with_prob(rng, p, 1)
    mu = behavior_with_prob(rng, p * math.exp(-log_r), 1)
    return z, mu


def test_log_ratio_clamps_value():
    z, mu = _point(21.0)
    assert float(log_ratio(z, 1, mu, 20.0)) == 20.0
    assert float(log_ratio(z, 1, mu, math.inf)) == pytest.approx(21.0, rel=1e-12)


@pytest.mark.parametrize("name", ["is_pg", "ppo", "sapo", "dppo_binary_tv"])
def test_log_ratio_guard_saturates_gradient_through_r(name):
    # Beyond the guard the ratio is constant: every rule whose gradient flows through
    # r loses it (c = 0), although the token is not gated by the rule.
    z, mu = _point(21.0)
    grad = jax.grad(lambda zz: LOSSES[name].loss(zz, 1, adv=-1.0, behavior_logp=mu))(z)
    assert np.all(np.asarray(grad) == 0.0)
    c, gated = LOSSES[name].coefficient(0.5, 0.5 * math.exp(-21.0), -1.0)
    assert float(c) == 0.0 and not bool(gated)
    if name == "sapo":
        return  # SAPO's own gate h(1-h) already underflows to 0 at r = e^21
    # ... and keeps it without the guard.
    free = jax.grad(
        lambda zz: LOSSES[name].loss(
            zz, 1, adv=-1.0, behavior_logp=mu, log_ratio_clamp=math.inf
        )
    )(z)
    assert np.abs(np.asarray(free)).max() > 1.0


@pytest.mark.parametrize("name", ["cispo", "dppo_capped"])
def test_log_ratio_guard_only_clamps_detached_weights(name):
    z, mu = _point(21.0)
    grad = jax.grad(lambda zz: LOSSES[name].loss(zz, 1, adv=-1.0, behavior_logp=mu))(z)
    assert np.abs(np.asarray(grad)).max() > 0.1  # capped weight, gradient kept


def test_ratio_terms_flags_both_sides():
    _, used, sat = ratio_terms(
        np.array([0.5, 1e-12, 0.5]), np.array([1e-12, 0.5, 0.5]), 20.0
    )
    assert np.asarray(sat).tolist() == [True, True, False]
    assert float(used[0]) == pytest.approx(math.exp(20.0))

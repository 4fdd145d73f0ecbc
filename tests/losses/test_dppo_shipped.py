"""DPPO as verl and Stable-RL ship it: verl's capped binary-KL rule and Stable-RL's
K-slot top-K rule, each against an independent route."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import sympy as sp

from theorycheck.losses import LOSSES
from theorycheck.losses._dppo_symbolic import sym_divergence
from theorycheck.numeric import binary_kl, divergence


def _verl_dppo_kl_weight(p, q, adv, delta, cap):
    """verl compute_policy_loss_dppo_kl (verl-project/verl 1dda039) written out for
    one token in plain floats: the detached weight of -A log pi."""
    kl = q * (np.log(q) - np.log(p)) + (1 - q) * np.log((1 - q + 1e-8) / (1 - p + 1e-8))
    if adv > 0:
        valid = kl <= delta or p <= q
    else:
        valid = kl <= delta or p >= q
    return adv * min(p / q, cap) * float(valid)


@pytest.mark.parametrize(
    "p,q,adv", [(0.5, 0.2, 1.0), (0.25, 0.2, 1.0), (0.05, 0.4, -1.0), (0.3, 0.4, -1.0)]
)
def test_binary_kl_capped_matches_verl_formula(p, q, adv):
    spec = LOSSES["dppo_binary_kl_capped"]
    c, _ = spec.coefficient(p, q, adv, delta=0.05, cap=1.5)
    assert float(c) == pytest.approx(
        _verl_dppo_kl_weight(p, q, adv, 0.05, 1.5), rel=1e-6
    )
    # and the JAX loss's autodiff coefficient, on a 3-token vocabulary
    z = jnp.log(jnp.array([p, (1 - p) / 2, (1 - p) / 2]))
    mu = jnp.log(jnp.array([q, (1 - q) / 2, (1 - q) / 2]))
    g = jax.grad(
        lambda zz: -spec.loss(zz, 0, adv=adv, behavior_logp=mu, delta=0.05, cap=1.5)
    )(z)
    assert float(g[0]) / (1 - p) == pytest.approx(float(c), rel=1e-9, abs=1e-12)
    assert bool(binary_kl(p, q) > 0.05) == (float(c) == 0.0 and (p - q) * adv > 0)


def test_k_slots_support_differs_from_union_and_matches_the_spec():
    # sampled token 5 is outside the behavior's top-2: k_slots drops the 2nd slot
    mu = np.log(np.array([0.4, 0.25, 0.15, 0.1, 0.06, 0.04]))
    z = np.array([0.2, 0.1, -0.3, 0.0, 0.4, 0.9])
    union = float(divergence(mu, z, 5, kind="topk_tv", topk=2))
    slots = float(divergence(mu, z, 5, kind="topk_tv", topk=2, support="k_slots"))
    assert union != pytest.approx(slots)
    zs = sp.symbols("z0:6")
    expr = sym_divergence(zs, 5, list(mu), "topk_tv", 2, "k_slots")
    exact = float(expr.subs(dict(zip(zs, z))).evalf())
    assert slots == pytest.approx(exact, rel=1e-12)


def test_stable_rl_topk_rule_defaults():
    for name in ("dppo_topk_tv_k_slots", "dppo_topk_kl_k_slots"):
        d = LOSSES[name].defaults
        assert (d["delta"], d["cap"]) == (0.2, 3.0)

"""Adversarial negative-curvature search: finds known counterexamples, and only them."""

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest

from theorycheck import BadInput
from theorycheck.numeric._curvature_sampled import sampled_token_min_eigenvalue
from theorycheck.numeric._curvature_search import search_negative_curvature
from theorycheck.numeric._hessian import hvp_fn

V = 8
UNIFORM = np.log(np.full(V, 1.0 / V))


def is_surrogate(z, sampled, adv, behavior_logp):
    """-adv * pi_k / mu_k (docs/papers.md §2.5): indefinite for adv > 0 at small
    pi_k."""
    return -adv * jnp.exp(jax.nn.log_softmax(z)[sampled] - behavior_logp[sampled])


def cross_entropy(z, sampled):
    return -jax.nn.log_softmax(z)[sampled]


def cispo(z, sampled, adv, behavior_logp):
    """-adv * sg(clip(r, 0.5, 5)) * log pi_k: nonconvex for adv < 0 (frozen weight)."""
    logp = jax.nn.log_softmax(z)[sampled]
    w = jnp.clip(jnp.exp(logp - behavior_logp[sampled]), 0.5, 5.0)
    return -adv * jax.lax.stop_gradient(w) * logp


# f(x) = -x - eps * softplus(s (x0 - x)) / s, x = log pi_k, x0 = log 1e-6: f' in
# [-1, -0.9] and f'' = -eps s sig (1 - sig). By the structure theorem the Hessian is PSD
# iff -f' + f'' (1 - pi_k) / pi_k >= 0, which fails only for pi_k in about
# (2e-7, 4e-6): nonconvex only near the simplex boundary.
EPS, SHARP, X0 = 0.1, 10.0, float(np.log(1e-6))


def boundary_only(z, sampled):
    x = jax.nn.log_softmax(z)[sampled]
    return -x - EPS * jax.nn.softplus(SHARP * (X0 - x)) / SHARP


def _boundary_only_derivatives(x):
    sig = 1.0 / (1.0 + np.exp(-SHARP * (X0 - x)))
    return -1.0 + EPS * sig, -EPS * SHARP * sig * (1.0 - sig)


def _assert_verified(res, loss, inputs):
    """The reported counterexample is negative curvature by an independent HVP."""
    assert res.found and res.curvature < 0 and res.curvature_fd < 0
    x = np.asarray(res.direction)
    hv = hvp_fn(loss, **inputs)(res.logits, 2, x)
    assert abs(float(np.dot(x, hv)) - res.curvature) <= 1e-10 * abs(res.curvature)
    assert abs(res.curvature_fd - res.curvature) <= 1e-2 * abs(res.curvature)


def test_search_negative_curvature_finds_is_surrogate_counterexample():
    inputs = {"adv": 1.0, "behavior_logp": UNIFORM}
    res = search_negative_curvature(
        is_surrogate, V, 2, inputs=inputs, key=jr.key(0), num_starts=6, steps=12
    )
    _assert_verified(res, is_surrogate, inputs)
    # f = -adv exp(x)/mu_k: f' = f'' = -adv r. Any unit x has x^T H x >= lambda_min,
    # and the search ends on (nearly) the eigenvector of lambda_min.
    p = np.asarray(jax.nn.softmax(res.logits))
    r = p[2] * V
    lam = sampled_token_min_eigenvalue(-r, -r, p, 2)
    assert res.curvature >= lam - 1e-10 * abs(lam)
    assert res.curvature <= 0.99 * lam  # the search converged to the eigenvector


def test_search_negative_curvature_finds_cispo_with_negative_advantage():
    inputs = {"adv": -1.0, "behavior_logp": UNIFORM}
    res = search_negative_curvature(
        cispo, V, 2, inputs=inputs, key=jr.key(1), num_starts=6, steps=12
    )
    _assert_verified(res, cispo, inputs)


def test_search_negative_curvature_reports_none_for_cross_entropy():
    res = search_negative_curvature(
        cross_entropy, V, 2, key=jr.key(2), num_starts=6, steps=12
    )
    assert res.found is False
    assert res.logits is None and res.direction is None
    assert res.num_samples == 2 * 6 * 12
    # the most negative value seen is rounding-level, never a claim
    assert res.curvature > -1e-12


def test_search_negative_curvature_boundary_regime_finds_boundary_only_loss():
    kwargs = {"key": jr.key(3), "num_starts": 6, "steps": 12}
    interior = search_negative_curvature(
        boundary_only, V, 2, regimes=("interior",), **kwargs
    )
    boundary = search_negative_curvature(
        boundary_only, V, 2, regimes=("boundary",), **kwargs
    )
    # logits in [-3, 3] keep pi_k >= e^-6 / V: the nonconvex region is out of reach
    assert interior.found is False and interior.num_samples == 6 * 12
    _assert_verified(boundary, boundary_only, {})
    assert boundary.regime == "boundary"
    pk = float(jax.nn.softmax(boundary.logits)[2])
    assert 1e-7 < pk < 1e-5
    f1, f2 = _boundary_only_derivatives(np.log(pk))
    assert -f1 + f2 * (1 - pk) / pk < 0  # the structure theorem agrees: not PSD there


def gated(z, sampled, adv, behavior_logp):
    """-adv * r inside 0.8 < r < 3, constant outside (dual-clip PPO with adv < 0)."""
    r = jnp.exp(jax.nn.log_softmax(z)[sampled] - behavior_logp[sampled])
    return jnp.where((r > 0.8) & (r < 3.0), -adv * r, 0.0)


def test_search_negative_curvature_leaves_flat_regions():
    # Where the gate is closed H = 0 and the curvature has no gradient: the search
    # must walk (randomly) rather than stall. Nonconvex inside the gate for adv < 0.
    inputs = {"adv": -1.0, "behavior_logp": UNIFORM}
    res = search_negative_curvature(
        gated,
        V,
        2,
        inputs=inputs,
        key=jr.key(5),
        num_starts=6,
        steps=12,
        regimes=("boundary",),
    )
    _assert_verified(res, gated, inputs)
    r = float(jax.nn.softmax(res.logits)[2]) * V
    assert 0.8 < r < 3.0


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"regimes": ("edge",)}, "regime"),
        ({"vocab": 1}, "vocab"),
        ({"sampled": 9}, "out of range"),
        ({"inputs": {"adv": 1.0, "behavior_logp": np.zeros(3)}}, "length 3"),
    ],
)
def test_search_negative_curvature_rejects_bad_input(kwargs, match):
    args = {"vocab": V, "sampled": 2, "inputs": {"adv": 1.0, "behavior_logp": UNIFORM}}
    args |= kwargs
    with pytest.raises(BadInput, match=match):
        search_negative_curvature(
            is_surrogate,
            args.pop("vocab"),
            args.pop("sampled"),
            key=jr.key(0),
            num_starts=1,
            steps=1,
            **args,
        )


@pytest.mark.slow
def test_search_negative_curvature_at_qwen_vocab_uses_lanczos():
    size = 151936
    inputs = {"adv": 1.0, "behavior_logp": np.log(np.full(size, 1.0 / size))}
    res = search_negative_curvature(
        is_surrogate,
        size,
        2,
        inputs=inputs,
        key=jr.key(4),
        num_starts=1,
        steps=3,
        regimes=("boundary",),
    )
    assert res.found and res.num_samples == 3
    _assert_verified(res, is_surrogate, inputs)

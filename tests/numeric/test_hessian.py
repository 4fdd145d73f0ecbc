"""Logit HVPs, dense Hessians, ``min_eigenvalue`` and the sampled-token closed form."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from theorycheck import BadInput
from theorycheck.numeric._curvature_sampled import sampled_token_min_eigenvalue
from theorycheck.numeric._hessian import (
    hvp_fn,
    logit_hessian,
    min_eigenvalue,
)
from theorycheck.testing import FD_TOLERANCE, assert_close, directions, logits, simplex


def cross_entropy(z, sampled):
    return -jax.nn.log_softmax(z)[sampled]


def is_surrogate(z, sampled, adv, behavior_logp):
    """-adv * pi_k / mu_k (docs/papers.md §2.5): the IS / PPO-inside-clip surrogate."""
    return -adv * jnp.exp(jax.nn.log_softmax(z)[sampled] - behavior_logp[sampled])


def frozen_weight(z, sampled, adv):
    """-adv * sg(pi_k) * log pi_k: a frozen weight (CISPO-like)."""
    logp = jax.nn.log_softmax(z)[sampled]
    return -adv * jax.lax.stop_gradient(jnp.exp(logp)) * logp


def _policy(z):
    e = np.exp(z - z.max())
    return e / e.sum()


def _dense_sampled_hessian(f1, f2, p, k):
    v = -p.copy()
    v[k] += 1.0
    return f2 * np.outer(v, v) - f1 * (np.diag(p) - np.outer(p, p))


# ---- hvp_fn -------------------------------------------------------------------------


@given(z=logits(6, max_abs=10.0), u=directions(6), k=st.integers(0, 5))
def test_hvp_fn_matches_jax_hessian(z, u, k):
    behavior_logp = np.log(np.full(6, 1.0 / 6.0))
    hvp = hvp_fn(is_surrogate, adv=1.3, behavior_logp=behavior_logp)
    h = logit_hessian(
        is_surrogate, z, k, inputs={"adv": 1.3, "behavior_logp": behavior_logp}
    )
    assert_close(hvp(z, k, u), np.asarray(h) @ u)


def test_hvp_fn_matches_closed_form_and_central_differences():
    z = np.array([0.3, -1.2, 2.0, 0.1, -0.5], dtype=np.float64)
    u = np.array([1.0, -0.5, 0.25, 0.0, 0.7], dtype=np.float64)
    p = _policy(z)
    # cross-entropy: H = diag(pi) - pi pi^T (docs/papers.md §2.5)
    expected = (np.diag(p) - np.outer(p, p)) @ u
    assert_close(hvp_fn(cross_entropy)(z, 2, u), expected)
    h = 1e-5
    grad = jax.grad(cross_entropy)
    fd = (grad(z + h * u, 2) - grad(z - h * u, 2)) / (2 * h)
    assert_close(
        hvp_fn(cross_entropy)(z, 2, u), fd, rtol=FD_TOLERANCE[0], atol=FD_TOLERANCE[1]
    )


def test_hvp_fn_treats_stop_gradient_as_frozen():
    z = np.array([0.5, -0.3, 1.1], dtype=np.float64)
    u = np.array([0.2, 1.0, -0.4], dtype=np.float64)
    p = _policy(z)
    # -adv * w * log pi_k with w = pi_k frozen: H = adv * w * (diag pi - pi pi^T)
    expected = 2.0 * p[1] * (np.diag(p) - np.outer(p, p)) @ u
    assert_close(hvp_fn(frozen_weight, adv=2.0)(z, 1, u), expected)


def test_hvp_fn_returns_float64_under_float32_inputs():
    out = hvp_fn(cross_entropy)(np.zeros(4, np.float32), 0, np.ones(4, np.float32))
    assert out.dtype == jnp.float64


# ---- min_eigenvalue -----------------------------------------------------------------


def test_min_eigenvalue_dense_and_lanczos_agree():
    rng = np.random.default_rng(0)
    z = rng.standard_normal(300) * 2.0
    inputs = {"adv": 0.7, "behavior_logp": np.log(_policy(rng.standard_normal(300)))}
    dense = min_eigenvalue(is_surrogate, z, 4, inputs=inputs, method="dense")
    lanczos = min_eigenvalue(is_surrogate, z, 4, inputs=inputs, method="lanczos")
    assert dense.method == "dense" and lanczos.method == "lanczos"
    assert dense.value < 0
    assert_close(lanczos.value, dense.value, rtol=1e-9, atol=0)
    assert lanczos.residual < 1e-8 and dense.residual < 1e-10
    assert abs(abs(float(jnp.vdot(dense.vector, lanczos.vector))) - 1.0) < 1e-6


def test_min_eigenvalue_cross_entropy_is_zero_with_ones_vector():
    z = np.linspace(-3.0, 3.0, 700)
    res = min_eigenvalue(cross_entropy, z, 10)
    assert res.method == "lanczos"
    assert res.value == 0.0  # exact: H 1 = 0 is checked, the complement is positive
    assert res.residual < 1e-15
    assert_close(res.vector, np.full(700, 1.0 / np.sqrt(700.0)))


@pytest.mark.parametrize(
    "bad, match",
    [
        ({"logits": np.zeros((2, 3))}, "1-D"),
        ({"logits": np.array([0.0, np.nan, 1.0])}, "non-finite"),
        ({"sampled": 3}, "out of range"),
        ({"method": "power"}, "method"),
    ],
)
def test_min_eigenvalue_rejects_bad_input(bad, match):
    args = {"logits": np.zeros(3), "sampled": 0, "method": "auto"} | bad
    with pytest.raises(BadInput, match=match):
        min_eigenvalue(
            cross_entropy, args["logits"], args["sampled"], method=args["method"]
        )


def test_min_eigenvalue_rejects_non_scalar_loss():
    with pytest.raises(BadInput, match="scalar"):
        min_eigenvalue(lambda z, k: jax.nn.log_softmax(z), np.zeros(3), 0)


# ---- sampled_token_min_eigenvalue ---------------------------------------------------


@given(
    p=simplex(7, min_prob=1e-9),
    k=st.integers(0, 6),
    f1=st.floats(-50.0, 50.0),
    f2=st.floats(-50.0, 50.0),
)
def test_sampled_token_min_eigenvalue_matches_dense_eigh(p, k, f1, f2):
    expected = np.linalg.eigvalsh(_dense_sampled_hessian(f1, f2, p, k))[0]
    got = sampled_token_min_eigenvalue(f1, f2, p, k)
    # both are backward stable: absolute error ~ eps * ||H||, ||H|| <= 2(|f1| + |f2|)
    assert abs(got - expected) <= 1e-13 * (abs(f1) + abs(f2) + 1.0)


@given(
    p=simplex(5, min_prob=1e-6),
    k=st.integers(0, 4),
    f1=st.floats(-5.0, 5.0),
    f2=st.floats(-5.0, 5.0),
)
def test_sampled_token_min_eigenvalue_sign_follows_structure_theorem(p, k, f1, f2):
    # V >= 3: PSD iff f' <= 0 and -f' + f''(1 - pi_k)/pi_k >= 0 (docs/design.md)
    margin = min(-f1, -f1 + f2 * (1.0 - p[k]) / p[k])
    lam = sampled_token_min_eigenvalue(f1, f2, p, k)
    scale = 1e-12 * (abs(f1) + abs(f2) + 1.0)
    if margin > 1e-6:
        assert lam >= -scale
    elif margin < -1e-6:
        assert lam < -scale


@settings(max_examples=8)  # each example is one HVP-Lanczos run at V = 4096
@given(seed=st.integers(0, 2**31 - 1), adv=st.floats(0.1, 3.0))
def test_sampled_token_min_eigenvalue_matches_lanczos_at_large_vocab(seed, adv):
    rng = np.random.default_rng(seed)
    size = 4096
    z = rng.standard_normal(size) * 3.0
    behavior_logp = np.log(_policy(rng.standard_normal(size) * 3.0))
    p = _policy(z)
    k = int(rng.integers(size))
    ratio = p[k] / np.exp(behavior_logp[k])
    # f(x) = -adv * exp(x) / mu_k: f' = f'' = -adv * r
    closed = sampled_token_min_eigenvalue(-adv * ratio, -adv * ratio, p, k)
    res = min_eigenvalue(
        is_surrogate, z, k, inputs={"adv": adv, "behavior_logp": behavior_logp}
    )
    assert res.value < 0
    assert abs(res.value - closed) <= 1e-9 * abs(closed) + res.residual


@pytest.mark.slow
def test_sampled_token_min_eigenvalue_matches_lanczos_at_qwen_vocab():
    rng = np.random.default_rng(1)
    size = 151936
    z = rng.standard_normal(size) * 3.0
    z[7] = z.max() - 13.0  # the sampled token near the boundary: pi_k ~ 1e-6 / V
    behavior_logp = np.log(_policy(rng.standard_normal(size)))
    p = _policy(z)
    ratio = p[7] / np.exp(behavior_logp[7])
    closed = sampled_token_min_eigenvalue(-2.0 * ratio, -2.0 * ratio, p, 7)
    res = min_eigenvalue(
        is_surrogate, z, 7, inputs={"adv": 2.0, "behavior_logp": behavior_logp}
    )
    assert abs(res.value - closed) <= 1e-9 * abs(closed) + res.residual


@pytest.mark.parametrize(
    "args, match",
    [
        ((1.0, 0.0, np.array([0.5, 0.6]), 0), "sum to 1"),
        ((1.0, 0.0, np.array([1.5, -0.5]), 0), "nonnegative"),
        ((1.0, 0.0, np.array([0.5, 0.5]), 2), "out of range"),
        ((np.nan, 0.0, np.array([0.5, 0.5]), 0), "finite"),
    ],
)
def test_sampled_token_min_eigenvalue_rejects_bad_input(args, match):
    with pytest.raises(BadInput, match=match):
        sampled_token_min_eigenvalue(*args)


# ---- sharding -----------------------------------------------------------------------


@pytest.mark.multidevice
def test_hvp_fn_accepts_sharded_logits():
    if jax.device_count() < 8:
        pytest.skip(
            "needs 8 devices (XLA_FLAGS=--xla_force_host_platform_device_count=8)"
        )
    from jax.sharding import AxisType, NamedSharding
    from jax.sharding import PartitionSpec as P

    # Auto axes: XLA propagates the vocabulary sharding through the user's loss.
    mesh = jax.make_mesh((8,), ("vocab",), axis_types=(AxisType.Auto,))
    sharding = NamedSharding(mesh, P("vocab"))
    rng = np.random.default_rng(0)
    size = 8 * 128  # above DENSE_MAX_VOCAB: the Lanczos route
    z = rng.standard_normal(size)
    u = rng.standard_normal(size)
    behavior_logp = np.log(_policy(rng.standard_normal(size)))
    hvp = hvp_fn(
        is_surrogate,
        adv=1.0,
        behavior_logp=jax.device_put(jnp.asarray(behavior_logp), sharding),
    )
    zs, us = (
        jax.device_put(jnp.asarray(z), sharding),
        jax.device_put(jnp.asarray(u), sharding),
    )
    out = hvp(zs, 3, us)
    assert len(out.sharding.device_set) == 8
    plain = hvp_fn(is_surrogate, adv=1.0, behavior_logp=behavior_logp)(z, 3, u)
    assert_close(out, plain)
    res = min_eigenvalue(
        is_surrogate, zs, 3, inputs={"adv": 1.0, "behavior_logp": behavior_logp}
    )
    ref = min_eigenvalue(
        is_surrogate, z, 3, inputs={"adv": 1.0, "behavior_logp": behavior_logp}
    )
    assert_close(res.value, ref.value, rtol=1e-9, atol=0)

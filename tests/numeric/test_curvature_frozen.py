"""Frozen (stop_gradient held) loss evaluation and the second-difference route."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings

from theorycheck.numeric._curvature_frozen import frozen_loss_fn, second_difference
from theorycheck.testing import assert_close, directions, logits


def cispo_like(z):
    """-adv * sg(clip(r, 0.5, 5)) * log pi_k with adv = -1, mu uniform, k = 1."""
    logp = jax.nn.log_softmax(z)
    w = jax.lax.stop_gradient(jnp.clip(jnp.exp(logp[1]) * z.shape[0], 0.5, 5.0))
    return w * logp[1]


def test_frozen_loss_fn_holds_stop_gradient_values():
    z0 = np.array([0.2, -1.0, 0.5, 2.0], dtype=np.float64)
    z = np.array([1.0, 0.3, -0.7, 0.0], dtype=np.float64)
    w0 = np.clip(np.exp(jax.nn.log_softmax(z0)[1]) * 4, 0.5, 5.0)
    expected = w0 * jax.nn.log_softmax(z)[1]  # the weight stays at its z0 value
    assert_close(frozen_loss_fn(cispo_like, z0)(z), expected)
    assert_close(frozen_loss_fn(cispo_like, z0)(z0), cispo_like(z0))


def test_frozen_loss_fn_without_stop_gradient_is_the_loss():
    def f(z):
        return jnp.sum(z**2)

    assert frozen_loss_fn(f, np.zeros(3)) is f


def test_frozen_loss_fn_rejects_stop_gradient_in_control_flow():
    def f(z):
        return jax.lax.cond(
            z[0] > 0, lambda y: jax.lax.stop_gradient(y[1]) * y[0], lambda y: y[0], z
        )

    with pytest.raises(NotImplementedError, match="cond"):
        frozen_loss_fn(f, np.ones(2))(np.ones(2))


@settings(max_examples=50)  # each example interprets the jaxpr eagerly, 10 times
@given(z=logits(5, max_abs=8.0), x=directions(5))
def test_second_difference_matches_hvp_of_frozen_loss(z, x):
    x = x / np.linalg.norm(x)
    hvp = jax.jvp(jax.grad(cispo_like), (z,), (x,))[1]
    expected = float(np.dot(x, hvp))
    got, noise = second_difference(frozen_loss_fn(cispo_like, z), z, x)
    # O(h^4) truncation after Richardson (h = 2e-3) plus rounding (noise)
    assert abs(float(got) - expected) <= 1e-6 * (1 + abs(expected)) + 10 * float(noise)


def test_second_difference_of_unfrozen_loss_differs_from_hvp():
    # Meta-check: freezing matters. Without it the difference sees the weight move.
    z = np.array([0.1, -0.2, 0.3, 0.0], dtype=np.float64)  # r = 4 pi_1 inside [0.5, 5]
    x = np.array([0.0, 1.0, 0.0, 0.0], dtype=np.float64)
    hvp = float(np.dot(x, jax.jvp(jax.grad(cispo_like), (z,), (x,))[1]))
    frozen, _ = second_difference(frozen_loss_fn(cispo_like, z), z, x)
    unfrozen, _ = second_difference(cispo_like, z, x)
    assert abs(float(frozen) - hvp) < 1e-6
    assert abs(float(unfrozen) - hvp) > 1e-2

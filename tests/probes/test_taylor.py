"""The NTK-coupled prediction: JVP derivatives against finite differences."""

import jax
import jax.numpy as jnp
import numpy as np

from theorycheck.probes import divergences, kl_rows, predict_change
from theorycheck.rl import TrainConfig, Trainer


def test_kl_rows_matches_the_definition():
    rng = np.random.default_rng(0)
    mu = rng.dirichlet(np.ones(7), size=3)
    z = rng.normal(size=(3, 7))
    pi = np.exp(z) / np.exp(z).sum(-1, keepdims=True)
    want = np.sum(mu * np.log(mu / pi), -1)
    np.testing.assert_allclose(np.asarray(kl_rows(np.log(mu), z)), want, rtol=1e-12)


def test_predicted_change_matches_finite_differences(tiny, rollouts_bf16):
    tr = Trainer(tiny, rollouts_bf16, TrainConfig(lr=1e-2), seed=0)
    theta = tr.trainable0
    adv = np.asarray(tr.batch.adv)
    rows = next(r for r in tr.minibatch_rows if np.any(adv[r] != 0))
    _, grads = tr.loss_and_grad(theta, rows)
    _, _, delta = tr.update(theta, tr.optimizer.init(theta), grads)
    d0, first, second = predict_change(tr, theta, delta)
    np.testing.assert_array_equal(d0, divergences(tr, theta))
    h = 1e-4
    at = lambda s: divergences(
        tr, jax.tree_util.tree_map(lambda p, d: p + s * h * d, theta, delta)
    )
    plus, minus = at(1.0), at(-1.0)
    # central differences: O(h^2) truncation, roundoff ~1e-16 · D / h^2 ~ 1e-10
    np.testing.assert_allclose(first, (plus - minus) / (2 * h), atol=1e-8, rtol=1e-4)
    np.testing.assert_allclose(
        second, (plus - 2 * d0 + minus) / h**2, atol=1e-6, rtol=1e-3
    )


def test_second_order_prediction_beats_first_order_on_a_real_step(tiny, rollouts_bf16):
    tr = Trainer(tiny, rollouts_bf16, TrainConfig(lr=1e-2), seed=0)
    theta = tr.trainable0
    adv = np.asarray(tr.batch.adv)
    rows = next(r for r in tr.minibatch_rows if np.any(adv[r] != 0))
    _, grads = tr.loss_and_grad(theta, rows)
    new, _, delta = tr.update(theta, tr.optimizer.init(theta), grads)
    d0, first, second = predict_change(tr, theta, delta)
    real = divergences(tr, new) - d0
    err1 = np.median(np.abs(first - real))
    err2 = np.median(np.abs(first + 0.5 * second - real))
    assert err2 < err1


def test_chunking_is_exact(tiny, rollouts_bf16):
    tr = Trainer(tiny, rollouts_bf16, TrainConfig(), seed=0)
    theta = tr.trainable0
    delta = jax.tree_util.tree_map(lambda p: 1e-3 * jnp.ones_like(p), theta)
    a = predict_change(tr, theta, delta, chunk=4)
    b = predict_change(tr, theta, delta, chunk=16)
    for x, y in zip(a, b):
        np.testing.assert_allclose(x, y, rtol=1e-12, atol=1e-15)

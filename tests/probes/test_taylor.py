"""The NTK-coupled prediction: JVP derivatives against finite differences."""

import jax
import jax.numpy as jnp
import numpy as np

from theorycheck.numeric import divergence
from theorycheck.probes import divergences, kl_rows, predict_change
from theorycheck.rl import TrainConfig, Trainer


def test_kl_rows_matches_the_definition():
    rng = np.random.default_rng(0)
    mu = rng.dirichlet(np.ones(7), size=3)
    z = rng.normal(size=(3, 7))
    pi = np.exp(z) / np.exp(z).sum(-1, keepdims=True)
    want = np.sum(mu * np.log(mu / pi), -1)
    np.testing.assert_allclose(np.asarray(kl_rows(np.log(mu), z)), want, rtol=1e-12)


def test_kl_rows_is_the_numeric_kl_with_zero_mass_tokens():
    # kl_rows is numeric's full KL of log_softmax(z): the same values as the checked
    # public divergence(kind="kl"), also where μ_i = 0 (log μ_i = -inf, 0 log 0 = 0),
    # and finite derivatives there (the probes differentiate it twice).
    rng = np.random.default_rng(1)
    mu = rng.dirichlet(np.ones(6), size=4)
    mu[:, 2] = 0.0
    mu[1, 4] = 0.0
    mu /= mu.sum(-1, keepdims=True)
    with np.errstate(divide="ignore"):
        blogp = np.log(mu)
    z = rng.normal(size=(4, 6))
    want = divergence(blogp, z, np.zeros(4, int), kind="kl")
    got = kl_rows(blogp, z)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    pi = np.exp(z) / np.exp(z).sum(-1, keepdims=True)
    live = mu > 0
    ref = np.sum(np.where(live, mu * (np.where(live, blogp, 0) - np.log(pi)), 0), -1)
    np.testing.assert_allclose(np.asarray(got), ref, rtol=1e-12)
    v = rng.normal(size=z.shape)
    f = lambda e: kl_rows(blogp, z + e * v)  # noqa: E731
    d1 = jax.jvp(f, (0.0,), (1.0,))[1]
    d2 = jax.jvp(lambda e: jax.jvp(f, (e,), (1.0,))[1], (0.0,), (1.0,))[1]
    assert np.all(np.isfinite(np.asarray(d1))) and np.all(np.isfinite(np.asarray(d2)))
    # ∂D/∂z = π − μ, so the first derivative along v is <π − μ, v>
    np.testing.assert_allclose(np.asarray(d1), np.sum((pi - mu) * v, -1), rtol=1e-10)


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

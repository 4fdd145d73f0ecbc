"""Off-policy corrections, KL estimators and reductions with a count mask: each
against an independent route (a per-element loop, the peers' formulas written out,
autodiff)."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from theorycheck._errors import BadInput
from theorycheck.losses import (
    LOSSES,
    Reduction,
    combine,
    corrected_coefficient,
    geo_mask_sequence,
    icepop,
    kl_k1,
    kl_k2,
    kl_k3,
    kl_straight_through,
    mis_sequence,
    mis_token,
    product_mask_sequence,
    reduction_weights,
    reject_kl,
    sequence_ratio_stats,
    tis_sequence,
    tis_token,
)

RNG = np.random.default_rng(3)
X = RNG.normal(0, 0.4, (6, 9))
LENGTHS = [9, 7, 5, 3, 1, 0]
M = (np.arange(9)[None] < np.array(LENGTHS)[:, None]).astype(float)


def _loop(fn):
    """A correction evaluated element by element in plain Python."""
    out = np.zeros_like(X)
    for s in range(X.shape[0]):
        xs = [X[s, t] for t in range(X.shape[1]) if M[s, t] > 0]
        for t in range(X.shape[1]):
            if M[s, t] > 0:
                out[s, t] = fn(X[s, t], xs)
    return out


def test_token_corrections_match_a_loop():
    np.testing.assert_allclose(
        tis_token(X, M, 1.3).weights, _loop(lambda x, _: min(math.exp(x), 1.3))
    )

    def mis(x, _):
        return math.exp(x) if 0.8 <= math.exp(x) <= 1.25 else 0.0

    np.testing.assert_allclose(mis_token(X, M, 0.8, 1.25).weights, _loop(mis))
    np.testing.assert_allclose(icepop(X, M, 0.8, 1.25).weights, _loop(mis))


def test_sequence_corrections_match_a_loop():
    def tis(_, xs):
        return min(math.exp(sum(xs)), 1.5)

    def mis(_, xs):
        return math.exp(sum(xs)) if 0.5 <= math.exp(sum(xs)) <= 2 else 0.0

    def geo(_, xs):
        return 1.0 if 0.9 <= math.exp(sum(xs) / len(xs)) <= 1.1 else 0.0

    def prod(_, xs):
        return 1.0 if 0.5 <= math.exp(sum(xs)) <= 2.0 else 0.0

    np.testing.assert_allclose(tis_sequence(X, M, 1.5).weights, _loop(tis))
    np.testing.assert_allclose(mis_sequence(X, M, 0.5, 2.0).weights, _loop(mis))
    np.testing.assert_allclose(geo_mask_sequence(X, M, 0.9, 1.1).weights, _loop(geo))
    np.testing.assert_allclose(
        product_mask_sequence(X, M, 0.5, 2.0).weights, _loop(prod)
    )
    c = geo_mask_sequence(X, M, 0.9, 1.1)
    # a whole response is rejected or kept
    for s in range(6):
        row = c.rejected[s][M[s] > 0]
        assert row.all() or not row.any()


@pytest.mark.parametrize("estimator", ["k1", "k2", "k3"])
@pytest.mark.parametrize("level", ["token", "seq_sum", "seq_mean", "seq_max"])
def test_reject_kl_matches_verl_formula(estimator, level):
    if estimator == "k1" and level == "seq_max":
        with pytest.raises(BadInput):
            reject_kl(X, M, estimator, level)
        return
    upper = 1.5 if estimator == "k1" else 0.05
    stat = {
        "k1": lambda x: -x,
        "k2": lambda x: 0.5 * x * x,
        "k3": lambda x: math.exp(x) - 1 - x,
    }[estimator]

    def keep(x, xs):
        if level == "token":
            v = stat(x)
        elif level == "seq_sum":
            v = sum(stat(u) for u in xs)
        elif level == "seq_mean":
            v = sum(stat(u) for u in xs) / len(xs)
        else:
            v = max(stat(u) for u in xs)
        if estimator == "k1":
            return float(math.log(1 / upper) <= v <= math.log(upper))
        return float(v <= upper)

    got = reject_kl(X, M, estimator, level, upper)
    np.testing.assert_array_equal(got.weights, _loop(keep))
    assert not got.rejected[M == 0].any()


def test_k1_window_bounds_the_inverse_ratio():
    # verl's k1 statistic is -x = log(pi_roll / pi_old): with "0.6_1.4" a token with
    # pi_old / pi_roll = 1.5 (outside [0.6, 1.4]) is kept, one with 0.65 is rejected.
    x = np.log(np.array([[1.5, 0.65]]))
    kept = reject_kl(x, np.ones((1, 2)), "k1", "token", upper=1.4, lower=0.6)
    assert kept.weights.tolist() == [[1.0, 0.0]]


def test_corrections_compose_with_any_rule():
    p = RNG.uniform(0.05, 0.95, X.shape)
    q = np.clip(p * np.exp(-X), 1e-3, 1.0)
    adv = np.repeat(RNG.normal(size=(6, 1)), 9, axis=1)
    both = combine(tis_token(X, M, 2.0), geo_mask_sequence(X, M, 0.9, 1.1))
    for rule in ("ppo", "cispo", "dro", "dppo_capped"):
        c, _ = LOSSES[rule].coefficient(p, q, adv)
        out = corrected_coefficient(c, both)
        expected = np.asarray(c) * np.minimum(np.exp(X), 2.0) * M
        expected = expected * geo_mask_sequence(X, M, 0.9, 1.1).weights
        np.testing.assert_allclose(out, expected)


def test_sequence_ratio_grows_with_length():
    x = np.full((1, 100), 0.012)
    stats = sequence_ratio_stats(x, np.ones((1, 100)))
    assert stats["product_ratio"]["max"] == pytest.approx(math.exp(1.2))
    assert stats["geometric_ratio"]["max"] == pytest.approx(math.exp(0.012))


def test_kl_estimators_values_and_gradients():
    lp = jnp.array([-0.3, -1.2, -2.0])
    ref = jnp.array([-0.5, -1.0, -2.5])
    d = lp - ref
    np.testing.assert_allclose(kl_k1(lp, ref), d)
    np.testing.assert_allclose(kl_k2(lp, ref), 0.5 * d**2)
    np.testing.assert_allclose(kl_k3(lp, ref), np.exp(-d) + d - 1, rtol=1e-12)
    for est in ("k1", "k3"):
        st = kl_straight_through(lp, ref, est)
        plain = {"k1": kl_k1, "k3": kl_k3}[est](lp, ref)
        np.testing.assert_allclose(st, plain, rtol=1e-12)
        g = jax.grad(lambda v, est=est: jnp.sum(kl_straight_through(v, ref, est)))(lp)
        np.testing.assert_allclose(g, d, rtol=1e-12)  # k2's gradient
    # k3's own gradient: 1 - e^{-d}
    g3 = jax.grad(lambda v: jnp.sum(kl_k3(v, ref)))(lp)
    np.testing.assert_allclose(g3, 1 - np.exp(-d), rtol=1e-12)


def test_count_mask_shrinks_the_loss_instead_of_renormalising():
    # verl #4852: the token count is taken before a rejection mask. Rejecting half
    # the tokens then halves the total weight of a token-mean instead of keeping 1.
    mask = np.ones((2, 4))
    rejected = mask.copy()
    rejected[0, :2] = 0
    rejected[1, :2] = 0
    before = np.asarray(
        reduction_weights(rejected, Reduction("token_mean"), count_mask=mask)
    )
    after = np.asarray(reduction_weights(rejected, Reduction("token_mean")))
    assert before.sum() == pytest.approx(0.5)
    assert after.sum() == pytest.approx(1.0)


def test_bad_windows_are_refused():
    with pytest.raises(BadInput):
        mis_token(X, M, 2.0, 1.0)
    with pytest.raises(BadInput):
        tis_token(X, M[:, :3])


def test_token_sum_weighs_every_valid_token_one():
    w = np.asarray(reduction_weights(M, Reduction("token_sum")))
    np.testing.assert_array_equal(w, M)

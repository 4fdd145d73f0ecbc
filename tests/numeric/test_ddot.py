"""Tests for theorycheck.numeric._ddot: closed forms vs jax.jvp vs finite diffs."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from tests.numeric._helpers import FEW, positions, softmax_np
from theorycheck import BadInput
from theorycheck.numeric import TopKBehavior, ddot, divergence, topk_predict
from theorycheck.testing import FD_TOLERANCE, assert_close

ESTIMATORS = ("topk_aggregated", "topk_uniform", "topk_proportional")


def _along(b, z, k, kind, **kw):
    """t -> D(mu || softmax(z + t v)) with v = e_k - softmax(z) held fixed."""
    v = jnp.asarray(np.eye(len(z))[k] - softmax_np(z))
    z = jnp.asarray(z)
    return lambda t: divergence(b, z + t * v, k, kind=kind, **kw)


def _no_ties(b, z, gap=1e-6):
    return np.min(np.abs(np.exp(b) - softmax_np(z))) > gap


# Expensive: several jit/autodiff calls per draw (~0.1 s each); 50 derandomized
# draws still cover the grid of vocabulary sizes, K and supports.
@settings(max_examples=50)
@given(positions(), st.sampled_from(["kl", "tv"]))
def test_ddot_full_matches_jvp_and_finite_differences(pos, kind):
    b, z, k = pos
    if kind == "tv":
        assume(_no_ties(b, z))  # |.| is not differentiable at a tie
    f = _along(b, z, k, kind)
    _, jvp = jax.jvp(f, (0.0,), (1.0,))
    h = 1e-5
    fd = (f(h) - f(-h)) / (2 * h)
    got = ddot(b, z, k, kind=kind)
    assert_close(got.ddot, jvp)
    assert_close(got.ddot, fd, rtol=FD_TOLERANCE[0], atol=FD_TOLERANCE[1])
    assert_close(got.local + got.global_, got.ddot)


@pytest.mark.slow  # ~20-60 s on the shared 2-core machine (compiles per shape)
# Expensive: several jit/autodiff calls per draw (~0.1 s each); 50 derandomized
# draws still cover the grid of vocabulary sizes, K and supports.
@settings(max_examples=50)
@given(
    positions(vocabs=FEW),
    st.sampled_from([1, 2, 4]),
    st.sampled_from(["union", "k_slots"]),
    st.sampled_from(["kl", "tv"]),
)
def test_ddot_proportional_is_exact_derivative_of_topk_divergence(
    pos, K, support, kind
):
    b, z, k = pos
    f = _along(b, z, k, "topk_" + kind, topk=K, support=support)
    if kind == "tv":  # no tie between reduced behavior and policy buckets
        d = float(divergence(b, z, k, kind="topk_tv", topk=K, support=support))
        assume(abs(float(f(1e-4)) - d) > 0 and abs(float(f(-1e-4)) - d) > 0)
    _, jvp = jax.jvp(f, (0.0,), (1.0,))
    got = ddot(
        b, z, k, kind=kind, estimator="topk_proportional", topk=K, support=support
    )
    h = 1e-6
    assume(kind == "kl" or abs(float(jvp) - float((f(h) - f(-h)) / (2 * h))) < 1e-6)
    assert_close(got.ddot, jvp)


# Expensive: several jit/autodiff calls per draw (~0.1 s each); 50 derandomized
# draws still cover the grid of vocabulary sizes, K and supports.
@settings(max_examples=50)
@given(
    positions(vocabs=FEW),
    st.sampled_from([1, 2, 4]),
    st.sampled_from(["union", "k_slots"]),
    st.sampled_from(["kl", "tv"]),
)
def test_ddot_aggregated_equals_exact_ddot_of_reduced_distribution(
    pos, K, support, kind
):
    b, z, k = pos
    mu, pi = np.exp(b), softmax_np(z)
    order = list(np.argsort(-mu, kind="stable")[:K])
    if k not in order:
        order = order + [k] if support == "union" else order[:-1] + [k]
    tail = np.setdiff1d(np.arange(len(z)), order)
    assume(len(tail) > 0)
    red_mu = np.append(mu[order], mu[tail].sum())
    red_logits = np.log(np.append(pi[order], pi[tail].sum()))
    kk = np.int64(order.index(k))
    if kind == "tv":  # a tie makes the sign convention, not the formula, decide
        assume(np.min(np.abs(red_mu - np.exp(red_logits))) > 1e-9)
    want = ddot(np.log(red_mu), red_logits, kk, kind=kind)
    got = ddot(b, z, k, kind=kind, estimator="topk_aggregated", topk=K, support=support)
    assert_close(got.ddot, want.ddot, atol=1e-12)
    assert_close(got.local, want.local, atol=1e-12)


@st.composite
def uniform_tails(draw):
    """mu and pi that are both uniform outside a support S of size m containing k."""
    v = draw(st.sampled_from([5, 8]))
    m = draw(st.integers(1, v - 2))
    head = draw(st.lists(st.floats(0.05, 1.0), min_size=m + 1, max_size=m + 1))
    head = np.asarray(head, np.float64) / np.sum(head)
    mu = np.concatenate([head[:m], np.full(v - m, head[m] / (v - m))])
    assume(np.min(head[:m]) > head[m] / (v - m) * 1.01)  # S is the behavior top-m
    z_head = draw(st.lists(st.floats(-4, 4), min_size=m + 1, max_size=m + 1))
    z = np.concatenate([z_head[:m], np.full(v - m, z_head[m])]).astype(np.float64)
    k = draw(st.integers(0, m - 1))
    return np.log(mu), z, np.int64(k), m


# Expensive: several jit/autodiff calls per draw (~0.1 s each); 50 derandomized
# draws still cover the grid of vocabulary sizes, K and supports.
@settings(max_examples=50)
@given(uniform_tails(), st.sampled_from(["kl", "tv"]))
def test_ddot_uniform_tail_exact_when_both_tails_uniform(case, kind):
    b, z, k, m = case
    got = ddot(b, z, k, kind=kind, estimator="topk_uniform", topk=m)
    assert_close(got.ddot, ddot(b, z, k, kind=kind).ddot, atol=1e-12)


@given(
    positions(vocabs=FEW),
    st.sampled_from(["kl", "tv"]),
    st.sampled_from(("full",) + ESTIMATORS),
    st.sampled_from([1, 3]),
)
def test_ddot_local_sign_matches_ratio_minus_one(pos, kind, estimator, K):
    b, z, k = pos  # behavior strictly positive, so mu_k > 0
    r = softmax_np(z)[k] / np.exp(b[k])
    assume(abs(r - 1) > 1e-9)
    got = ddot(b, z, k, kind=kind, estimator=estimator, topk=K)
    assert np.sign(float(got.local)) == np.sign(r - 1)


@settings(max_examples=30)  # few draws suffice: K >= V is one code path per V
@given(positions(), st.sampled_from(["kl", "tv"]), st.sampled_from(ESTIMATORS))
def test_ddot_topk_estimators_equal_full_when_k_ge_v(pos, kind, estimator):
    b, z, k = pos
    got = ddot(b, z, k, kind=kind, estimator=estimator, topk=len(z))
    assert_close(got.ddot, ddot(b, z, k, kind=kind).ddot, atol=1e-12)


@given(positions())
def test_ddot_k_slots_k1_aggregated_is_binary_reduction(pos):
    # Appendix C reduction (DERIVED): on {k, rest}, Ddot = 2 (1 - pi_k)(pi_k - mu_k).
    b, z, k = pos
    pi_k, mu_k = softmax_np(z)[k], np.exp(b[k])
    got = ddot(b, z, k, estimator="topk_aggregated", topk=1, support="k_slots")
    assert_close(got.ddot, 2 * (1 - pi_k) * (pi_k - mu_k), atol=1e-12)


def test_ddot_topk_behavior_input_matches_full_behavior():
    rng = np.random.default_rng(1)
    z = rng.normal(size=(4, 12)).astype(np.float64)
    b = np.log(rng.dirichlet(np.ones(12), size=4)).astype(np.float64)
    k = np.array([0, 5, 11, 3], np.int64)
    ids = np.argsort(-b, axis=-1)[:, :5].astype(np.int64)
    tb = TopKBehavior(
        np.take_along_axis(b, ids, -1), ids, np.take_along_axis(b, k[:, None], -1)[:, 0]
    )
    for est in ESTIMATORS:
        for kind in ("kl", "tv"):
            a = ddot(tb, z, k, kind=kind, estimator=est)
            f = ddot(b, z, k, kind=kind, estimator=est, topk=5)
            assert_close(a.ddot, f.ddot, atol=1e-12)


def test_ddot_bad_input_raises():
    b = np.log(np.array([0.5, 0.3, 0.2], np.float64))
    z = np.zeros(3, np.float64)
    with pytest.raises(BadInput, match="estimator"):
        ddot(b, z, np.int64(0), estimator="topk")
    with pytest.raises(BadInput, match="kind"):
        ddot(b, z, np.int64(0), kind="js")
    with pytest.raises(BadInput, match="topk"):
        ddot(b, z, np.int64(0), estimator="topk_uniform", topk=0)
    tb = TopKBehavior(b[:2], np.array([0, 1]))
    with pytest.raises(BadInput, match="full behavior"):
        ddot(tb, z, np.int64(0))


# Expensive: several jit/autodiff calls per draw (~0.1 s each); 50 derandomized
# draws still cover the grid of vocabulary sizes, K and supports.
@settings(max_examples=50)
@given(
    positions(min_v=3, vocabs=FEW),
    st.sampled_from([1, 2]),
    st.sampled_from(["union", "k_slots"]),
    st.sampled_from(["kl", "tv"]),
    st.sampled_from(ESTIMATORS[:2]),
)
def test_topk_predict_from_gathered_logp_equals_full_logits_route(
    pos, K, support, kind, est
):
    # O(K) route (tails as 1 - sum) vs the full-logits route (tails summed exactly)
    b, z, k = pos
    ids = np.argsort(-b, kind="stable")[:K].astype(np.int64)
    tb = TopKBehavior(b[ids], ids, np.float64(b[k]))
    logp = np.log(softmax_np(z))
    d, got = topk_predict(tb, logp, k, kind=kind, estimator=est, support=support)
    want = ddot(b, z, k, kind=kind, estimator=est, topk=K, support=support)
    assert_close(got.ddot, want.ddot, atol=1e-12)
    assert_close(
        d, divergence(b, z, k, kind="topk_" + kind, topk=K, support=support), atol=1e-12
    )


def test_topk_predict_bad_input():
    tb = TopKBehavior(np.log(np.array([0.6, 0.3], np.float64)), np.array([0, 1]))
    logp = np.log(np.array([0.5, 0.3, 0.2], np.float64))
    with pytest.raises(BadInput, match="full logits"):
        topk_predict(tb, logp, np.int64(0), estimator="topk_proportional")
    with pytest.raises(BadInput, match="exceeds"):
        topk_predict(tb, logp, np.int64(0), topk=3)
    with pytest.raises(BadInput, match="TopKBehavior"):
        topk_predict(logp, logp, np.int64(0))

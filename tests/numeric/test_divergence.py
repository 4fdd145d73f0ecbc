"""Tests for theorycheck.numeric._divergence: definitions, orderings, edge cases."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.numeric._helpers import FEW, kl_np, log0, positions, softmax_np
from theorycheck import BadInput
from theorycheck.numeric import TopKBehavior, binary_kl, binary_tv, divergence
from theorycheck.testing import assert_close


def _reduced_np(mu, pi, k, K, support):
    """Reference reduction in numpy, from DPPO Eq. 15-16 and the reference code."""
    order = np.argsort(-mu, kind="stable")[:K]
    ids = list(order)
    if k not in ids:
        if support == "union":
            ids.append(k)
        else:
            ids[-1] = k
    ids = np.array(ids)
    tail = np.ones(len(mu), bool)
    tail[ids] = False
    return (np.append(mu[ids], mu[tail].sum()), np.append(pi[ids], pi[tail].sum()))


# Expensive: several jit/autodiff calls per draw (~0.1 s each); 50 derandomized
# draws still cover the grid of vocabulary sizes, K and supports.
@settings(max_examples=50)
@given(
    positions(vocabs=FEW),
    st.sampled_from([1, 2, 4, 9]),
    st.sampled_from(["union", "k_slots"]),
)
def test_divergence_topk_matches_numpy_reference(pos, K, support):
    b, z, k = pos
    mu, pi = np.exp(b), softmax_np(z)
    rm, rp = _reduced_np(mu, pi, int(k), K, support)
    got_kl = divergence(b, z, k, kind="topk_kl", topk=K, support=support)
    got_tv = divergence(b, z, k, kind="topk_tv", topk=K, support=support)
    assert_close(got_kl, kl_np(rm, rp), atol=1e-12)
    assert_close(got_tv, 0.5 * np.abs(rm - rp).sum(), atol=1e-12)


@given(positions())
def test_divergence_full_kinds_match_numpy(pos):
    b, z, k = pos
    mu, pi = np.exp(b), softmax_np(z)
    assert_close(divergence(b, z, k, kind="kl"), kl_np(mu, pi), atol=1e-12)
    assert_close(divergence(b, z, k, kind="reverse_kl"), kl_np(pi, mu), atol=1e-12)
    assert_close(
        divergence(b, z, k, kind="tv"), 0.5 * np.abs(mu - pi).sum(), atol=1e-12
    )
    assert_close(divergence(b, z, k, kind="binary_tv"), abs(mu[k] - pi[k]), atol=1e-12)
    assert_close(
        divergence(b, z, k, kind="binary_kl"),
        kl_np([mu[k], 1 - mu[k]], [pi[k], 1 - pi[k]]),
        atol=1e-12,
    )


# Expensive: several jit/autodiff calls per draw (~0.1 s each); 50 derandomized
# draws still cover the grid of vocabulary sizes, K and supports.
@settings(max_examples=50)
@given(
    positions(), st.sampled_from([1, 2, 4, 9]), st.sampled_from(["union", "k_slots"])
)
def test_divergence_binary_and_topk_never_exceed_full(pos, K, support):
    # Coarse-graining never increases an f-divergence (data-processing inequality).
    b, z, k = pos
    slack = 1e-12  # float64 summation rounding
    for full, parts in (
        ("kl", ("binary_kl", "topk_kl")),
        ("tv", ("binary_tv", "topk_tv")),
    ):
        d = float(divergence(b, z, k, kind=full))
        for kind in parts:
            assert float(divergence(b, z, k, kind=kind, topk=K, support=support)) <= (
                d + slack
            )


@given(positions(), st.integers(0, 3))
def test_divergence_topk_equals_full_when_k_ge_v(pos, extra):
    b, z, k = pos
    K = len(z) + extra
    for kind in ("kl", "tv"):
        assert_close(
            divergence(b, z, k, kind="topk_" + kind, topk=K),
            divergence(b, z, k, kind=kind),
            atol=1e-12,
        )


@given(positions())
def test_divergence_k_slots_with_k1_is_binary(pos):
    # With one slot the support is {k}: the reduced distribution is {k, rest}.
    b, z, k = pos
    for kind in ("kl", "tv"):
        assert_close(
            divergence(b, z, k, kind="topk_" + kind, topk=1, support="k_slots"),
            divergence(b, z, k, kind="binary_" + kind),
            atol=1e-12,
        )


# Expensive: several jit/autodiff calls per draw (~0.1 s each); 50 derandomized
# draws still cover the grid of vocabulary sizes, K and supports.
@settings(max_examples=50)
@given(positions(min_v=3, vocabs=FEW), st.integers(1, 4))
def test_divergence_topk_behavior_matches_full_behavior(pos, K):
    b, z, k = pos
    K = min(K, len(z))
    ids = np.argsort(-b, kind="stable")[:K]
    tb = TopKBehavior(b[ids], ids.astype(np.int64), np.float64(b[k]))
    for kind in ("topk_kl", "topk_tv", "binary_kl", "binary_tv"):
        assert_close(
            divergence(tb, z, k, kind=kind, topk=K),
            divergence(b, z, k, kind=kind, topk=K),
            atol=1e-12,
        )


def test_divergence_edge_cases_onehot_and_zero_tail():
    z = np.array([0.3, -1.0, 2.0, 0.0], np.float64)
    pi = softmax_np(z)
    onehot = log0(np.array([0.0, 0.0, 1.0, 0.0], np.float64))
    assert_close(divergence(onehot, z, np.int64(2), kind="kl"), -np.log(pi[2]))
    # behavior supported on its top-2: zero behavior tail mass, finite divergence
    mu = np.array([0.7, 0.3, 0.0, 0.0], np.float64)
    d = divergence(log0(mu), z, np.int64(1), kind="topk_kl", topk=2)
    rest = pi[2:].sum()
    assert_close(d, kl_np([0.7, 0.3, 0.0], [pi[0], pi[1], rest]))
    # k outside the top-K, both supports
    b = log0(np.array([0.6, 0.3, 0.0, 0.1], np.float64))
    u = divergence(b, z, np.int64(3), kind="topk_tv", topk=1)
    s = divergence(b, z, np.int64(3), kind="topk_tv", topk=1, support="k_slots")
    assert_close(
        u, 0.5 * (abs(0.6 - pi[0]) + abs(0.1 - pi[3]) + abs(0.3 - pi[1] - pi[2]))
    )
    assert_close(s, 0.5 * (abs(0.1 - pi[3]) + abs(0.9 - (1 - pi[3]))))


def test_divergence_reverse_kl_is_inf_not_nan_on_missing_support():
    b = log0(np.array([0.5, 0.5, 0.0], np.float64))
    z = np.zeros(3, np.float64)
    assert np.isposinf(float(divergence(b, z, np.int64(0), kind="reverse_kl")))


def test_divergence_batched_matches_rows():
    rng = np.random.default_rng(0)
    z = rng.normal(size=(2, 3, 6)).astype(np.float64)
    b = np.log(rng.dirichlet(np.ones(6), size=(2, 3))).astype(np.float64)
    k = rng.integers(0, 6, size=(2, 3)).astype(np.int64)
    cases = [(kind, "union") for kind in ("kl", "tv", "topk_kl", "binary_kl")]
    for kind, support in cases + [("topk_tv", "k_slots")]:
        got = divergence(b, z, k, kind=kind, topk=2, support=support)
        assert got.shape == (2, 3)
        for i in range(2):
            for j in range(3):
                one = divergence(
                    b[i, j], z[i, j], k[i, j], kind=kind, topk=2, support=support
                )
                assert_close(got[i, j], one)


def test_binary_kl_and_tv_scalars():
    assert_close(
        binary_kl(0.8, 0.99), 0.99 * np.log(0.99 / 0.8) + 0.01 * np.log(0.01 / 0.2)
    )
    assert_close(binary_tv(1e-2, 1e-4), 1e-2 - 1e-4)
    assert float(binary_kl(0.3, 1.0)) == pytest.approx(-np.log(0.3), rel=1e-12)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(z=[0.0, np.nan, 1.0]), "nan at the input, token 1"),
        (dict(b=np.log([0.5, 0.4, 0.2])), "sum to"),
        (dict(b=log0([0.5, 0.5, 0.0]), k=2), "probability 0"),
        (dict(k=3), "out of range"),
        (dict(z=[0.0, 1.0]), "shape"),
        (dict(kind="topk_kl", topk=0), "topk"),
        (dict(kind="js"), "kind"),
    ],
)
def test_divergence_bad_input_raises(kwargs, match):
    b = np.asarray(kwargs.get("b", np.log([0.5, 0.3, 0.2])), np.float64)
    z = np.asarray(kwargs.get("z", [0.0, 0.5, 1.0]), np.float64)
    k = np.int64(kwargs.get("k", 0))
    with pytest.raises(BadInput, match=match):
        divergence(b, z, k, kind=kwargs.get("kind", "kl"), topk=kwargs.get("topk"))


def test_divergence_nan_logits_error_names_the_row():
    z = np.zeros((3, 4), np.float64)
    z[2, 1] = np.inf
    b = np.log(np.full((3, 4), 0.25, np.float64))
    with pytest.raises(BadInput, match="row 2"):
        divergence(b, z, np.zeros(3, np.int64), kind="kl")


def test_divergence_topk_behavior_bad_input():
    z = np.zeros(4, np.float64)
    tb = TopKBehavior(np.log(np.array([0.6, 0.3], np.float64)), np.array([0, 1]))
    with pytest.raises(BadInput, match="sampled_logp"):
        divergence(tb, z, np.int64(3), kind="topk_kl")
    with pytest.raises(BadInput, match="full behavior"):
        divergence(tb, z, np.int64(0), kind="kl")
    with pytest.raises(BadInput, match="exceeds"):
        divergence(tb, z, np.int64(0), kind="topk_kl", topk=3)
    with pytest.raises(BadInput, match="not a probability"):
        binary_kl(1.2, 0.5)

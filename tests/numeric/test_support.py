"""top_k: jax.lax.top_k's values, indices and order, through float32 candidates."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from theorycheck.numeric._support import TOP_K_SLACK, top_k


def _same(x, k):
    got, want = top_k(x, k), jax.lax.top_k(x, k)
    np.testing.assert_array_equal(np.asarray(got[0]), np.asarray(want[0]))
    np.testing.assert_array_equal(np.asarray(got[1]), np.asarray(want[1]))


@given(
    seed=st.integers(0, 2**31 - 1),
    k=st.integers(1, 24),
    spread=st.sampled_from([1e-12, 1e-7, 1.0, 30.0]),
    ties=st.booleans(),
    neg_inf=st.floats(0.0, 0.99),
)
def test_top_k_is_lax_top_k(seed, k, spread, ties, neg_inf):
    """Random float64 rows: equal values, values closer than float32 can tell
    apart (spread 1e-12: the fallback), -inf entries, fewer finite entries than K."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(5, 300)) * spread - 3.0
    if ties:
        x = np.round(x, 1)
    x[rng.random(x.shape) < neg_inf] = -np.inf
    _same(jnp.asarray(x), k)


def test_top_k_takes_both_branches():
    """Well separated rows are decided by the float32 candidates; a near-tie at
    the cut (two entries one float64 ulp apart, equal in float32) falls back."""
    x = np.linspace(0.0, -50.0, 1000)
    _same(jnp.asarray(x), 5)
    y = x.copy()
    y[5 + TOP_K_SLACK :] = y[4]  # many entries equal to the K-th: a tie across the cut
    y[900] = np.nextafter(y[4], 1.0)  # above the K-th by one ulp, far down the row
    assert np.float32(y[900]) == np.float32(y[4])
    _same(jnp.asarray(y), 5)
    got = top_k(jnp.asarray(y), 5)[1]
    assert 900 in np.asarray(got).tolist()


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16])
def test_top_k_of_other_dtypes_is_lax_top_k(dtype):
    x = jnp.asarray(np.random.default_rng(0).normal(size=(3, 100)), dtype)
    _same(x, 7)

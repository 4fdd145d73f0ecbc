"""Block pieces: RoPE properties in both layouts, norms, grouped-query attention."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.models._checkpoints import llama_cpp_permute
from theorycheck.models import ModelConfig, RopeLayout
from theorycheck.models._config import Family
from theorycheck.models._layers import attention, layer_norm, rms_norm, rope
from theorycheck.testing import assert_close

D = 8  # head_dim


def _vec(seed, shape):
    return jnp.asarray(np.random.default_rng(seed).standard_normal(shape), jnp.float64)


_rope = jax.jit(rope, static_argnums=(2, 3))


@pytest.mark.parametrize("layout", list(RopeLayout))
@given(seed=st.integers(0, 2**31 - 1), m=st.integers(0, 4000), n=st.integers(0, 4000))
def test_rope_scores_depend_only_on_relative_position(layout, seed, m, n):
    q, k = _vec(seed, (1, 1, 1, D)), _vec(seed + 1, (1, 1, 1, D))

    def score(a, b):
        pa = jnp.full((1, 1), a, jnp.int32)
        pb = jnp.full((1, 1), b, jnp.int32)
        return jnp.sum(_rope(q, pa, 1e4, layout) * _rope(k, pb, 1e4, layout))

    # RoFormer eq. 16: <R_m q, R_n k> = <q, R_{n-m} k>; rotations preserve norms
    assert_close(
        score(m, n),
        score(0, n - m) if n >= m else score(m - n, 0),
        rtol=1e-9,
        atol=1e-9,
    )
    rotated = _rope(q, jnp.full((1, 1), m, jnp.int32), 1e4, layout)
    assert_close(jnp.linalg.norm(rotated), jnp.linalg.norm(q))


@given(seed=st.integers(0, 2**31 - 1), m=st.integers(0, 4000))
def test_rope_interleaved_on_permuted_rows_equals_half_layout(seed, m):
    # llama.cpp permutes the projection rows; as a map on head vectors that is the
    # permutation P with interleaved(P x) = P half(x).
    x = _vec(seed, (1, 1, 1, D))
    perm = llama_cpp_permute(np.arange(D)[:, None], 1)[:, 0]
    pos = jnp.full((1, 1), m, jnp.int32)
    half = _rope(x, pos, 1e4, RopeLayout.HALF)
    inter = _rope(x[..., perm], pos, 1e4, RopeLayout.INTERLEAVED)
    assert_close(inter, half[..., perm], rtol=1e-12, atol=1e-12)


def test_norms_match_numpy():
    x, w, b = _vec(0, (2, 3, 16)), _vec(1, (16,)), _vec(2, (16,))
    xn = np.asarray(x)
    want = xn / np.sqrt((xn**2).mean(-1, keepdims=True) + 1e-5) * np.asarray(w)
    assert_close(rms_norm(x, w, 1e-5), want)
    mu, var = xn.mean(-1, keepdims=True), xn.var(-1, keepdims=True)
    want = (xn - mu) / np.sqrt(var + 1e-5) * np.asarray(w) + np.asarray(b)
    assert_close(layer_norm(x, w, b, 1e-5), want)


def test_attention_grouped_query_equals_repeated_kv():
    b, s, h, kv = 2, 5, 6, 2
    q, k, v = _vec(3, (b, s, h, D)), _vec(4, (b, s, kv, D)), _vec(5, (b, s, kv, D))
    mask = jnp.broadcast_to(jnp.tril(jnp.ones((s, s), bool)), (b, s, s))
    grouped = attention(q, k, v, mask)
    rep = lambda t: jnp.repeat(t, h // kv, axis=2)  # HF repeat_kv order
    assert_close(grouped, attention(q, rep(k), rep(v), mask))


def test_model_config_refuses_inconsistent_heads():
    with pytest.raises(ValueError, match="num_heads = 6 is not a multiple"):
        ModelConfig(
            family=Family.LLAMA,
            vocab_size=5,
            hidden_size=8,
            num_layers=1,
            num_heads=6,
            num_kv_heads=4,
            head_dim=4,
            intermediate_size=8,
        )
    with pytest.raises(ValueError, match="ModelConfig.num_layers = 0"):
        ModelConfig(
            family=Family.GPT2,
            vocab_size=5,
            hidden_size=8,
            num_layers=0,
            num_heads=2,
            num_kv_heads=2,
            head_dim=4,
            intermediate_size=8,
        )

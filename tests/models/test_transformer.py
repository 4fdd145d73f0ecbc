"""forward(): parity with an independent numpy forward, padding, dtypes, derivatives."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests.models._checkpoints import family_config, token_batch
from tests.models._reference import reference_logits
from theorycheck import BadInput
from theorycheck.models import cast_params, forward, load_hf
from theorycheck.testing import assert_close

KINDS = ["llama", "qwen2", "qwen3", "gpt2"]


@pytest.mark.parametrize("kind", KINDS)
def test_forward_matches_numpy_reference_float32(tiny_dirs, kind):
    directory, tensors, cfg_dict = tiny_dirs[kind]
    cfg, params, _ = load_hf(directory)
    ids = token_batch(cfg.vocab_size, 2, 11, seed=1)
    got = forward(params, cfg, ids)
    assert got.dtype == jnp.float32 and got.shape == (2, 11, cfg.vocab_size)
    for b in range(2):
        want = reference_logits(tensors, cfg_dict, ids[b])
        # float32 model vs float64 reference: the 1e-4 parity target.
        assert_close(got[b], want, rtol=0, atol=1e-4)


@pytest.mark.parametrize("kind", KINDS)
def test_forward_matches_numpy_reference_float64(tiny_dirs, kind):
    directory, tensors, cfg_dict = tiny_dirs[kind]
    cfg, params, _ = load_hf(directory, dtype=np.float64)
    ids = token_batch(cfg.vocab_size, 1, 9, seed=2)
    got = forward(params, cfg, ids)
    assert got.dtype == jnp.float64
    # Same float64 arithmetic in a different order: agreement far below float32 eps.
    want = reference_logits(tensors, cfg_dict, ids[0])
    assert_close(got[0], want, rtol=0, atol=1e-10)


@pytest.mark.parametrize("kind", ["llama", "gpt2"])
def test_forward_left_padding_does_not_change_logits(tiny_dirs, kind):
    cfg, params, _ = load_hf(tiny_dirs[kind][0], dtype=np.float64)
    ids = token_batch(cfg.vocab_size, 1, 7, seed=3)
    padded = np.concatenate([np.zeros((1, 3), np.int32), ids], axis=1)
    mask = np.concatenate([np.zeros((1, 3), np.int32), np.ones((1, 7), np.int32)], 1)
    got = forward(params, cfg, padded, attention_mask=mask)[:, 3:]
    assert_close(got, forward(params, cfg, ids))


def test_forward_is_causal(tiny_dirs):
    cfg, params, _ = load_hf(tiny_dirs["qwen3"][0], dtype=np.float64)
    ids = token_batch(cfg.vocab_size, 1, 8, seed=4)
    changed = ids.copy()
    changed[0, 5:] = (changed[0, 5:] + 1) % cfg.vocab_size
    a, b = forward(params, cfg, ids), forward(params, cfg, changed)
    assert_close(a[:, :5], b[:, :5])
    assert float(jnp.max(jnp.abs(a[:, 5:] - b[:, 5:]))) > 1e-3


def test_forward_bfloat16_close_to_float32(tiny_dirs):
    cfg, params, _ = load_hf(tiny_dirs["llama"][0])
    ids = token_batch(cfg.vocab_size, 2, 10, seed=5)
    half_params = cast_params(params, jnp.bfloat16)
    half = forward(half_params, cfg, ids)
    assert half.dtype == jnp.float32  # logits accumulate in float32
    # Same (bf16-rounded) weights computed in float32: the difference is the bf16
    # arithmetic alone. bfloat16 has eps 2**-8; allow 16 eps relative to the largest
    # logit after 3 blocks (measured: ~5 eps); it must not vanish either (bf16 ran).
    ref = forward(cast_params(half_params, jnp.float32), cfg, ids)
    rel = float(jnp.max(jnp.abs(half - ref)) / jnp.max(jnp.abs(ref)))
    assert 1e-6 < rel < 16 * 2.0**-8, rel


def test_forward_rejects_out_of_range_token(tiny_dirs):
    cfg, params, _ = load_hf(tiny_dirs["llama"][0])
    bad = np.array([[1, cfg.vocab_size]], np.int32)
    with pytest.raises(BadInput, match=f"token id {cfg.vocab_size} is outside"):
        forward(params, cfg, bad)
    with pytest.raises(BadInput, match="integer array"):
        forward(params, cfg, np.zeros((3,), np.int32))


@pytest.mark.parametrize("kind", ["qwen3", "gpt2"])
def test_forward_jvp_and_vjp_agree_with_finite_differences(tiny_dirs, kind):
    cfg, params, _ = load_hf(tiny_dirs[kind][0], dtype=np.float64)
    ids = token_batch(cfg.vocab_size, 2, 5, seed=7)
    rng = np.random.default_rng(1)
    tangent = jax.tree_util.tree_map(
        lambda a: jnp.asarray(rng.standard_normal(a.shape), a.dtype), params
    )
    f = jax.jit(lambda p: forward(p, cfg, ids))

    def at(step):
        return f(jax.tree_util.tree_map(lambda a, t: a + step * t, params, tangent))

    jvp = jax.jit(lambda p, t: jax.jvp(f, (p,), (t,))[1])(params, tangent)
    h = 1e-4
    # five-point central stencil: O(h^4) truncation, O(eps |f| / h) ~ 1e-10 rounding
    fd = (-at(2 * h) + 8 * at(h) - 8 * at(-h) + at(-2 * h)) / (12 * h)
    assert_close(jvp, fd, rtol=1e-6, atol=1e-7)
    # reverse mode: <J t, c> = <t, J^T c> for a random cotangent c (adjoint identity),
    # so the gradient is checked against the same finite differences.
    ct = jnp.asarray(rng.standard_normal(jvp.shape), jnp.float64)
    (g,) = jax.jit(lambda p, c: jax.vjp(f, p)[1](c))(params, ct)
    rhs = sum(
        jnp.sum(a * b)
        for a, b in zip(
            jax.tree_util.tree_leaves(g), jax.tree_util.tree_leaves(tangent)
        )
    )
    assert_close(jnp.sum(fd * ct), rhs, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("family", ["llama", "gpt2", "gemma"])
def test_shared_prefixes_are_the_full_sequences(family):
    """prefix_hidden_states and response_logits (each distinct left-padded prompt
    run once) equal hidden_states and forward over the full sequences to float64
    rounding, on prompts of different lengths shared by several rows."""
    import jax.random as jr

    from theorycheck.models import (
        distinct_prefixes,
        forward,
        hidden_states,
        init_params,
        prefix_hidden_states,
        response_logits,
    )

    cfg = family_config(family, vocab=29)
    params = init_params(cfg, key=jr.key(5), dtype=jnp.float64, scale=0.3)
    prompts = [[3, 4, 5, 6], [7, 8], [9, 10, 11]]
    rows = [0, 0, 1, 2, 1, 2, 2]
    width, n = 5, 4
    pid = np.zeros((len(rows), width), np.int32)
    pmask = np.zeros_like(pid)
    for i, g in enumerate(rows):
        pid[i, width - len(prompts[g]) :] = prompts[g]
        pmask[i, width - len(prompts[g]) :] = 1
    tokens = np.asarray(jr.randint(jr.key(6), (len(rows), n), 1, cfg.vocab_size))
    ids = np.concatenate([pid, tokens], 1)
    mask = np.concatenate([pmask, np.ones_like(tokens)], 1)
    u_ids, u_mask, group = distinct_prefixes(pid, pmask)
    assert len(u_ids) == 3 and np.array_equal(u_ids[group], pid)
    prefix, hidden = prefix_hidden_states(
        params, cfg, u_ids, u_mask, tokens, group, num_blocks=2
    )
    got = np.concatenate([np.asarray(prefix)[group], np.asarray(hidden)], 1)
    want = hidden_states(params, cfg, ids, num_blocks=2, attention_mask=mask)
    want = np.asarray(want)
    live = mask > 0
    np.testing.assert_allclose(got[live], want[live], rtol=1e-12, atol=1e-12)
    z = response_logits(params, cfg, u_ids, u_mask, tokens, group)
    full = forward(params, cfg, ids, attention_mask=mask)[:, width - 1 : width - 1 + n]
    np.testing.assert_allclose(np.asarray(z), np.asarray(full), rtol=1e-12, atol=1e-12)

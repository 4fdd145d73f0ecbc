"""generate(): the KV-cache path against full forward passes, sampling, refusals."""

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest

from tests.models._checkpoints import family_config, token_batch
from theorycheck import BadInput
from theorycheck.models import forward, generate, load_hf
from theorycheck.testing import STAT_RTOL, assert_close


@pytest.fixture(scope="module")
def tiny(tiny_dirs):
    cfg, params, _ = load_hf(tiny_dirs["llama"][0], dtype=np.float64)
    return cfg, params


def _recomputed_logprobs(params, cfg, prompt, out, temperature, mask=None):
    """Full forward over prompt + generated tokens; each generated token's log-probs."""
    seq = np.concatenate([prompt, np.asarray(out.tokens)], axis=1)
    full_mask = (
        None
        if mask is None
        else np.concatenate([mask, np.ones(out.tokens.shape, np.int32)], axis=1)
    )
    logits = forward(params, cfg, seq, attention_mask=full_mask)
    t = prompt.shape[1]
    steps = logits[:, t - 1 : -1] / (1.0 if temperature == 0 else temperature)
    return jax.nn.log_softmax(steps, axis=-1)


@pytest.mark.parametrize("temperature,top_p", [(0.7, 0.9), (0.0, 1.0)])
def test_generate_logprobs_match_full_forward(tiny, temperature, top_p):
    cfg, params = tiny
    prompt = token_batch(cfg.vocab_size, 3, 5, seed=9)
    out = generate(
        params,
        cfg,
        prompt,
        key=jr.key(0),
        max_new_tokens=6,
        temperature=temperature,
        top_p=top_p,
        topk_logprobs=4,
        return_full_logprobs=True,
    )
    assert out.tokens.shape == (3, 6) and out.topk_ids.shape == (3, 6, 4)
    want = _recomputed_logprobs(params, cfg, prompt, out, temperature)
    assert_close(out.full_logprobs, want, rtol=1e-9, atol=1e-9)
    sampled = jnp.take_along_axis(want, out.tokens[..., None], axis=-1)[..., 0]
    assert_close(out.logprobs, sampled, rtol=1e-9, atol=1e-9)
    top_vals, top_ids = jax.lax.top_k(want, 4)
    assert_close(out.topk_logprobs, top_vals, rtol=1e-9, atol=1e-9)
    np.testing.assert_array_equal(out.topk_ids, top_ids)
    if temperature == 0:
        np.testing.assert_array_equal(out.tokens, jnp.argmax(want, axis=-1))


def test_generate_left_padded_prompt_matches_unpadded(tiny):
    cfg, params = tiny
    short = token_batch(cfg.vocab_size, 1, 3, seed=10)
    long = token_batch(cfg.vocab_size, 1, 6, seed=11)
    padded = np.concatenate([np.zeros((1, 3), np.int32), short], 1)
    batch = np.concatenate([padded, long])
    mask = np.ones(batch.shape, np.int32)
    mask[0, :3] = 0
    kw = dict(key=jr.key(1), max_new_tokens=4, temperature=0.0, topk_logprobs=2)
    both = generate(params, cfg, batch, prompt_mask=mask, **kw)
    alone = generate(params, cfg, short, **kw)
    np.testing.assert_array_equal(both.tokens[0], alone.tokens[0])
    assert_close(both.logprobs[0], alone.logprobs[0], rtol=1e-9, atol=1e-9)
    want = _recomputed_logprobs(params, cfg, batch, both, 0.0, mask)
    assert_close(
        both.logprobs,
        jnp.take_along_axis(want, both.tokens[..., None], axis=-1)[..., 0],
        rtol=1e-9,
        atol=1e-9,
    )


def test_generate_sampling_frequencies_follow_softmax(tiny):
    cfg, params = tiny
    n = 4000
    prompt = np.tile(token_batch(cfg.vocab_size, 1, 4, seed=12), (n, 1))
    out = generate(
        params,
        cfg,
        prompt,
        key=jr.key(2),
        max_new_tokens=1,
        temperature=1.5,
        return_full_logprobs=True,
    )
    probs = np.exp(np.asarray(out.full_logprobs[0, 0]))
    counts = np.bincount(np.asarray(out.tokens[:, 0]), minlength=cfg.vocab_size)
    # statistical tier: relative L2 error of the empirical distribution, fixed seed
    rel = np.linalg.norm(counts / n - probs) / np.linalg.norm(probs)
    assert rel < 5 * STAT_RTOL, rel  # sampling noise ~ sqrt(sum p(1-p)/n)/|p| here


def test_generate_top_p_restricts_support_to_nucleus(tiny):
    cfg, params = tiny
    n = 500
    prompt = np.tile(token_batch(cfg.vocab_size, 1, 4, seed=13), (n, 1))
    # temperature 3 flattens the tiny model's peaked softmax so the nucleus is wide
    out = generate(
        params,
        cfg,
        prompt,
        key=jr.key(3),
        max_new_tokens=1,
        temperature=3.0,
        top_p=0.5,
        return_full_logprobs=True,
    )
    probs = np.exp(np.asarray(out.full_logprobs[0, 0]))
    order = np.argsort(-probs)
    cut = int(np.searchsorted(np.cumsum(probs[order]), 0.5)) + 1
    nucleus = set(order[:cut].tolist())
    assert set(np.asarray(out.tokens[:, 0]).tolist()) <= nucleus
    assert len(nucleus) > 1  # the case is not trivially greedy
    tiny_p = generate(
        params, cfg, prompt[:4], key=jr.key(4), max_new_tokens=1, top_p=1e-6
    )
    np.testing.assert_array_equal(tiny_p.tokens[:, 0], order[0])


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"max_new_tokens": 0}, "max_new_tokens = 0"),
        ({"max_new_tokens": 100}, "exceeds max_positions 64"),
        ({"max_new_tokens": 2, "temperature": -1.0}, "temperature = -1.0"),
        ({"max_new_tokens": 2, "top_p": 0.0}, "top_p = 0.0"),
        ({"max_new_tokens": 2, "topk_logprobs": 10**6}, "topk_logprobs = 1000000"),
    ],
)
def test_generate_refuses_bad_arguments(tiny, kwargs, message):
    cfg, params = tiny
    with pytest.raises(BadInput, match=message):
        generate(
            params, cfg, token_batch(cfg.vocab_size, 1, 3), key=jr.key(0), **kwargs
        )


def test_completion_mask_keeps_through_first_eos():
    from theorycheck.models import completion_mask

    tokens = np.array([[4, 2, 2, 9], [2, 5, 6, 7], [8, 8, 8, 8]], np.int32)
    want = np.array([[1, 1, 0, 0], [1, 0, 0, 0], [1, 1, 1, 1]], np.int32)
    np.testing.assert_array_equal(completion_mask(tokens, eos_id=2), want)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16])
@pytest.mark.parametrize("family", ["llama", "gpt2", "gemma"])
def test_decode_blocks_equals_run_blocks_bit_for_bit(family, dtype):
    """The in-place layer loop of a decode step computes what run_blocks computes
    (the same operations on the same values): output and both caches, for a
    prefill and then one decode step, every family; a bfloat16 cache is stored as
    its uint16 bit patterns."""
    from theorycheck.models import init_params
    from theorycheck.models._family import cache_storage, from_storage
    from theorycheck.models._transformer import decode_blocks, embed, run_blocks

    cfg = family_config(family, vocab=23)
    params = init_params(cfg, key=jr.key(3), dtype=dtype, scale=0.3)
    b, t, total = 3, 5, 8
    shape = (cfg.num_layers, b, total, cfg.num_kv_heads, cfg.head_dim)
    tokens = jr.randint(jr.key(4), (b, t + 1), 0, cfg.vocab_size)
    keys = jnp.arange(total)
    pos = jnp.broadcast_to(jnp.arange(t), (b, t))
    mask = jnp.broadcast_to((keys[None] <= jnp.arange(t)[:, None])[None], (b, t, total))
    step_pos = jnp.full((b, 1), t)
    step_mask = jnp.broadcast_to(keys <= t, (b, 1, total))
    outs = []
    for run in (run_blocks, decode_blocks):
        store = cache_storage(dtype) if run is decode_blocks else dtype
        cache = (jnp.zeros(shape, store), jnp.zeros(shape, store), 0)
        x = embed(params, cfg, tokens[:, :t], pos)
        x, (k, v) = jax.jit(run, static_argnums=1)(
            params["blocks"], cfg, x, pos, mask, cache
        )
        y = embed(params, cfg, tokens[:, t:], step_pos)
        y, (k, v) = jax.jit(run, static_argnums=1)(
            params["blocks"], cfg, y, step_pos, step_mask, (k, v, t)
        )
        k, v = from_storage(k, dtype), from_storage(v, dtype)
        outs.append([np.asarray(a, np.float64) for a in (x, y, k, v)])
    assert float(jnp.max(jnp.abs(outs[0][2]))) > 0  # the caches were written
    for a, c in zip(*outs):
        np.testing.assert_array_equal(a, c)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
def test_shared_prefill_equals_prefill_of_every_row(tiny, dtype):
    """generate() prefills each distinct prompt once in float32/float64 and copies
    its cache to its rows: the same bits (tokens, sampled and top-K log-probs, every
    log-prob) as prefilling every row (the internal program with one prompt per
    row), on a batch of repeated, left-padded prompts."""
    from theorycheck.models import cast_params
    from theorycheck.models._generate import _generate

    cfg, params = tiny
    params = cast_params(params, dtype)
    prompt = np.array([[0, 3, 4, 5], [1, 2, 6, 7], [0, 3, 4, 5], [1, 2, 6, 7]])
    mask = np.array([[0, 1, 1, 1], [1, 1, 1, 1]] * 2, np.int32)
    key, n, temperature, top_p, k = jr.key(5), 6, 0.9, 1.0, 3
    shared = generate(
        params,
        cfg,
        prompt,
        key=key,
        max_new_tokens=n,
        temperature=temperature,
        top_p=top_p,
        topk_logprobs=k,
        return_full_logprobs=True,
        prompt_mask=mask,
    )
    every_row = jnp.arange(len(prompt), dtype=jnp.int32)
    rows = _generate(
        params,
        cfg,
        jnp.asarray(prompt),
        jnp.asarray(mask),
        every_row,
        key,
        n,
        temperature,
        top_p,
        k,
        True,
    )
    for a, b in zip(shared, rows):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))

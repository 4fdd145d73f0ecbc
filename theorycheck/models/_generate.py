"""Batched sampling with a KV cache, reporting log-probs the way rollout engines do."""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import jax.random as jr
from jax import Array
from jax.typing import ArrayLike
from jaxtyping import Float, Int

from theorycheck._errors import BadInput
from theorycheck.models._config import ModelConfig
from theorycheck.models._family import cache_storage
from theorycheck.models._transformer import (
    Params,
    check_tokens,
    decode_blocks,
    distinct_prefixes,
    embed,
    head,
)


class Generation(NamedTuple):
    """Per generated token: what a rollout engine returns alongside the text.

    Attributes:
        tokens: ``[batch, new]`` sampled ids.
        logprobs: ``[batch, new]`` log-prob of each sampled id.
        topk_logprobs: ``[batch, new, K]`` the K largest log-probs, descending.
        topk_ids: ``[batch, new, K]`` their token ids.
        full_logprobs: ``[batch, new, V]`` every log-prob, or None unless asked for.
    """

    tokens: Int[Array, "batch new"]
    logprobs: Float[Array, "batch new"]
    topk_logprobs: Float[Array, "batch new K"]
    topk_ids: Int[Array, "batch new K"]
    full_logprobs: Float[Array, "batch new V"] | None


def sampling_logprobs(logits: Float[Array, "... V"], temperature: float) -> Array:
    r"""The reported distribution: :math:`\log\operatorname{softmax}(z / \tau)`.

    Temperature 0 (greedy) reports :math:`\tau = 1`. Top-p truncation changes which
    tokens can be drawn, not the reported log-probs (as in verl, whose trainer
    recomputes ``log_softmax(logits / temperature)``).
    """
    tau = 1.0 if temperature == 0 else temperature
    return jax.nn.log_softmax(logits / tau, axis=-1)


def _sample(key, logp, temperature: float, top_p: float):
    if temperature == 0:
        return jnp.argmax(logp, axis=-1)
    if top_p < 1.0:
        order = jnp.argsort(-logp, axis=-1)
        sorted_logp = jnp.take_along_axis(logp, order, axis=-1)
        before = jnp.cumsum(jnp.exp(sorted_logp), axis=-1) - jnp.exp(sorted_logp)
        keep_sorted = before < top_p  # the smallest prefix with mass >= top_p
        keep = (
            jnp.zeros_like(keep_sorted)
            .at[jnp.arange(logp.shape[0])[:, None], order]
            .set(keep_sorted)
        )
        logp = jnp.where(keep, logp, -jnp.inf)
    return jr.categorical(key, logp, axis=-1)


def completion_mask(tokens: Int[ArrayLike, "batch new"], eos_id: int) -> Array:
    """1 for generated tokens up to and including the first ``eos_id``, then 0.

    ``generate`` always runs ``max_new_tokens`` steps; this is the response mask a
    trainer applies afterwards.

    Args:
        tokens: ``[batch, new]`` generated ids.
        eos_id: the end-of-sequence id.

    Returns:
        ``[batch, new]`` int32 mask.

    Examples:
        >>> completion_mask(jnp.array([[5, 2, 7, 2], [5, 6, 7, 8]]), eos_id=2)
        Array([[1, 1, 0, 0],
               [1, 1, 1, 1]], dtype=int32)
    """
    is_eos = (jnp.asarray(tokens) == eos_id).astype(jnp.int32)
    before = jnp.cumsum(is_eos, axis=-1) - is_eos  # EOS tokens strictly before
    return (before == 0).astype(jnp.int32)


@functools.partial(
    jax.jit,
    static_argnames=(
        "config",
        "max_new_tokens",
        "temperature",
        "top_p",
        "topk",
        "return_full",
    ),
)
def _generate(
    params,
    config,
    prompt,
    prompt_mask,
    group,
    key,
    max_new_tokens,
    temperature,
    top_p,
    topk,
    return_full,
):
    # prompt, prompt_mask [G, t]: the distinct prompts; row b continues prompt
    # group[b]. Each prompt is prefilled once and its cache copied to its rows.
    g, t = prompt.shape
    b = group.shape[0]
    total = t + max_new_tokens
    dtype = params["embed"].dtype
    shape = (config.num_layers, g, total, config.num_kv_heads, config.head_dim)
    store = cache_storage(dtype)
    cache_k, cache_v = jnp.zeros(shape, store), jnp.zeros(shape, store)
    valid = jnp.concatenate(
        [prompt_mask.astype(bool), jnp.ones((g, max_new_tokens), bool)], axis=1
    )
    key_index = jnp.arange(total)
    positions = jnp.maximum(jnp.cumsum(prompt_mask, axis=1, dtype=jnp.int32) - 1, 0)
    mask = (key_index[None, :] <= jnp.arange(t)[:, None])[None] & valid[:, None, :]
    x = embed(params, config, prompt, positions)
    x, (cache_k, cache_v) = decode_blocks(
        params["blocks"], config, x, positions, mask, (cache_k, cache_v, 0)
    )
    logits = head(params, config, x[:, -1:])[group, 0]
    cache_k, cache_v, valid = cache_k[:, group], cache_v[:, group], valid[group]
    next_position = positions[group, -1] + 1

    def step(carry, i):
        logits, cache_k, cache_v, key = carry
        key, sub = jr.split(key)
        logp = sampling_logprobs(logits, temperature)
        token = _sample(sub, logp, temperature, top_p).astype(jnp.int32)
        out = {
            "token": token,
            "logprob": jnp.take_along_axis(logp, token[:, None], axis=1)[:, 0],
        }
        if topk:
            out["topk_logprobs"], out["topk_ids"] = jax.lax.top_k(logp, topk)
        if return_full:
            out["full"] = logp
        pos = (next_position + i)[:, None]
        step_mask = (key_index <= t + i)[None, None, :] & valid[:, None, :]
        x = embed(params, config, token[:, None], pos)
        x, (cache_k, cache_v) = decode_blocks(
            params["blocks"], config, x, pos, step_mask, (cache_k, cache_v, t + i)
        )
        return (head(params, config, x)[:, 0], cache_k, cache_v, key), out

    _, out = jax.lax.scan(
        step, (logits, cache_k, cache_v, key), jnp.arange(max_new_tokens)
    )
    out = jax.tree_util.tree_map(lambda a: jnp.swapaxes(a, 0, 1), out)
    empty_lp = jnp.zeros((b, max_new_tokens, 0), logits.dtype)
    return Generation(
        tokens=out["token"],
        logprobs=out["logprob"],
        topk_logprobs=out.get("topk_logprobs", empty_lp),
        topk_ids=out.get("topk_ids", jnp.zeros((b, max_new_tokens, 0), jnp.int32)),
        full_logprobs=out.get("full"),
    )


def generate(
    params: Params,
    config: ModelConfig,
    prompt_tokens: Int[ArrayLike, "batch prompt"],
    *,
    key: Array,
    max_new_tokens: int,
    temperature: float = 1.0,
    top_p: float = 1.0,
    topk_logprobs: int = 0,
    return_full_logprobs: bool = False,
    prompt_mask: Int[ArrayLike, "batch prompt"] | None = None,
) -> Generation:
    r"""Samples ``max_new_tokens`` continuations per prompt with a KV cache.

    At each step the token is drawn from the top-p nucleus of
    :math:`\operatorname{softmax}(z/\tau)` (greedy when :math:`\tau = 0`), and the
    reported log-probs are :math:`\log\operatorname{softmax}(z/\tau)` over the whole
    vocabulary (:func:`sampling_logprobs`). Generation runs the full length (no stop on
    end-of-sequence; truncate afterwards). Each distinct prompt (with its mask) is
    prefilled once and its KV cache copied to its rows, the G samples of a GRPO
    group sharing one prefill, as a serving engine's samples of one request share
    the prompt's cache. In float32 and float64 that is the same bits as prefilling
    every row (tested); XLA's CPU bfloat16 products round differently at another
    batch size, so a bfloat16 engine's shared prefill is its own (deterministic)
    rounding, not a per-row prefill's.

    Args:
        params: the parameter pytree.
        config: its :class:`ModelConfig`.
        prompt_tokens: prompts, left-padded to one length.
        key: PRNG key.
        max_new_tokens: N >= 1 tokens to generate.
        temperature: :math:`\tau \ge 0`.
        top_p: nucleus mass in ``(0, 1]``.
        topk_logprobs: K, how many top log-probs to report per token (0 = none).
        return_full_logprobs: also return the ``[batch, N, V]`` log-probs.
        prompt_mask: 1 for real prompt tokens, 0 for left padding; None = all real.

    Returns:
        A :class:`Generation`.

    Examples:
        >>> import jax.random as jr
        >>> from theorycheck.models import Family, ModelConfig, init_params
        >>> cfg = ModelConfig(family=Family.GPT2, vocab_size=11, hidden_size=8,
        ...                   num_layers=2, num_heads=2, num_kv_heads=2, head_dim=4,
        ...                   intermediate_size=32, max_positions=16)
        >>> params = init_params(cfg, key=jr.key(0))
        >>> out = generate(params, cfg, [[1, 2, 3]], key=jr.key(1), max_new_tokens=4,
        ...                topk_logprobs=2)
        >>> out.tokens.shape, out.topk_ids.shape
        ((1, 4), (1, 4, 2))

    References:
        Holtzman et al. 2020 (nucleus sampling, eq. 2); the reported fields mirror
        vLLM's ``logprobs`` output (sampled log-prob plus top-K values and ids).
    """
    check_tokens(prompt_tokens, config)
    prompt = jnp.asarray(prompt_tokens)
    if max_new_tokens < 1:
        raise BadInput(f"max_new_tokens = {max_new_tokens} must be >= 1")
    if prompt.shape[1] + max_new_tokens > config.max_positions:
        raise BadInput(
            f"prompt length {prompt.shape[1]} + max_new_tokens "
            f"{max_new_tokens} exceeds max_positions {config.max_positions}"
        )
    if not temperature >= 0:
        raise BadInput(f"temperature = {temperature} must be >= 0")
    if not 0 < top_p <= 1:
        raise BadInput(f"top_p = {top_p} must be in (0, 1]")
    if not 0 <= topk_logprobs <= config.vocab_size:
        raise BadInput(
            f"topk_logprobs = {topk_logprobs} must be in [0, {config.vocab_size}]"
        )
    if prompt_mask is None:
        prompt_mask = jnp.ones(prompt.shape, jnp.int32)
    prompt_mask = jnp.asarray(prompt_mask, jnp.int32)
    if prompt_mask.shape != prompt.shape:
        raise BadInput(
            f"prompt_mask shape {prompt_mask.shape} differs from "
            f"prompt_tokens shape {prompt.shape}"
        )
    distinct, distinct_mask, group = distinct_prefixes(prompt, prompt_mask)
    return _generate(
        params,
        config,
        jnp.asarray(distinct),
        jnp.asarray(distinct_mask),
        jnp.asarray(group),
        key,
        int(max_new_tokens),
        float(temperature),
        float(top_p),
        int(topk_logprobs),
        bool(return_full_logprobs),
    )

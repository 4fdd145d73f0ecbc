"""The causal LM forward pass: embedding, ``lax.scan`` over stacked blocks, head.

Parameters are a plain dict pytree (always passed as jit arguments, never baked in):
``embed``, the final norm, an untied ``lm_head`` where there is one, and ``blocks``,
each array with a leading layer axis L. Which keys, and what one block computes, is the
family's: ``_families.FAMILIES[config.family]`` (``_llama.py``, ``_gpt2.py``,
``_gemma.py`` document their pytrees). This module dispatches through that table only.

Matrices are stored ``[in, out]`` (``y = x @ W``); loaders transpose ``[out, in]``.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array
from jax.typing import ArrayLike
from jaxtyping import Bool, Float, Int

from theorycheck._errors import BadInput
from theorycheck.models._config import ModelConfig
from theorycheck.models._families import FAMILIES
from theorycheck.models._layers import accumulation_dtype

Params = dict


def run_blocks(blocks, cfg: ModelConfig, x, positions, mask, cache=None):
    """Runs the stacked ``blocks`` (any number of layers) under ``lax.scan``.

    Args:
        blocks: dict of arrays with a leading layer axis.
        cfg: the model's config.
        x: residual stream ``[batch, seq, D]``.
        positions: ``[batch, seq]`` integer positions.
        mask: ``[batch, seq, keys]`` True where attention is allowed.
        cache: None, or ``(k, v, index)`` with ``k, v [L, batch, keys, Hkv, d]``.

    Returns:
        ``(x, (k, v))`` with the updated caches, or ``(x, None)`` without a cache.
    """
    block = functools.partial(FAMILIES[cfg.family].block, cfg)
    if cache is None:
        x, _ = jax.lax.scan(
            lambda x, p: (block(p, x, positions, mask, None)[0], None), x, blocks
        )
        return x, None
    k, v, index = cache

    def body(x, layer):
        p, kc, vc = layer
        return block(p, x, positions, mask, (kc, vc, index))

    x, kv = jax.lax.scan(body, x, (blocks, k, v))
    return x, kv


def decode_blocks(blocks, cfg: ModelConfig, x, positions, mask, cache):
    """:func:`run_blocks` with a cache, every layer's caches carried through the
    layer loop and only this call's positions written (in place): what a decode
    step needs. ``run_blocks`` instead takes each layer's cache as a scanned input
    and returns a new stacked cache, a copy of the whole cache per call, which
    dominates a decode step of one token (the same numbers either way). For
    evaluation: reverse-mode differentiation would keep the whole carried cache per
    layer.

    Args:
        blocks, cfg, x, positions, mask: as for :func:`run_blocks`.
        cache: ``(k, v, index)`` with ``k, v [L, batch, keys, Hkv, d]`` in
            ``_family.cache_storage``'s dtype (uint16 bit patterns for bfloat16).

    Returns:
        ``(x, (k, v))``, the caches in their storage dtype.
    """
    block = functools.partial(FAMILIES[cfg.family].block, cfg)
    k, v, index = cache

    def body(carry, p):
        x, k, v, layer = carry
        x, (k, v) = block(p, x, positions, mask, (k, v, layer, index))
        return (x, k, v, layer + 1), None

    (x, k, v, _), _ = jax.lax.scan(body, (x, k, v, jnp.int32(0)), blocks)
    return x, (k, v)


def embed(params: Params, cfg: ModelConfig, tokens, positions) -> Array:
    """The family's embedding (token, plus learned positions for GPT-2, times
    sqrt(D) for Gemma), ``[batch, seq, D]``."""
    return FAMILIES[cfg.family].embed(params, cfg, tokens, positions)


def final_norm(params: Params, cfg: ModelConfig, x) -> Array:
    """The family's final norm: the head's input, ``[batch, seq, D]``."""
    return FAMILIES[cfg.family].final_norm(params, cfg, x)


def unembed(params: Params, cfg: ModelConfig, x) -> Array:
    """The LM head's matrix applied to normed ``x``; at least float32."""
    acc = accumulation_dtype(x.dtype)
    if cfg.tie_embeddings:
        return jnp.einsum("bsd,vd->bsv", x, params["embed"], preferred_element_type=acc)
    return jnp.einsum("bsd,dv->bsv", x, params["lm_head"], preferred_element_type=acc)


def head(params: Params, cfg: ModelConfig, x) -> Array:
    """Final norm and LM head; logits in at least float32, ``[batch, seq, V]``."""
    return unembed(params, cfg, final_norm(params, cfg, x))


def positions_and_mask(
    attention_mask: Int[ArrayLike, "batch seq"] | None, batch: int, seq: int
) -> tuple[Int[Array, "batch seq"], Bool[Array, "batch seq seq"]]:
    """Positions (counting real tokens only) and the causal-and-padding mask."""
    causal = jnp.tril(jnp.ones((seq, seq), dtype=bool))
    if attention_mask is None:
        positions = jnp.broadcast_to(jnp.arange(seq, dtype=jnp.int32), (batch, seq))
        return positions, jnp.broadcast_to(causal, (batch, seq, seq))
    valid = jnp.asarray(attention_mask).astype(bool)
    positions = jnp.maximum(jnp.cumsum(valid, axis=-1, dtype=jnp.int32) - 1, 0)
    return positions, causal[None] & valid[:, None, :]


def check_tokens(tokens, cfg: ModelConfig) -> None:
    """Raises :class:`BadInput` for concrete ids outside ``[0, V)`` or a bad shape."""
    if isinstance(tokens, jax.core.Tracer):
        return
    arr = np.asarray(tokens)
    if arr.ndim != 2 or not np.issubdtype(arr.dtype, np.integer):
        raise BadInput(
            f"tokens must be an integer array [batch, seq], got "
            f"shape {arr.shape} dtype {arr.dtype}"
        )
    if arr.size and (arr.min() < 0 or arr.max() >= cfg.vocab_size):
        bad = int(arr.min()) if arr.min() < 0 else int(arr.max())
        raise BadInput(
            f"token id {bad} is outside [0, {cfg.vocab_size}) for "
            f"{cfg.name or cfg.family.value}"
        )
    if arr.shape[1] > cfg.max_positions:
        raise BadInput(
            f"sequence length {arr.shape[1]} exceeds the model's "
            f"max_positions = {cfg.max_positions}"
        )


@functools.partial(jax.jit, static_argnames=("config", "num_blocks"))
def _hidden(params, config, tokens, attention_mask, num_blocks):
    b, s = tokens.shape
    positions, mask = positions_and_mask(attention_mask, b, s)
    blocks = params["blocks"]
    if num_blocks is not None:
        blocks = jax.tree_util.tree_map(lambda a: a[:num_blocks], blocks)
    x = embed(params, config, tokens, positions)
    return run_blocks(blocks, config, x, positions, mask)[0]


def hidden_states(
    params: Params,
    config: ModelConfig,
    tokens: Int[ArrayLike, "batch seq"],
    *,
    num_blocks: int | None = None,
    attention_mask: Int[ArrayLike, "batch seq"] | None = None,
) -> Float[Array, "batch seq D"]:
    """Residual stream after the embedding and the first ``num_blocks`` blocks.

    Args:
        params: the model's parameter pytree.
        config: its :class:`ModelConfig`.
        tokens: token ids.
        num_blocks: how many blocks to run (all when None).
        attention_mask: 1 for real tokens, 0 for (left) padding; None = all real.

    Returns:
        ``[batch, seq, D]`` in the parameter dtype.
    """
    check_tokens(tokens, config)
    return _hidden(params, config, jnp.asarray(tokens), attention_mask, num_blocks)


def continue_prefixes(blocks, cfg: ModelConfig, prefix_x, prefix_mask, x, group):
    r"""Runs ``blocks`` over each distinct prefix once, then over rows that continue
    them: row b is the sequence ``prefix[group[b]] + x[b]``.

    Causal attention makes a prefix's activations independent of what follows, so
    its keys and values (a KV cache, as in generation) serve every row of its group;
    the rows attend to their group's prefix (its real positions) and causally to
    themselves. The same function as :func:`run_blocks` over the full sequences (to
    float rounding: the same sums over the same keys, in matrix products of other
    shapes), with G-fold fewer prefix positions for G rows per prefix.

    Args:
        blocks: dict of arrays with a leading layer axis.
        cfg: the model's config.
        prefix_x: ``[groups, prefix, D]`` residual stream of each distinct prefix.
        prefix_mask: ``[groups, prefix]`` 1 for real prefix tokens (left padding 0).
        x: ``[batch, rows, D]`` residual stream of the positions after the prefix
            (every one a real token).
        group: ``[batch]`` the prefix of each row.

    Returns:
        ``(prefix_out [groups, prefix, D], rows_out [batch, rows, D])``.
    """
    g, p, _ = prefix_x.shape
    b, n, _ = x.shape
    layers = jax.tree_util.tree_leaves(blocks)[0].shape[0]
    heads = FAMILIES[cfg.family].cache_heads(cfg)
    empty = jnp.zeros((layers, g, p, heads, cfg.head_dim), prefix_x.dtype)
    positions, mask = positions_and_mask(prefix_mask, g, p)
    prefix_out, (k, v) = run_blocks(
        blocks, cfg, prefix_x, positions, mask, (empty, empty, 0)
    )
    pad = jnp.zeros((layers, b, n, heads, cfg.head_dim), k.dtype)
    k = jnp.concatenate([k[:, group], pad], axis=2)
    v = jnp.concatenate([v[:, group], pad], axis=2)
    positions, mask = _row_positions_and_mask(prefix_mask, group, n)
    x, _ = run_blocks(blocks, cfg, x, positions, mask, (k, v, p))
    return prefix_out, x


def _row_positions_and_mask(prefix_mask, group, n):
    """Positions and attention mask ``[batch, n, prefix + n]`` of rows continuing
    their group's left-padded prefix."""
    valid = jnp.asarray(prefix_mask).astype(bool)[group]
    b, p = valid.shape
    count = jnp.sum(valid, axis=-1, dtype=jnp.int32)
    positions = count[:, None] + jnp.arange(n, dtype=jnp.int32)[None]
    causal = jnp.tril(jnp.ones((n, n), dtype=bool))
    mask = jnp.concatenate(
        [
            jnp.broadcast_to(valid[:, None, :], (b, n, p)),
            jnp.broadcast_to(causal, (b, n, n)),
        ],
        axis=-1,
    )
    return positions, mask


def distinct_prefixes(prefix_ids, prefix_mask):
    """``(ids [G, P], mask [G, P], group [B])``: the distinct (prefix, mask) rows of
    ``[B, P]`` arrays, in sorted order, and which one each row is (numpy; the
    samples of a GRPO group share their prompt)."""
    prefix_ids, prefix_mask = np.asarray(prefix_ids), np.asarray(prefix_mask)
    p = prefix_ids.shape[1]
    both = np.concatenate([prefix_ids, prefix_mask.astype(prefix_ids.dtype)], axis=1)
    distinct, group = np.unique(both, axis=0, return_inverse=True)
    return (
        distinct[:, :p].astype(prefix_ids.dtype),
        distinct[:, p:].astype(prefix_mask.dtype),
        group.reshape(-1).astype(np.int32),
    )


def _embedded_prefixes(params, config, prefix_ids, prefix_mask, tokens, group):
    """The embeddings of the prefixes and of the rows after them (positions count
    real tokens, as :func:`positions_and_mask` of the full sequence does)."""
    g, p = prefix_ids.shape
    positions, _ = positions_and_mask(prefix_mask, g, p)
    row_positions, _ = _row_positions_and_mask(prefix_mask, group, tokens.shape[1])
    return (
        embed(params, config, prefix_ids, positions),
        embed(params, config, tokens, row_positions),
    )


def prefix_hidden_states(
    params: Params,
    config: ModelConfig,
    prefix_ids: Int[ArrayLike, "groups prefix"],
    prefix_mask: Int[ArrayLike, "groups prefix"],
    tokens: Int[ArrayLike, "batch rows"],
    group: Int[ArrayLike, " batch"],
    *,
    num_blocks: int | None = None,
) -> tuple[Array, Array]:
    """:func:`hidden_states` of the sequences ``prefix[group[b]] + tokens[b]``, each
    distinct prefix run once (:func:`continue_prefixes`): ``(prefix_hidden
    [G, P, D], hidden [B, N, D])``; the full sequences' residual stream is
    ``concatenate([prefix_hidden[group], hidden], axis=1)`` (to float rounding).

    Args:
        params: the model's parameter pytree.
        config: its :class:`ModelConfig`.
        prefix_ids: the distinct prefixes, left-padded (:func:`distinct_prefixes`).
        prefix_mask: 1 for real prefix tokens.
        tokens: every row's tokens after its prefix (all real).
        group: each row's prefix.
        num_blocks: how many blocks to run (all when None).
    """
    check_tokens(prefix_ids, config)
    check_tokens(tokens, config)
    return _prefix_hidden(
        params,
        config,
        jnp.asarray(prefix_ids),
        jnp.asarray(prefix_mask),
        jnp.asarray(tokens),
        jnp.asarray(group, jnp.int32),
        num_blocks,
    )


@functools.partial(jax.jit, static_argnames=("config", "num_blocks"))
def _prefix_hidden(params, config, prefix_ids, prefix_mask, tokens, group, num_blocks):
    blocks = params["blocks"]
    if num_blocks is not None:
        blocks = jax.tree_util.tree_map(lambda a: a[:num_blocks], blocks)
    px, x = _embedded_prefixes(params, config, prefix_ids, prefix_mask, tokens, group)
    return continue_prefixes(blocks, config, px, prefix_mask, x, group)


def response_logits(params, config, prefix_ids, prefix_mask, tokens, group):
    r"""``[B, N, V]`` teacher-forced logits of each token of ``tokens`` after its
    prefix ``prefix[group[b]]`` (prefixes left-padded; :func:`distinct_prefixes`):
    the logits at the prefix's last position and at the rows' first N − 1, through
    the head only there. The same numbers as ``forward`` of the full sequences
    sliced to those positions (to float rounding), each distinct prefix run once.
    Traceable (``exactly_rounded`` evaluates it primitive by primitive)."""
    px, x = _embedded_prefixes(params, config, prefix_ids, prefix_mask, tokens, group)
    prefix_out, x = continue_prefixes(
        params["blocks"], config, px, prefix_mask, x, group
    )
    scoring = jnp.concatenate([prefix_out[group, -1:], x[:, :-1]], axis=1)
    return head(params, config, scoring)


@functools.partial(jax.jit, static_argnames=("config",))
def _forward(params, config, tokens, attention_mask):
    b, s = tokens.shape
    positions, mask = positions_and_mask(attention_mask, b, s)
    x = embed(params, config, tokens, positions)
    x, _ = run_blocks(params["blocks"], config, x, positions, mask)
    return head(params, config, x)


def forward(
    params: Params,
    config: ModelConfig,
    tokens: Int[ArrayLike, "batch seq"],
    *,
    attention_mask: Int[ArrayLike, "batch seq"] | None = None,
) -> Float[Array, "batch seq V"]:
    r"""Per-position next-token logits of a causal LM.

    .. math:: z_{b,t} = W_\text{head}\, \mathrm{norm}(h^{(L)}_{b,t}),\quad
              h^{(\ell)} = \mathrm{block}_\ell(h^{(\ell-1)}),\quad h^{(0)} = E[x]

    Layers run under ``lax.scan`` over the stacked block weights, so the compile time
    does not grow with depth. Differentiable in ``params`` (``jax.grad``, ``jax.jvp``,
    ``jax.vjp``); jit-compiled with ``config`` static.

    Args:
        params: the parameter pytree (see the module docstring), float32, bfloat16 or
            float64.
        config: the model's :class:`ModelConfig`.
        tokens: token ids in ``[0, V)``.
        attention_mask: 1 for real tokens, 0 for left padding; None = all real.

    Returns:
        Logits ``[batch, seq, V]`` in float32 (float64 for float64 parameters); row
        ``t`` scores the token at ``t + 1``.

    Examples:
        >>> import jax.random as jr
        >>> from theorycheck.models import Family, ModelConfig, init_params
        >>> cfg = ModelConfig(family=Family.LLAMA, vocab_size=11, hidden_size=8,
        ...                   num_layers=2, num_heads=2, num_kv_heads=1, head_dim=4,
        ...                   intermediate_size=16)
        >>> forward(init_params(cfg, key=jr.key(0)), cfg, [[1, 2, 3]]).shape
        (1, 3, 11)

    References:
        Touvron et al. 2023 (Llama), Radford et al. 2019 (GPT-2); Qwen2/Qwen3 add
        q/k/v biases and q/k RMSNorm to the Llama block; Gemma Team 2024 (Gemma).
    """
    check_tokens(tokens, config)
    return _forward(params, config, jnp.asarray(tokens), attention_mask)

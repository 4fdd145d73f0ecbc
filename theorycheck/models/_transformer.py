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

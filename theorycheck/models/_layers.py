"""The pieces of a transformer block: norms, rotary positions, grouped-query attention.

All functions are pure and jit-safe. Reductions (norm statistics, attention softmax) run
in at least float32 whatever the parameter dtype, so bfloat16 weights stay usable.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import Array
from jax.typing import ArrayLike
from jaxtyping import Bool, Float, Int

from theorycheck.models._config import RopeLayout

#: additive mask value: finite, so fully masked rows (padding queries) give no NaN.
_MASKED = -1e30


def lift(w: Array, ndim: int) -> Array:
    """Adds leading axes so ``w`` broadcasts explicitly against rank ``ndim``."""
    return jnp.reshape(w, (1,) * (ndim - w.ndim) + w.shape)


def accumulation_dtype(dtype) -> jnp.dtype:
    """float32 for bfloat16/float16/float32 inputs, float64 for float64 inputs."""
    return jnp.promote_types(dtype, jnp.float32)


def rms_norm(x: Float[Array, "... D"], weight: Float[Array, " D"], eps: float) -> Array:
    r"""Root-mean-square norm (Zhang & Sennrich 2019, eq. 4), statistics in float32.

    .. math:: y = \frac{x}{\sqrt{\tfrac{1}{D}\sum_i x_i^2 + \epsilon}} \odot w

    Args:
        x: activations with the normalised axis last.
        weight: per-feature gain ``w``.
        eps: the stabiliser :math:`\epsilon`.

    Returns:
        ``y`` with the shape and dtype of ``x``.
    """
    acc = x.astype(accumulation_dtype(x.dtype))
    acc = acc * jax.lax.rsqrt(jnp.mean(acc * acc, axis=-1, keepdims=True) + eps)
    return acc.astype(x.dtype) * lift(weight.astype(x.dtype), x.ndim)


def layer_norm(
    x: Float[Array, "... D"],
    weight: Float[Array, " D"],
    bias: Float[Array, " D"],
    eps: float,
) -> Array:
    r"""Layer norm (Ba et al. 2016, eq. 4), statistics in float32.

    .. math:: y = \frac{x - \bar x}{\sqrt{\operatorname{Var}(x) + \epsilon}} \odot w + b

    Args:
        x: activations with the normalised axis last.
        weight: gain ``w``.
        bias: shift ``b``.
        eps: the stabiliser :math:`\epsilon`.

    Returns:
        ``y`` with the shape and dtype of ``x``.
    """
    acc = x.astype(accumulation_dtype(x.dtype))
    centred = acc - jnp.mean(acc, axis=-1, keepdims=True)
    var = jnp.mean(centred * centred, axis=-1, keepdims=True)
    y = (centred * jax.lax.rsqrt(var + eps)).astype(x.dtype)
    return y * lift(weight.astype(x.dtype), x.ndim) + lift(bias.astype(x.dtype), x.ndim)


def rope(
    x: Float[Array, "batch seq heads head_dim"],
    positions: Int[ArrayLike, "batch seq"],
    theta: float,
    layout: RopeLayout,
) -> Array:
    r"""Rotary position embedding (Su et al. 2021, RoFormer eq. 34), either pair layout.

    Pair :math:`j` with frequency :math:`\omega_j = \theta^{-2j/d}` is rotated by the
    angle :math:`t\,\omega_j` at position :math:`t`:

    .. math:: (a, b) \mapsto (a\cos t\omega_j - b\sin t\omega_j,\;
              b\cos t\omega_j + a\sin t\omega_j)

    Args:
        x: query or key heads, ``head_dim`` even.
        positions: integer position of each token.
        theta: the rotary base :math:`\theta`.
        layout: ``HALF`` pairs ``(j, j + d/2)`` (Hugging Face), ``INTERLEAVED`` pairs
            ``(2j, 2j + 1)`` (llama.cpp's GGUF Llama layout).

    Returns:
        The rotated heads, same shape and dtype as ``x``.
    """
    d = x.shape[-1]
    acc = accumulation_dtype(x.dtype)
    inv_freq = theta ** (-jnp.arange(0, d, 2, dtype=acc) / d)
    angle = jnp.asarray(positions).astype(acc)[..., None] * inv_freq[None, None]
    cos = jnp.cos(angle)[:, :, None, :].astype(x.dtype)
    sin = jnp.sin(angle)[:, :, None, :].astype(x.dtype)
    if layout is RopeLayout.HALF:
        a, b = x[..., : d // 2], x[..., d // 2 :]
        return jnp.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1)
    a, b = x[..., 0::2], x[..., 1::2]
    return jnp.stack([a * cos - b * sin, b * cos + a * sin], axis=-1).reshape(x.shape)


def attention(
    q: Float[Array, "batch seq heads head_dim"],
    k: Float[Array, "batch keys kv_heads head_dim"],
    v: Float[Array, "batch keys kv_heads head_dim"],
    mask: Bool[Array, "batch seq keys"],
) -> Float[Array, "batch seq heads*head_dim"]:
    r"""Scaled dot-product attention with grouped-query heads (Ainslie et al. 2023).

    Query head :math:`h` reads key/value head :math:`\lfloor h / G \rfloor`, with
    :math:`G = H / H_{kv}` (the order of Hugging Face's ``repeat_kv``).

    .. math:: o = \operatorname{softmax}\!\Big(\frac{q k^\top}{\sqrt{d}} + m\Big) v

    Args:
        q: queries.
        k: keys.
        v: values.
        mask: True where a query may attend to a key.

    Returns:
        The heads concatenated along the last axis, dtype of ``q``.
    """
    b, s, h, d = q.shape
    kv = k.shape[2]
    qg = q.reshape(b, s, kv, h // kv, d)
    acc = accumulation_dtype(q.dtype)
    scores = jnp.einsum("bskgd,btkd->bkgst", qg, k, preferred_element_type=acc)
    scores = scores / jnp.sqrt(jnp.asarray(d, acc))
    scores = jnp.where(mask[:, None, None, :, :], scores, _MASKED)
    weights = jax.nn.softmax(scores, axis=-1).astype(q.dtype)
    out = jnp.einsum("bkgst,btkd->bskgd", weights, v)
    return out.reshape(b, s, h * d)

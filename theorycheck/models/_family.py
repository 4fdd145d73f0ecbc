"""What a model family is: the record each family module fills in, and its helpers.

One module per family (``_llama.py``, ``_gpt2.py``, ``_gemma.py``) builds one
:class:`FamilyModule`: the block, the embedding and the final norm, the parameter
shapes and their initial values, the Hugging Face tensor names and ``config.json``
fields, and (where llama.cpp has a converter) the GGUF names. ``_families.FAMILIES``
maps each :class:`~theorycheck.models.Family` to its module's record; the forward pass,
the parameter helpers and the loaders dispatch through that table only.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping

import jax
import jax.numpy as jnp

from theorycheck._errors import BadInput
from theorycheck.models._config import Family, ModelConfig

#: our key -> (tensor name, or a template with ``{i}`` for a block tensor; transpose)
Names = dict[str, tuple[str, bool]]


@dataclasses.dataclass(frozen=True)
class FamilyModule:
    """Everything the rest of ``theorycheck.models`` knows about one block structure.

    Attributes:
        family: the :class:`Family` it implements.
        block: ``(cfg, p, x, positions, mask, kv) -> (x, new_kv)``: one block on the
            residual stream ``x [batch, seq, D]``, ``p`` the layer's slice of
            ``params["blocks"]``; ``kv`` is None or ``(k_cache, v_cache, index)``
            (see :func:`write_cache`).
        embed: ``(params, cfg, tokens, positions) -> x [batch, seq, D]``.
        final_norm: ``(params, cfg, x) -> x``: the head's input.
        shapes: ``cfg -> {"top": {key: shape}, "block": {key: shape}}``, blocks
            without the layer axis; the parameter pytree has exactly these keys.
        top_keys: keys outside ``blocks`` that sit after the last block (trained with
            the top blocks by ``split_params``).
        init_value: key -> ``"ones"``, ``"zeros"`` or ``"normal"`` (``init_params``).
        cache_heads: ``cfg -> `` the number of key/value heads a KV cache holds.
        hf_architectures: the ``config.json`` ``architectures`` names it reads.
        hf_required: ``config.json`` field -> the values this implementation
            computes (a missing field counts as supported); overrides the shared table
            of ``_hf_config``.
        hf_config: ``(arch, fields, raw, path) -> ModelConfig`` from ``config.json``.
        hf_names: tensor names in the files -> ``(short -> full name, top, block)``.
        gguf_architectures: ``general.architecture`` values of GGUF files it reads.
        gguf_config: ``(arch, fields, path) -> ModelConfig`` from GGUF metadata.
        gguf_names: ``(top, block)`` GGUF tensor names.
        validate: raises ``ValueError`` for a config the block cannot run.
    """

    family: Family
    block: Callable
    embed: Callable
    final_norm: Callable
    shapes: Callable[[ModelConfig], dict]
    top_keys: tuple[str, ...]
    init_value: Callable[[str], str]
    cache_heads: Callable[[ModelConfig], int]
    hf_architectures: tuple[str, ...]
    hf_required: Mapping[str, tuple]
    hf_config: Callable[..., ModelConfig]
    hf_names: Callable[[Iterable[str]], tuple[dict, Names, Names]]
    gguf_architectures: tuple[str, ...] = ()
    gguf_config: Callable[..., ModelConfig] | None = None
    gguf_names: tuple[Names, Names] | None = None
    validate: Callable[[ModelConfig], None] = lambda cfg: None


def default_init(key: str) -> str:
    """Norm gains (``*norm``, ``*_w``) 1, biases (``b*``, ``*_b``) 0, others normal."""
    if key.endswith("norm") or key.endswith("_w"):
        return "ones"
    if key.startswith("b") or key.endswith("_b"):
        return "zeros"
    return "normal"


def cache_storage(dtype) -> jnp.dtype:
    """The dtype a decode cache of ``dtype`` values is stored in
    (:func:`~theorycheck.models._transformer.decode_blocks`): the uint16 bit patterns
    of a 16-bit float, else ``dtype`` itself.

    XLA's CPU backend computes a bfloat16 ``dynamic_update_slice`` in float32: it
    converts the whole array to float32, writes the slice and converts back, a read
    and a write of every layer's cache for each layer of each decode step. On an
    integer array the same write is in place. The values are the same bits either
    way (:func:`to_storage`, :func:`from_storage`).

    Examples:
        >>> cache_storage(jnp.bfloat16), cache_storage(jnp.float32)
        (dtype('uint16'), dtype('float32'))
    """
    dtype = jnp.dtype(dtype)
    if jnp.issubdtype(dtype, jnp.floating) and dtype.itemsize == 2:
        return jnp.dtype(jnp.uint16)
    return dtype


def to_storage(a, dtype):
    """``a`` as a cache of storage ``dtype`` holds it: its bit pattern for a 16-bit
    float in a uint16 cache (:func:`cache_storage`), else ``a.astype(dtype)``."""
    if jnp.dtype(dtype) == jnp.uint16 and jnp.dtype(a.dtype).itemsize == 2:
        return jax.lax.bitcast_convert_type(a, jnp.uint16)
    return a.astype(dtype)


def from_storage(a, dtype):
    """The values of ``dtype`` that a cache slice ``a`` stores (the inverse of
    :func:`to_storage`)."""
    if a.dtype == jnp.uint16:
        return jax.lax.bitcast_convert_type(a, dtype)
    return a


def write_cache(k, v, kv):
    """Writes this step's keys/values into the layer's cache at ``index``.

    Args:
        k: ``[batch, seq, Hkv, d]`` this step's keys.
        v: the values, same shape.
        kv: None (no cache); ``(k_cache, v_cache, index)`` with caches
            ``[batch, keys, Hkv, d]``; or ``(k_all, v_all, layer, index)`` with
            every layer's caches ``[L, batch, keys, Hkv, d]`` (only this step's
            positions are written, in place; :func:`~theorycheck.models._transformer.
            decode_blocks`).

    Returns:
        ``(k, v, None)`` without a cache; else the layer's updated caches to attend
        over and what the block returns: ``(k_cache, v_cache, (k_cache, v_cache))``,
        or ``(k_layer, v_layer, (k_all, v_all))``.
    """
    if kv is None:
        return k, v, None
    if len(kv) == 4:  # every layer's cache, updated in place (decode_blocks)
        k_all, v_all, layer, index = kv
        zero = jnp.zeros((), jnp.int32)
        start = (layer, zero, jnp.asarray(index, jnp.int32), zero, zero)
        k_all = jax.lax.dynamic_update_slice(
            k_all, to_storage(k[None], k_all.dtype), start
        )
        v_all = jax.lax.dynamic_update_slice(
            v_all, to_storage(v[None], v_all.dtype), start
        )
        k_layer = jax.lax.dynamic_index_in_dim(k_all, layer, keepdims=False)
        v_layer = jax.lax.dynamic_index_in_dim(v_all, layer, keepdims=False)
        k_layer, v_layer = (
            from_storage(k_layer, k.dtype),
            from_storage(v_layer, v.dtype),
        )
        return k_layer, v_layer, (k_all, v_all)
    k_cache, v_cache, index = kv
    start = (0, index, 0, 0)
    k_cache = jax.lax.dynamic_update_slice(k_cache, k.astype(k_cache.dtype), start)
    v_cache = jax.lax.dynamic_update_slice(v_cache, v.astype(v_cache.dtype), start)
    return k_cache, v_cache, (k_cache, v_cache)


class ConfigFields:
    """Typed, strict access to the fields of a parsed ``config.json``.

    Args:
        raw: the parsed JSON object.
        path: the file it came from (for error messages).
    """

    def __init__(self, raw: dict, path: str):
        self.raw, self.path = raw, path

    def get(self, name: str, default=None, *, kind=int, required=False):
        """Field ``name`` as ``kind`` (int, float or bool); ``default`` when absent.

        Raises :class:`BadInput` naming the file and field when it is missing and
        ``required``, or of the wrong type.
        """
        if name not in self.raw or self.raw[name] is None:
            if required:
                raise BadInput(f"{self.path}: missing field {name!r}")
            return default
        value = self.raw[name]
        ok = (
            isinstance(value, bool)
            if kind is bool
            else (
                isinstance(value, (int, float))
                and not isinstance(value, bool)
                and (kind is float or float(value).is_integer())
            )
        )
        if not ok:
            raise BadInput(
                f"{self.path}: field {name!r} = {value!r} is not a {kind.__name__}"
            )
        return kind(value)

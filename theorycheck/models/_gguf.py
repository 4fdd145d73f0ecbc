"""GGUF checkpoints (llama.cpp's format) read with the ``gguf`` package, dequantised."""

from __future__ import annotations

import hashlib
import os
from typing import TYPE_CHECKING

import numpy as np

from theorycheck._errors import BadInput
from theorycheck.models._config import Family, ModelConfig, RopeLayout
from theorycheck.models._gguf_tokenizer import tokenizer_from_gguf_fields
from theorycheck.models._hf import assemble
from theorycheck.models._optional import require

if TYPE_CHECKING:
    import gguf

#: GGUF architecture -> (stored rotary layout, q/k norm). llama.cpp's converter
#: permutes Llama's Q/K rows into adjacent pairs; Qwen models keep rotate-half (NEOX).
_ARCHITECTURES = {
    "llama": (RopeLayout.INTERLEAVED, False),
    "qwen2": (RopeLayout.HALF, False),
    "qwen3": (RopeLayout.HALF, True),
}
_BLOCK = {
    "attn_norm": ("blk.{i}.attn_norm.weight", False),
    "wq": ("blk.{i}.attn_q.weight", True),
    "wk": ("blk.{i}.attn_k.weight", True),
    "wv": ("blk.{i}.attn_v.weight", True),
    "wo": ("blk.{i}.attn_output.weight", True),
    "bq": ("blk.{i}.attn_q.bias", False),
    "bk": ("blk.{i}.attn_k.bias", False),
    "bv": ("blk.{i}.attn_v.bias", False),
    "q_norm": ("blk.{i}.attn_q_norm.weight", False),
    "k_norm": ("blk.{i}.attn_k_norm.weight", False),
    "mlp_norm": ("blk.{i}.ffn_norm.weight", False),
    "w_gate": ("blk.{i}.ffn_gate.weight", True),
    "w_up": ("blk.{i}.ffn_up.weight", True),
    "w_down": ("blk.{i}.ffn_down.weight", True),
}
_TOP = {
    "embed": ("token_embd.weight", False),
    "final_norm": ("output_norm.weight", False),
    "lm_head": ("output.weight", True),
}

_VERIFIED: dict[tuple, str] = {}


def sha256_file(path: str) -> str:
    """Hex sha256 of a file, cached per process by (path, size, mtime).

    Args:
        path: the file.

    Returns:
        The hex digest.
    """
    stat = os.stat(path)
    key = (os.path.realpath(path), stat.st_size, stat.st_mtime_ns)
    if key not in _VERIFIED:
        digest = hashlib.sha256()
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 22), b""):
                digest.update(chunk)
        _VERIFIED[key] = digest.hexdigest()
    return _VERIFIED[key]


def open_gguf(path: str, expected_sha256: str | None = None) -> gguf.GGUFReader:
    """Opens a GGUF file after checking it exists (and its sha256 when given).

    Args:
        path: the ``.gguf`` file.
        expected_sha256: hex digest the file must have, or None.

    Returns:
        The reader (tensors memory-mapped, not yet dequantised).
    """
    if not os.path.isfile(path):
        raise BadInput(f"{path}: missing GGUF file")
    if expected_sha256 is not None:
        got = sha256_file(path)
        if got != expected_sha256.lower():
            raise BadInput(
                f"{path}: sha256 {got} does not match the expected {expected_sha256}"
            )
    try:
        return require("gguf").GGUFReader(path)
    except Exception as err:  # truncated or foreign files fail in many ways
        raise BadInput(
            f"{path}: not a readable GGUF file, truncated or corrupt "
            f"({type(err).__name__}: {err})"
        ) from None


def _config(fields: dict, path: str) -> ModelConfig:
    arch = fields.get("general.architecture")
    if arch not in _ARCHITECTURES:
        raise BadInput(
            f"{path}: unknown architecture {arch!r} in field "
            f"'general.architecture'; supported: {sorted(_ARCHITECTURES)}"
        )
    layout, qk_norm = _ARCHITECTURES[arch]

    def get(name, default=None, kind=int):
        key = f"{arch}.{name}"
        if key not in fields:
            if default is None:
                raise BadInput(f"{path}: missing field {key!r}")
            return default
        return kind(fields[key])

    d, heads = get("embedding_length"), get("attention.head_count")
    n_vocab = len(fields.get("tokenizer.ggml.tokens", ()))
    try:
        return ModelConfig(
            family=Family.LLAMA,
            name=f"gguf:{arch}",
            vocab_size=get("vocab_size", n_vocab or None),
            hidden_size=d,
            num_layers=get("block_count"),
            num_heads=heads,
            num_kv_heads=get("attention.head_count_kv", heads),
            head_dim=get("attention.key_length", d // heads),
            intermediate_size=get("feed_forward_length"),
            norm_eps=get("attention.layer_norm_rms_epsilon", kind=float),
            rope_theta=get("rope.freq_base", 10000.0, float),
            rope_layout=layout,
            qk_norm=qk_norm,
            attention_bias="blk.0.attn_q.bias" in fields["_tensors"],
            tie_embeddings="output.weight" not in fields["_tensors"],
            max_positions=get("context_length", 2048),
        )
    except ValueError as err:
        raise BadInput(f"{path}: {err}") from None


def load_gguf(path: str, *, expected_sha256: str | None = None, dtype=np.float32):
    """Loads a Llama/Qwen2/Qwen3 GGUF file, dequantised, with its tokenizer.

    Matrices are stored ``[out, in]`` in numpy order and are transposed; a missing
    ``output.weight`` means the head is tied to ``token_embd``.

    Args:
        path: the ``.gguf`` file.
        expected_sha256: checked before reading when given.
        dtype: numpy dtype of the parameters.

    Returns:
        ``(config, params, tokenizer)`` with numpy parameter arrays.
    """
    reader = open_gguf(path, expected_sha256)
    fields = {}
    for name, field in reader.fields.items():
        if name.startswith("GGUF."):
            continue
        try:
            fields[name] = field.contents()
        except Exception as err:  # a corrupt field
            raise BadInput(
                f"{path}: unreadable metadata field {name!r} ({err})"
            ) from None
    tensors = {t.name: t for t in reader.tensors}
    fields["_tensors"] = tensors
    cfg = _config(fields, path)
    tokenizer = tokenizer_from_gguf_fields(fields, path)

    def read(name: str) -> np.ndarray:
        t = tensors[name]
        try:
            arr = require("gguf.quants").dequantize(t.data, t.tensor_type)
            return np.asarray(arr).reshape([int(s) for s in reversed(t.shape)])
        except Exception as err:  # unsupported quantisation or short data
            raise BadInput(
                f"{path}: cannot dequantise tensor {name!r} "
                f"({type(err).__name__}: {err})"
            ) from None

    params = assemble(cfg, _TOP, _BLOCK, read, path, dtype)
    return cfg, params, tokenizer

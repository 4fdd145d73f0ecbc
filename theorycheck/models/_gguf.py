"""GGUF checkpoints (llama.cpp's format) read with the ``gguf`` package, dequantised."""

from __future__ import annotations

import hashlib
import os
from typing import TYPE_CHECKING

import numpy as np

from theorycheck._errors import BadInput
from theorycheck.models._config import ModelConfig
from theorycheck.models._families import FAMILIES
from theorycheck.models._gguf_tokenizer import tokenizer_from_gguf_fields
from theorycheck.models._hf import assemble
from theorycheck.models._optional import require

if TYPE_CHECKING:
    import gguf

#: ``general.architecture`` -> the family module that reads it.
_ARCHITECTURES = {
    arch: module for module in FAMILIES.values() for arch in module.gguf_architectures
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
    try:
        return _ARCHITECTURES[arch].gguf_config(arch, fields, path)
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

    top, block = FAMILIES[cfg.family].gguf_names
    params = assemble(cfg, top, block, read, path, dtype)
    return cfg, params, tokenizer

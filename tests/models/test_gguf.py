"""load_gguf(): the same weights as GGUF and as HF give the same logits; refusals."""

import os
import shutil

import numpy as np
import pytest

from tests.models import _checkpoints as ck
from tests.models._checkpoints import token_batch
from theorycheck import BadInput
from theorycheck.models import RopeLayout, forward, load_gguf, load_hf, sha256_file
from theorycheck.testing import assert_close


def test_load_gguf_interleaved_layout_gives_hf_logits(tiny_dirs, tiny_gguf):
    cfg_hf, params_hf, _ = load_hf(tiny_dirs["llama"][0])
    cfg, params, _ = load_gguf(tiny_gguf)
    assert cfg.rope_layout is RopeLayout.INTERLEAVED
    assert cfg_hf.rope_layout is RopeLayout.HALF
    # the stored Q rows really are permuted: the layouts differ, the logits do not
    assert not np.allclose(params["blocks"]["wq"], params_hf["blocks"]["wq"])
    ids = token_batch(cfg.vocab_size, 2, 12, seed=8)
    # both float32 with identical weights up to a row permutation: summation order only
    assert_close(
        forward(params, cfg, ids), forward(params_hf, cfg_hf, ids), rtol=0, atol=1e-5
    )


@pytest.mark.parametrize("kind", ["qwen2", "qwen3"])
def test_load_gguf_qwen_rotate_half_gives_hf_logits(tiny_dirs, tmp_path, kind):
    directory, tensors, cfg_dict = tiny_dirs[kind]
    path = str(tmp_path / f"{kind}.gguf")
    ck.write_gguf(path, tensors, cfg_dict, arch=kind)
    cfg, params, _ = load_gguf(path)
    cfg_hf, params_hf, _ = load_hf(directory)
    assert cfg.rope_layout is RopeLayout.HALF and not cfg.tie_embeddings
    assert (cfg.qk_norm, cfg.attention_bias, cfg.head_dim) == (
        cfg_hf.qk_norm,
        cfg_hf.attention_bias,
        cfg_hf.head_dim,
    )
    ids = token_batch(cfg.vocab_size, 1, 9, seed=8)
    assert_close(
        forward(params, cfg, ids), forward(params_hf, cfg_hf, ids), rtol=0, atol=1e-5
    )


def test_load_gguf_with_wrong_rope_layout_differs(tiny_dirs, tiny_gguf):
    # meta-test: the parity above depends on the layout, so it can fail
    import dataclasses

    cfg, params, _ = load_gguf(tiny_gguf)
    wrong = dataclasses.replace(cfg, rope_layout=RopeLayout.HALF)
    ids = token_batch(cfg.vocab_size, 1, 12, seed=8)
    diff = np.abs(np.asarray(forward(params, cfg, ids) - forward(params, wrong, ids)))
    assert diff.max() > 1e-2


def test_load_gguf_tokenizer_matches_tokenizer_json(tiny_dirs, tiny_gguf):
    _, _, tok_hf = load_hf(tiny_dirs["llama"][0])
    _, _, tok = load_gguf(tiny_gguf)
    for text in ["the cap", "<|im_start|>then a cat", "Ünïcode and   spaces\n"]:
        assert tok.encode(text).ids == tok_hf.encode(text).ids
        assert tok.decode(tok.encode(text).ids, skip_special_tokens=False) == text


def test_load_gguf_checks_sha256(tiny_gguf):
    good = sha256_file(tiny_gguf)
    load_gguf(tiny_gguf, expected_sha256=good)
    with pytest.raises(BadInput, match=f"sha256 {good} does not match"):
        load_gguf(tiny_gguf, expected_sha256="0" * 64)


def test_load_gguf_refuses_missing_truncated_and_unknown(
    tiny_dirs, tiny_gguf, tmp_path
):
    with pytest.raises(BadInput, match="missing GGUF file"):
        load_gguf(str(tmp_path / "absent.gguf"))
    truncated = str(tmp_path / "truncated.gguf")
    with open(tiny_gguf, "rb") as fh:
        blob = fh.read()
    with open(truncated, "wb") as fh:
        fh.write(blob[: len(blob) * 2 // 3])
    with pytest.raises(BadInput, match="truncated.gguf"):
        load_gguf(truncated)
    _, tensors, cfg = tiny_dirs["llama"]
    unknown = str(tmp_path / "mamba.gguf")
    ck.write_gguf(unknown, tensors, cfg, arch="mamba")
    with pytest.raises(BadInput, match="unknown architecture 'mamba'"):
        load_gguf(unknown)
    no_tok = str(tmp_path / "notok.gguf")
    ck.write_gguf(no_tok, tensors, cfg, tokenizer=False)
    with pytest.raises(BadInput, match="notok.gguf: tokenizer missing"):
        load_gguf(no_tok)


def test_load_gguf_refuses_missing_tensor(tiny_dirs, tmp_path):
    _, tensors, cfg = tiny_dirs["llama"]
    path = str(tmp_path / "holey.gguf")
    partial = {k: v for k, v in tensors.items() if "layers.2.mlp.gate_proj" not in k}
    ck.write_gguf(path, partial, cfg)
    with pytest.raises(BadInput, match="missing tensor 'blk.2.ffn_gate.weight'"):
        load_gguf(path)


def test_load_gguf_copy_keeps_sha(tiny_gguf, tmp_path):
    copy = str(tmp_path / "copy.gguf")
    shutil.copy(tiny_gguf, copy)
    assert sha256_file(copy) == sha256_file(tiny_gguf)
    with open(copy, "r+b") as fh:
        fh.seek(os.path.getsize(copy) - 1)
        fh.write(b"\x01")
    assert sha256_file(copy) != sha256_file(tiny_gguf)

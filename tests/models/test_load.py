"""load_model(): names and paths, the embedded default's checks, and the real model."""

import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest

from theorycheck import BadInput
from theorycheck.models import (
    RopeLayout,
    _load,
    embedded_path,
    forward,
    generate,
    load_model,
    sampling_logprobs,
    sha256_file,
)

PROMPT = (
    "The capital of France is Paris. The capital of Germany is Berlin. "
    "The capital of Italy is"
)
SMOLLM2_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"


def test_load_model_dispatches_paths(tiny_dirs, tiny_gguf):
    assert load_model(tiny_dirs["gpt2"][0]).config.name == "GPT2LMHeadModel"
    model = load_model(tiny_gguf, dtype=jnp.bfloat16)
    assert model.config.name == "gguf:llama"
    assert model.params["embed"].dtype == jnp.bfloat16
    with pytest.raises(BadInput, match="unknown model 'smollm3'"):
        load_model("smollm3")


def test_embedded_path_has_pinned_sha256():
    assert sha256_file(embedded_path()) == SMOLLM2_SHA256


def test_load_model_refuses_wrong_sha256(monkeypatch):
    dist, rel, _ = _load._EMBEDDED["smollm2"]
    monkeypatch.setitem(_load._EMBEDDED, "smollm2", (dist, rel, "f" * 64))
    with pytest.raises(BadInput, match=r"Q4_1\.gguf: sha256 b179c95.* does not match"):
        load_model("smollm2")


def test_load_model_missing_package_is_named(monkeypatch):
    monkeypatch.setitem(_load._EMBEDDED, "ghost", ("no-such-dist-xyz", "f.gguf", "0"))
    with pytest.raises(BadInput, match="needs the package no-such-dist-xyz"):
        load_model("ghost")


@pytest.mark.slow
def test_load_model_smollm2_predicts_rome(real_model):
    cfg, params, tok = real_model
    assert (cfg.num_layers, cfg.vocab_size, cfg.num_heads, cfg.num_kv_heads) == (
        30,
        49152,
        9,
        3,
    )
    assert cfg.tie_embeddings and cfg.rope_layout is RopeLayout.INTERLEAVED
    ids = np.asarray([tok.encode(PROMPT).ids], np.int32)
    logits = forward(params, cfg, ids)
    assert tok.decode([int(jnp.argmax(logits[0, -1]))]) == " Rome"
    # the KV-cache path continues greedily with the same token and log-probs
    out = generate(
        params,
        cfg,
        ids,
        key=jr.key(0),
        max_new_tokens=3,
        temperature=0.0,
        topk_logprobs=5,
    )
    assert tok.decode([int(out.tokens[0, 0])]) == " Rome"
    seq = np.concatenate([ids, np.asarray(out.tokens)], axis=1)
    steps = forward(params, cfg, seq)[0, ids.shape[1] - 1 : -1]
    recomputed = np.asarray(sampling_logprobs(steps, 0))
    want = recomputed[np.arange(3), np.asarray(out.tokens[0])]
    # float32 through 30 layers, cached vs uncached summation order
    np.testing.assert_allclose(out.logprobs[0], want, atol=1e-4)
    np.testing.assert_allclose(out.topk_logprobs[0, 0, 0], want[0], atol=1e-4)

"""The Gemma family: forward = the numpy reference, loading, params helpers, config."""

import json
import os
import shutil

import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest

from tests.models._checkpoints import token_batch
from tests.models._reference import reference_logits
from theorycheck import BadInput
from theorycheck.models import (
    Family,
    config_from_hf,
    forward,
    hidden_states,
    init_params,
    load_hf,
    logits_from_hidden,
    logits_from_prefix,
    split_params,
)
from theorycheck.testing import assert_close


def test_gemma_forward_matches_numpy_reference_float32(tiny_dirs):
    directory, tensors, cfg_dict = tiny_dirs["gemma"]
    cfg, params, _ = load_hf(directory)
    ids = token_batch(cfg.vocab_size, 2, 11, seed=21)
    got = forward(params, cfg, ids)
    assert got.dtype == jnp.float32 and got.shape == (2, 11, cfg.vocab_size)
    for b in range(2):
        # float32 model vs float64 reference: the same 1e-4 target as the others.
        assert_close(got[b], reference_logits(tensors, cfg_dict, ids[b]), atol=1e-4)


def test_gemma_forward_matches_numpy_reference_float64(tiny_dirs):
    directory, tensors, cfg_dict = tiny_dirs["gemma"]
    cfg, params, _ = load_hf(directory, dtype=np.float64)
    ids = token_batch(cfg.vocab_size, 1, 9, seed=22)
    got = forward(params, cfg, ids)
    assert got.dtype == jnp.float64
    want = reference_logits(tensors, cfg_dict, ids[0])
    assert_close(got[0], want, rtol=0, atol=1e-10)
    # Gemma's changes are visible at this size: Llama's block (gain w, SwiGLU, no
    # sqrt(D)) on the same tensors is far from the model.
    llama_like = dict(cfg_dict, architectures=["LlamaForCausalLM"], rope_theta=1e4)
    other = reference_logits(tensors, llama_like, ids[0])
    assert float(np.max(np.abs(np.asarray(got[0]) - other))) > 1e-2


def test_gemma_config_and_tensors_load(tiny_dirs):
    directory, tensors, cfg_dict = tiny_dirs["gemma"]
    cfg, params, _ = load_hf(directory)
    assert cfg.family is Family.GEMMA and cfg.name == "GemmaForCausalLM"
    assert cfg.tie_embeddings and "lm_head" not in params
    assert cfg.head_dim == 16 != cfg.hidden_size // cfg.num_heads
    assert cfg.num_kv_heads == 1 and cfg.norm_eps == 1e-6
    np.testing.assert_array_equal(
        params["blocks"]["mlp_norm"][1],
        tensors["model.layers.1.post_attention_layernorm.weight"],
    )
    np.testing.assert_array_equal(
        params["blocks"]["wk"][0], tensors["model.layers.0.self_attn.k_proj.weight"].T
    )


def test_gemma_init_params_has_the_loaders_structure_and_unit_gains(tiny_dirs):
    cfg, loaded, _ = load_hf(tiny_dirs["gemma"][0])
    fresh = init_params(cfg, key=jr.key(0))
    shapes = lambda tree: {
        k: (v.shape if not isinstance(v, dict) else shapes(v)) for k, v in tree.items()
    }
    assert shapes(fresh) == shapes(loaded)
    # gains are stored as offsets from 1: a fresh norm is the identity gain
    np.testing.assert_array_equal(fresh["final_norm"], np.zeros(cfg.hidden_size))
    np.testing.assert_array_equal(fresh["blocks"]["attn_norm"], 0.0)


@pytest.mark.parametrize("kind", ["gemma", "gpt2"])
def test_shared_prefix_logits_equal_full_sequence_logits(tiny_dirs, kind):
    """logits_from_prefix (the KV-cache path of the block) = logits_from_hidden."""
    cfg, params, _ = load_hf(tiny_dirs[kind][0], dtype=np.float64)
    n_top, prefix = 1, 4
    trainable, frozen = split_params(params, cfg, n_top)
    ids = token_batch(cfg.vocab_size, 2, 7, seed=23)
    ids[1, :prefix] = ids[0, :prefix]  # both rows continue the same prefix
    hidden = hidden_states(params, cfg, ids, num_blocks=cfg.num_layers - n_top)
    full = logits_from_hidden(trainable, frozen, cfg, hidden)[:, prefix:]
    got = logits_from_prefix(
        trainable,
        frozen,
        cfg,
        hidden[:1, :prefix],
        np.ones((1, prefix), np.int32),
        hidden[:, prefix:],
        np.zeros(2, np.int32),
    )
    assert_close(got, full, rtol=1e-12, atol=1e-12)


def _raw(tiny_dirs, **changes):
    raw = dict(tiny_dirs["gemma"][2], **changes)
    return {k: v for k, v in raw.items() if v is not None}


@pytest.mark.parametrize(
    "changes,message",
    [
        ({"hidden_act": "gelu"}, "'hidden_act' = 'gelu' is not supported"),
        ({"hidden_activation": "gelu"}, "'hidden_activation' = 'gelu'"),
        ({"final_logit_softcapping": 30.0}, "'final_logit_softcapping'"),
        ({"head_dim": None}, "missing field 'head_dim'"),
        ({"head_dim": 15}, "head_dim = 15 must be even"),
    ],
)
def test_gemma_config_refuses_what_it_does_not_compute(tiny_dirs, changes, message):
    with pytest.raises(BadInput, match=message):
        config_from_hf(_raw(tiny_dirs, **changes))


def test_gemma_checkpoint_without_a_norm_tensor_is_refused(tiny_dirs, tmp_path):
    directory = str(tmp_path / "gemma")
    shutil.copytree(tiny_dirs["gemma"][0], directory)
    from safetensors.numpy import load_file, save_file

    path = os.path.join(directory, "model.safetensors")
    tensors = load_file(path)
    del tensors["model.layers.1.input_layernorm.weight"]
    save_file(tensors, path)
    with open(os.path.join(directory, "config.json")) as fh:
        assert json.load(fh)["architectures"] == ["GemmaForCausalLM"]
    with pytest.raises(BadInput, match="missing tensor 'model.layers.1.input_layer"):
        load_hf(directory)

"""load_hf(): round trip of tiny HF checkpoints, sharded indexes, and refused input."""

import json
import os
import shutil

import numpy as np
import pytest

from tests.models import _checkpoints as ck
from theorycheck import BadInput
from theorycheck.models import Family, load_hf


def test_load_hf_round_trips_llama_tensors(tiny_dirs):
    directory, tensors, _ = tiny_dirs["llama"]
    cfg, params, tok = load_hf(directory)
    assert cfg.family is Family.LLAMA and cfg.tie_embeddings and "lm_head" not in params
    np.testing.assert_array_equal(params["embed"], tensors["model.embed_tokens.weight"])
    for i in range(cfg.num_layers):
        p = f"model.layers.{i}."
        np.testing.assert_array_equal(
            params["blocks"]["wq"][i], tensors[p + "self_attn.q_proj.weight"].T
        )
        np.testing.assert_array_equal(
            params["blocks"]["w_down"][i], tensors[p + "mlp.down_proj.weight"].T
        )
        np.testing.assert_array_equal(
            params["blocks"]["mlp_norm"][i],
            tensors[p + "post_attention_layernorm.weight"],
        )
    assert tok.decode(tok.encode("the cap").ids) == "the cap"


def test_load_hf_reads_sharded_index_and_qk_norm(tiny_dirs):
    directory, tensors, cfg_dict = tiny_dirs["qwen3"]
    assert os.path.isfile(os.path.join(directory, "model.safetensors.index.json"))
    cfg, params, _ = load_hf(directory)
    assert cfg.qk_norm and cfg.head_dim == cfg_dict["head_dim"] != cfg.hidden_size // 4
    np.testing.assert_array_equal(params["lm_head"], tensors["lm_head.weight"].T)
    np.testing.assert_array_equal(
        params["blocks"]["k_norm"][2], tensors["model.layers.2.self_attn.k_norm.weight"]
    )


def test_load_hf_round_trips_gpt2_conv1d_layout(tiny_dirs):
    directory, tensors, _ = tiny_dirs["gpt2"]
    cfg, params, _ = load_hf(directory)
    assert cfg.family is Family.GPT2 and cfg.intermediate_size == 4 * cfg.hidden_size
    np.testing.assert_array_equal(
        params["blocks"]["w_qkv"][1], tensors["transformer.h.1.attn.c_attn.weight"]
    )
    np.testing.assert_array_equal(
        params["pos_embed"], tensors["transformer.wpe.weight"]
    )


def test_load_hf_bfloat16_weights_read(tmp_path):
    import ml_dtypes
    from safetensors.numpy import save_file

    directory = str(tmp_path)
    tensors = ck.write_hf(directory, "llama")
    half = {k: v.astype(ml_dtypes.bfloat16) for k, v in tensors.items()}
    save_file(half, os.path.join(directory, "model.safetensors"))
    _, params, _ = load_hf(directory)
    assert params["embed"].dtype == np.float32
    np.testing.assert_array_equal(
        params["embed"], half["model.embed_tokens.weight"].astype(np.float32)
    )


def _copy(tiny_dirs, tmp_path, kind="llama"):
    target = str(tmp_path / kind)
    shutil.copytree(tiny_dirs[kind][0], target)
    return target


def _edit_config(directory, **changes):
    path = os.path.join(directory, "config.json")
    with open(path) as fh:
        cfg = json.load(fh)
    for k, v in changes.items():
        if v is None:
            cfg.pop(k)
        else:
            cfg[k] = v
    with open(path, "w") as fh:
        json.dump(cfg, fh)


@pytest.mark.parametrize(
    "changes,message",
    [
        (
            {"architectures": ["MambaForCausalLM"]},
            "unknown architecture 'MambaForCausalLM'",
        ),
        ({"rope_scaling": {"type": "yarn", "factor": 4.0}}, "field 'rope_scaling'"),
        ({"hidden_act": "gelu"}, "field 'hidden_act' = 'gelu'"),
        ({"hidden_size": None}, "missing field 'hidden_size'"),
        ({"num_hidden_layers": 2.5}, "field 'num_hidden_layers' = 2.5 is not a int"),
        ({"num_key_value_heads": 3}, "not a multiple of num_kv_heads = 3"),
    ],
)
def test_load_hf_refuses_bad_config(tiny_dirs, tmp_path, changes, message):
    directory = _copy(tiny_dirs, tmp_path)
    _edit_config(directory, **changes)
    with pytest.raises(BadInput, match=message) as err:
        load_hf(directory)
    assert "config.json" in str(err.value)


def test_load_hf_refuses_missing_and_truncated_files(tiny_dirs, tmp_path):
    directory = _copy(tiny_dirs, tmp_path)
    weights = os.path.join(directory, "model.safetensors")
    with open(weights, "rb") as fh:
        blob = fh.read()
    with open(weights, "wb") as fh:
        fh.write(blob[: len(blob) // 2])
    with pytest.raises(BadInput, match="model.safetensors"):
        load_hf(directory)
    os.remove(weights)
    with pytest.raises(BadInput, match=r"no \*\.safetensors file"):
        load_hf(directory)
    os.remove(os.path.join(directory, "tokenizer.json"))
    with pytest.raises(BadInput, match="tokenizer.json: tokenizer missing"):
        load_hf(directory)
    os.remove(os.path.join(directory, "config.json"))
    with pytest.raises(BadInput, match="config.json: missing"):
        load_hf(directory)


def test_load_hf_refuses_missing_tensor_and_wrong_shape(tiny_dirs, tmp_path):
    from safetensors.numpy import save_file

    directory = _copy(tiny_dirs, tmp_path)
    tensors = dict(tiny_dirs["llama"][1])
    weights = os.path.join(directory, "model.safetensors")
    name = "model.layers.1.mlp.up_proj.weight"
    save_file({k: v for k, v in tensors.items() if k != name}, weights)
    with pytest.raises(BadInput, match=f"missing tensor '{name}'"):
        load_hf(directory)
    tensors[name] = tensors[name][:, :-1].copy()
    save_file(tensors, weights)
    with pytest.raises(BadInput, match=f"tensor '{name}' has shape"):
        load_hf(directory)


def test_load_hf_refuses_shard_missing_from_index(tiny_dirs, tmp_path):
    directory = _copy(tiny_dirs, tmp_path, "qwen3")
    os.remove(os.path.join(directory, "model-00002-of-00002.safetensors"))
    with pytest.raises(BadInput, match="model-00002-of-00002.safetensors: missing"):
        load_hf(directory)

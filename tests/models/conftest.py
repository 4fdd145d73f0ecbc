"""Fixtures: tiny checkpoints written once per session, and the real default model."""

import pytest

from tests.models import _checkpoints as ck

#: a fixed seed per kind: adding a kind leaves the others' weights as they were.
SEEDS = {"gpt2": 0, "llama": 1, "qwen2": 2, "qwen3": 3, "gemma": 4}


@pytest.fixture(scope="session")
def tiny_dirs(tmp_path_factory):
    """kind -> (directory, HF tensors, config dict) for every kind of ``ck.CONFIGS``."""
    assert set(SEEDS) == set(ck.CONFIGS)
    out = {}
    for kind, seed in SEEDS.items():
        d = tmp_path_factory.mktemp(f"hf_{kind}")
        shards = 2 if kind == "qwen3" else 1
        tensors = ck.write_hf(str(d), kind, seed=seed, shards=shards)
        out[kind] = (str(d), tensors, ck.config_dict(kind))
    return out


@pytest.fixture(scope="session")
def tiny_gguf(tiny_dirs, tmp_path_factory):
    """The tiny Llama's weights written as GGUF (Q/K permuted as llama.cpp does)."""
    _, tensors, cfg = tiny_dirs["llama"]
    path = str(tmp_path_factory.mktemp("gguf") / "tiny-llama.gguf")
    ck.write_gguf(path, tensors, cfg)
    return path


@pytest.fixture(scope="session")
def real_model():
    """The embedded SmolLM2-135M-Instruct, loaded (dequantised, float32) once."""
    from theorycheck.models import load_model

    return load_model("smollm2")

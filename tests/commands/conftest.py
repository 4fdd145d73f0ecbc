"""Fixtures of the contract suite (``test_contract*.py``)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.models import _checkpoints as ck
from theorycheck.losses._audit import synthetic_batch


@pytest.fixture(scope="session")
def files(tmp_path_factory):
    """A valid batch and a tiny checkpoint (HF directory + GGUF file)."""
    root = tmp_path_factory.mktemp("contract")
    batch = root / "batch.npz"
    np.savez(batch, **synthetic_batch(0, prompts=2, responses=2, length=4))
    model = root / "hf"
    tensors = ck.write_hf(str(model), "llama", seed=1)
    gguf = root / "tiny.gguf"
    ck.write_gguf(str(gguf), tensors, ck.config_dict("llama"))
    return {"root": root, "batch": str(batch), "model": str(model), "gguf": str(gguf)}

"""Data parallel: the trainer and the probe with the batch rows sharded over 8
virtual CPU devices give the unsharded numbers."""

import jax
import numpy as np
import pytest

from experiments.runner import data_sharding
from theorycheck.probes import analyze_probe, run_probe
from theorycheck.rl import TrainConfig, Trainer

pytestmark = pytest.mark.multidevice


def test_sharded_probe_equals_unsharded(tiny, rollouts_bf16):
    if jax.device_count() < 8:
        pytest.skip(
            "needs 8 devices (XLA_FLAGS=--xla_force_host_platform_device_count=8)"
        )
    cfg = TrainConfig(lr=1e-2, minibatches=2)
    plain = Trainer(tiny, rollouts_bf16, cfg, seed=0)
    sharded = Trainer(tiny, rollouts_bf16, cfg, seed=0, sharding=data_sharding(8))
    assert len(sharded.batch.hidden.sharding.device_set) == 8
    a = run_probe(plain, topk=5)
    b = run_probe(sharded, topk=5)
    np.testing.assert_allclose(b["trajectory"], a["trajectory"], rtol=1e-9, atol=1e-15)
    for ra, rb in zip(a["steps"], b["steps"]):
        for key in ("ntk1", "ntk2", "ddot_full", "ratio"):
            np.testing.assert_allclose(rb[key], ra[key], rtol=1e-7, atol=1e-13)
    sa, sb = analyze_probe(a), analyze_probe(b)
    assert sa["scale"]["updated_tokens"] == sb["scale"]["updated_tokens"]

"""Row-sharded inputs (8 virtual CPU devices) give the same results as unsharded."""

import jax
import numpy as np
import pytest
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

from theorycheck.numeric import MaskConfig, ddot, divergence, token_stats

pytestmark = pytest.mark.multidevice


def _mesh():
    if jax.device_count() < 8:
        pytest.skip(
            "needs 8 devices (XLA_FLAGS=--xla_force_host_platform_device_count=8)"
        )
    return jax.make_mesh((8,), ("rows",), axis_types=(AxisType.Auto,))


def _inputs(rows=32, v=257, seed=0):
    rng = np.random.default_rng(seed)
    z = (rng.normal(size=(rows, v)) * 3).astype(np.float32)
    b = np.log(rng.dirichlet(np.full(v, 0.3), size=rows)).astype(np.float32)
    k = rng.integers(0, v, size=rows).astype(np.int32)
    adv = rng.normal(size=rows).astype(np.float32)
    return b, z, k, adv


def test_token_stats_sharded_over_rows_equals_unsharded():
    mesh = _mesh()
    b, z, k, adv = _inputs()
    put = lambda x, spec: jax.device_put(x, NamedSharding(mesh, spec))
    sb, sz = put(b, P("rows", None)), put(z, P("rows", None))
    sk, sa = put(k, P("rows")), put(adv, P("rows"))
    cfg = MaskConfig(topk=20)
    want = token_stats(b, z, k, adv, config=cfg)
    got = token_stats(sb, sz, sk, sa, config=cfg, block_rows=2)
    assert set(got) == set(want)
    for name in want:
        # same float32 program on each shard: identical up to reduction order
        np.testing.assert_allclose(
            np.asarray(got[name]),
            np.asarray(want[name]),
            rtol=1e-5,
            atol=1e-6,
            err_msg=name,
        )


def test_ddot_and_divergence_sharded_over_rows_equal_unsharded():
    mesh = _mesh()
    b, z, k, _ = _inputs(rows=16, v=64, seed=1)
    rows = NamedSharding(mesh, P("rows", None))
    sb, sz = jax.device_put(b, rows), jax.device_put(z, rows)
    sk = jax.device_put(k, NamedSharding(mesh, P("rows")))
    for est in ("full", "topk_proportional"):
        got = ddot(sb, sz, sk, estimator=est, topk=5).ddot
        want = ddot(b, z, k, estimator=est, topk=5).ddot
        np.testing.assert_allclose(
            np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-6
        )
    got = divergence(sb, sz, sk, kind="topk_kl", topk=5)
    np.testing.assert_allclose(
        np.asarray(got),
        np.asarray(divergence(b, z, k, kind="topk_kl", topk=5)),
        rtol=1e-5,
        atol=1e-6,
    )

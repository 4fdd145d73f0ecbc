"""Tests for theorycheck.numeric._token_stats: blocked stats equal the per-row API."""

import jax
import numpy as np
import pytest

from theorycheck import BadInput
from theorycheck.numeric import (
    MaskConfig,
    ddot,
    divergence,
    dppo_mask,
    first_order_radius,
    predictive_mask,
    ratio_mask,
    second_order,
    token_stats,
)
from theorycheck.testing import assert_close

CFG = MaskConfig(topk=3, delta_kl=0.05, delta_tv=0.15)
ESTIMATORS = ("full", "topk_aggregated", "topk_uniform", "topk_proportional")


def _batch(shape=(2, 3), v=11, seed=0, dtype=np.float64):
    rng = np.random.default_rng(seed)
    z = (rng.normal(size=(*shape, v)) * 2).astype(dtype)
    mu = rng.dirichlet(np.full(v, 0.5), size=shape)
    b = np.log(mu).astype(dtype)
    k = rng.integers(0, v, size=shape).astype(np.int64)
    adv = rng.normal(size=shape).astype(dtype)
    return b, z, k, adv


@pytest.mark.parametrize("block_rows", [1, 4])
def test_token_stats_matches_single_position_api(block_rows):
    b, z, k, adv = _batch()
    s = token_stats(b, z, k, adv, config=CFG, block_rows=block_rows)
    for kind in ("kl", "tv", "binary_kl", "binary_tv", "topk_kl", "topk_tv"):
        assert_close(s[kind], divergence(b, z, k, kind=kind, topk=3))
    for kind in ("kl", "tv"):
        for est in ESTIMATORS:
            ref = ddot(b, z, k, kind=kind, estimator=est, topk=3)
            assert_close(s[f"ddot_{kind}_{est}"], ref.ddot)
            assert_close(s[f"local_{kind}_{est}"], ref.local)
            assert_close(s[f"global_{kind}_{est}"], ref.global_)
            div = s[kind] if est == "full" else s["topk_" + kind]
            delta = CFG.delta_kl if kind == "kl" else CFG.delta_tv
            want = predictive_mask(div, ref.ddot, adv, delta=delta)
            assert np.array_equal(s[f"mask_pred_{kind}_{est}"], want)
        assert_close(s[f"second_order_{kind}"], second_order(b, z, k, kind=kind))
        assert_close(s[f"radius_{kind}"], first_order_radius(b, z, k, kind=kind))
    ratio = s["ratio"]
    pi = np.exp(np.asarray(jax.nn.log_softmax(z)))
    assert_close(ratio, np.take_along_axis(pi / np.exp(b), k[..., None], -1)[..., 0])
    assert np.array_equal(
        s["mask_ppo"], ratio_mask(ratio, adv, eps_low=0.2, eps_high=0.2)
    )
    for name in ("binary_kl", "binary_tv", "topk_kl", "topk_tv"):
        delta = CFG.delta_kl if name.endswith("kl") else CFG.delta_tv
        assert np.array_equal(
            s["mask_dppo_" + name], dppo_mask(s[name], ratio, adv, delta=delta)
        )


def test_token_stats_float32_close_to_float64():
    b, z, k, adv = _batch(shape=(4,), v=300, seed=3)
    s64 = token_stats(b, z, k, adv, config=CFG)
    s32 = token_stats(
        b.astype(np.float32),
        z.astype(np.float32),
        k,
        adv.astype(np.float32),
        config=CFG,
    )
    assert s32["kl"].dtype == np.float32
    for name in ("kl", "tv", "topk_kl", "ddot_kl_full", "ddot_tv_topk_uniform"):
        # float32 accumulation over V = 300 terms: a few ulps of the largest term
        assert_close(s32[name], s64[name], dtype=np.float32, rtol=1e-4, atol=1e-5)


def test_token_stats_bad_input_names_the_row():
    b, z, k, adv = _batch(shape=(5,), v=7)
    z[3, 2] = np.nan
    with pytest.raises(BadInput, match="row 3"):
        token_stats(b, z, k, adv)
    b, z, k, adv = _batch(shape=(5,), v=7)
    with pytest.raises(BadInput, match="adv"):
        token_stats(b, z, k, adv[:2])
    with pytest.raises(BadInput, match="topk"):
        token_stats(b, z, k, adv, config=MaskConfig(topk=0))

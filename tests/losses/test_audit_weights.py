"""Corrections and reductions applied to a batch, against per-element loops."""

from __future__ import annotations

import math

import numpy as np
import pytest

from theorycheck._errors import BadInput
from theorycheck.losses import Reduction
from theorycheck.losses._audit import synthetic_batch, validate_batch
from theorycheck.losses._audit_weights import apply_to_batch, vl_norm


@pytest.fixture()
def batch():
    return validate_batch(synthetic_batch(3, prompts=3, responses=4, length=12))


def _loop_token_mean_tis(b, cap):
    m, p, q = b["mask"], b["p"], b["q"]
    n = m.sum()
    w = np.zeros_like(m)
    for s in range(m.shape[0]):
        for t in range(m.shape[1]):
            if m[s, t]:
                w[s, t] = min(p[s, t] / q[s, t], cap) / n
    return w


def test_tis_token_with_token_mean_matches_a_loop(batch):
    out = apply_to_batch(
        batch,
        [{"correction": "tis_token", "params": {"cap": 1.2}}],
        Reduction("token_mean"),
    )
    np.testing.assert_allclose(
        out["weights"], _loop_token_mean_tis(batch, 1.2), rtol=1e-12
    )
    ratio = batch["p"] / batch["q"]
    clipped = ((ratio > 1.2) & (batch["mask"] > 0)).sum() / batch["mask"].sum()
    assert out["clipped_token_share"] == pytest.approx(clipped)
    assert out["effective_loss_scale"] == pytest.approx(out["weights"].sum())


def test_rejection_keeps_denominators_before_it_unless_told(batch):
    spec = [{"correction": "icepop", "params": {"low": 0.9, "high": 1.1}}]
    before = apply_to_batch(batch, spec, Reduction("token_mean"))
    after = apply_to_batch(
        batch, spec, Reduction("token_mean"), counts_before_rejection=False
    )
    m = batch["mask"]
    r = batch["p"] / batch["q"]
    kept = (m > 0) & (r >= 0.9) & (r <= 1.1)
    assert before["rejected_token_share"] == pytest.approx(1 - kept.sum() / m.sum())
    # counted before: kept weights r / N (N all valid tokens); after: r / N_kept
    assert before["effective_loss_scale"] == pytest.approx(r[kept].sum() / m.sum())
    assert after["effective_loss_scale"] == pytest.approx(r[kept].sum() / kept.sum())


def test_sequence_batch_normalisation_has_mean_one(batch):
    spec = [
        {"correction": "tis_sequence", "params": {"cap": 2.0}, "batch_normalize": True}
    ]
    out = apply_to_batch(
        batch, spec, Reduction("seq_mean_token_mean", count_empty=True)
    )
    m = batch["mask"]
    seq_w = (out["weights"] * m).sum(axis=1)  # = normalised IS weight / S per row
    rows = m.sum(axis=1) > 0
    assert seq_w[rows].mean() * m.shape[0] == pytest.approx(1.0)
    assert out["corrections"][0]["correction"] == "tis_sequence/batch_mean"


def test_not_applied_corrections_are_listed_only(batch):
    out = apply_to_batch(
        batch,
        [{"correction": "tis_token", "params": {"cap": 1.0}, "applied": False}],
        Reduction("token_mean"),
    )
    assert out["not_applied"] == ["tis_token"] and out["effective_loss_scale"] == 1.0


def test_vl_norm_user_reduction(batch):
    out = apply_to_batch(batch, [], vl_norm)
    m = batch["mask"]
    lengths = m.sum(axis=1)
    inv = 1 / lengths
    expect = m * (inv / inv.sum())[:, None] / lengths[:, None]
    np.testing.assert_allclose(out["weights"], expect)
    assert out["weights"].sum() == pytest.approx(1.0)
    assert sum(r["responses"] for r in out["by_length"]) == m.shape[0]
    with pytest.raises(BadInput, match="reduction function"):
        apply_to_batch(batch, [], lambda mask, lengths, gid: np.full(3, math.nan))


def test_unknown_correction_is_refused(batch):
    with pytest.raises(BadInput, match="cannot be applied"):
        apply_to_batch(
            batch, [{"correction": "outlier_sequence"}], Reduction("token_mean")
        )


def _dump(b, seed=0):
    rng = np.random.default_rng(seed)
    logp_train = np.log(b["p"])
    logp_roll = np.log(b["q"])
    pad = b["mask"] == 0
    # padding positions hold garbage in real dumps: the converter must ignore it
    logp_train[pad] = rng.normal(size=pad.sum()) + 5
    return logp_train, logp_roll


def test_verl_and_trl_dumps_convert_to_the_same_batch(batch):
    from theorycheck.losses import batch_from_dump

    train, roll = _dump(batch)
    uid = np.array([f"prompt-{g}" for g in batch["group_id"]])
    verl = batch_from_dump(
        {
            "old_log_probs": train,
            "rollout_log_probs": roll,
            "advantages": batch["adv"],
            "response_mask": batch["mask"],
            "uid": uid,
        },
        "verl",
    )
    trl = batch_from_dump(
        {
            "old_per_token_logps": train,
            "sampling_per_token_logps": roll,
            "advantages": batch["adv"][:, 0],
            "completion_mask": batch["mask"],
        },
        "trl",
        num_generations=4,
    )
    for got in (verl, trl):
        for k in ("p", "q", "adv", "mask"):
            np.testing.assert_allclose(got[k], batch[k], rtol=1e-12)
        np.testing.assert_array_equal(got["group_id"], batch["group_id"])
    with pytest.raises(BadInput, match="num_generations"):
        batch_from_dump(
            {"old_per_token_logps": train, "sampling_per_token_logps": roll,
             "advantages": batch["adv"][:, 0], "completion_mask": batch["mask"]},
            "trl", num_generations=5,
        )  # fmt: skip
    bad = roll.copy()
    bad[0, 0] = np.nan
    with pytest.raises(BadInput, match=r"log-prob \[0, 0\]"):
        batch_from_dump(
            {"old_log_probs": train, "rollout_log_probs": bad, "uid": uid,
             "advantages": batch["adv"], "response_mask": batch["mask"]},
            "verl",
        )  # fmt: skip

"""The batch audit: gated shares against a hand-computed example and an independent
numpy route, zero-advantage groups, clamp activations, and BATCH validation."""

from __future__ import annotations

import numpy as np
import pytest

from theorycheck._errors import BadInput
from theorycheck.losses._audit import (
    audit_batch,
    check_rules,
    synthetic_batch,
    validate_batch,
)

HAND = {
    # response 0 (2 tokens, A = +1): r = 1.5 (PPO clips), r = 1.0
    # response 1 (4 tokens, A = -1): r = 0.5 (clipped), 1, 1, 1
    # response 2 (1 token, A = 0):   zero-advantage group
    "p": np.array([[0.6, 0.5, 1, 1], [0.25, 0.5, 0.5, 0.5], [0.5, 1, 1, 1]]),
    "q": np.array([[0.4, 0.5, 1, 1], [0.5, 0.5, 0.5, 0.5], [0.5, 1, 1, 1]]),
    "adv": np.array([1.0, -1.0, 0.0]),
    "mask": np.array([[1, 1, 0, 0], [1, 1, 1, 1], [1, 0, 0, 0]], dtype=np.float64),
    "group_id": np.array([0, 0, 1]),
}


def _rows(report):
    return {r["rule"]: r for r in report["rules"]}


def test_audit_batch_hand_example():
    report = audit_batch(validate_batch(HAND), ["ppo", "cispo", "glm5"])
    rows = _rows(report)
    # weights: 1/2 (response 0), 1/4 (response 1); nonzero-adv total = 2
    assert rows["ppo"]["gated_share"] == pytest.approx((1 / 2 + 1 / 4) / 2)
    assert rows["ppo"]["gated_tokens"] == 2
    assert rows["cispo"]["gated_share"] == 0.0
    # r = 0.5 sits exactly on GLM-5's lower bound: the open window rejects it.
    assert rows["glm5"]["gated_share"] == pytest.approx((1 / 4) / 2)
    assert rows["glm5"]["gated_tokens"] == 1
    assert report["zero_adv_group_share"] == 0.5
    assert report["nonzero_adv_tokens"] == 6


def test_audit_batch_params_override_the_window():
    rows = _rows(
        audit_batch(
            validate_batch(HAND),
            ["glm5"],
            {"glm5": {"low": 0.4, "high": 5.0, "log_ratio_clamp": 20.0}},
        )
    )
    assert rows["glm5"]["gated_tokens"] == 0


def test_audit_batch_matches_numpy_reference():
    batch = validate_batch(synthetic_batch(3, prompts=8, responses=4, length=24))
    m, a = batch["mask"], batch["adv"]
    r = batch["p"] / batch["q"]
    w = m / m.sum(1, keepdims=True)
    nz = (a != 0) & (m == 1)
    reference = {
        "ppo": ((a > 0) & (r > 1.2)) | ((a < 0) & (r < 0.8)),
        "dapo": ((a > 0) & (r > 1.28)) | ((a < 0) & (r < 0.8)),
        "dppo_binary_tv": (
            ((a > 0) & (batch["p"] - batch["q"] > 0.15))
            | ((a < 0) & (batch["q"] - batch["p"] > 0.15))
        ),
        "glm5": ~((r > 0.5) & (r < 5.0)),
    }
    rows = _rows(audit_batch(batch, list(reference)))
    for name, gated in reference.items():
        expected = np.sum(w * (gated & nz)) / np.sum(w * nz)
        assert rows[name]["gated_share"] == pytest.approx(expected, rel=1e-12), name
        assert rows[name]["gated_share"] > 0.0, name  # the check can fail


def test_audit_batch_gspo_gates_whole_responses():
    batch = validate_batch(synthetic_batch(1, prompts=4, responses=4, length=16))
    row = _rows(audit_batch(batch, ["gspo"]))["gspo"]
    m, a = batch["mask"], batch["adv"]
    log_r = np.log(batch["p"] / batch["q"])
    s = np.exp((m * log_r).sum(1) / m.sum(1))
    gated = ((a[:, 0] > 0) & (s > 1 + 4e-4)) | ((a[:, 0] < 0) & (s < 1 - 3e-4))
    nz = a[:, 0] != 0
    assert row["gated_share"] == pytest.approx((gated & nz).sum() / nz.sum(), rel=1e-12)


def test_audit_batch_counts_clamp_activations():
    batch = dict(HAND)
    batch["q"] = HAND["q"].copy()
    batch["q"][1, 1] = 0.5 * np.exp(-21.0)  # log r = 21 > 20
    rows = _rows(audit_batch(validate_batch(batch), ["ppo", "sapo"]))
    assert rows["ppo"]["clamp_tokens"] == 1 == rows["sapo"]["clamp_tokens"]


@pytest.mark.parametrize(
    "field,value,needle",
    [
        (
            "p",
            np.array([[0.0, 0.5, 1, 1], [0.25, 0.5, 0.5, 0.5], [0.5, 1, 1, 1]]),
            "p[0, 0] = 0.0",
        ),
        (
            "q",
            np.array([[1.5, 0.5, 1, 1], [0.25, 0.5, 0.5, 0.5], [0.5, 1, 1, 1]]),
            "q[0, 0] = 1.5",
        ),
        ("adv", np.array([1.0, 2.0]), "adv has shape (2,)"),
        ("group_id", np.array([0, 1]), "group_id has shape (2,)"),
        (
            "mask",
            np.array([[1, 2, 0, 0], [1, 1, 1, 1], [1, 0, 0, 0]]),
            "mask holds 2.0",
        ),
    ],
)
def test_validate_batch_names_the_bad_value(field, value, needle):
    batch = {**HAND, field: value}
    with pytest.raises(BadInput) as err:
        validate_batch(batch)
    assert needle in str(err.value)


def test_validate_batch_ignores_padding_values():
    batch = {**HAND, "p": np.where(HAND["mask"] == 1, HAND["p"], 0.0)}
    assert validate_batch(batch)["p"].min() > 0


def test_check_rules_rejects_distribution_rules():
    with pytest.raises(BadInput, match="dppo_topk_kl"):
        check_rules(["ppo", "dppo_topk_kl"])
    with pytest.raises(BadInput, match="valid:"):
        check_rules(["nope"])


def test_audit_batch_without_signal_reports_no_share():
    batch = {**HAND, "adv": np.zeros(3)}
    report = audit_batch(validate_batch(batch), ["ppo"])
    assert report["rules"][0]["gated_share"] is None
    assert report["zero_adv_group_share"] == 1.0


def test_audit_corrections_count_truncation_and_rejection():
    from theorycheck.losses import audit_corrections, validate_batch

    mask = np.ones((2, 100))
    q = np.full((2, 100), 0.5)
    p = q * np.exp(0.012)  # 0.012 per token: the product ratio is e^1.2
    batch = validate_batch(
        {"p": p, "q": q, "adv": np.ones(2), "mask": mask, "group_id": np.zeros(2)}
    )
    out = audit_corrections(batch, ["tis_sequence", "geo_mask_sequence", "tis_token"])
    rows = {c["correction"]: c for c in out["corrections"]}
    assert out["sequence_ratio"]["product_ratio"]["max"] == pytest.approx(np.exp(1.2))
    assert rows["tis_sequence"]["truncated_tokens"] == 0  # e^1.2 < cap 5
    assert rows["geo_mask_sequence"]["rejected_sequence_share"] == 1.0  # 1.012 > 1.01
    assert rows["tis_token"]["truncated_token_share"] == 0.0

"""Framework presets and the conventions report: every preset refers to a registered
rule with valid parameters, and the known same-name discrepancies show up as numbers."""

from __future__ import annotations

import numpy as np
import pytest

from theorycheck.losses import LOSSES, PRESETS
from theorycheck.losses._conventions import conventions_report


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_presets_use_registered_rules_and_keys(name):
    preset = PRESETS[name]
    spec = LOSSES[preset.rule]
    assert set(preset.params) <= set(spec.defaults)


def test_presets_verl_dual_clip_is_always_on_and_others_off():
    assert PRESETS["verl"].rule == "dual_clip" == PRESETS["verl_legacy"].rule
    assert PRESETS["verl_dr_grpo"].rule == "dual_clip"
    assert all(PRESETS[n].rule == "ppo" for n in ("skyrl", "miles", "trl_dapo"))


@pytest.fixture(scope="module")
def report():
    # 2 prompts x 2 responses, one response empty; micro-batches of 2 rows.
    return conventions_report((2, 2, 8), [2, 8, 4, 0], micro_batch_size=2)


def _variant(item, label):
    return next(v for v in item["variants"] if v["framework"] == label)


def _verl_agg_loss_by_hand(mask, mode, global_batch_size=None, scale=None):
    """verl's agg_loss (verl-project/verl 1dda039) written out in numpy for a loss
    matrix of ones, token by token: the per-token weight is d loss / d loss_mat."""
    lengths = mask.sum(axis=1)
    seq_mask = (lengths > 0).astype(float)
    g = seq_mask.sum() if global_batch_size is None else global_batch_size
    if mode == "seq-mean-token-sum-norm":
        t = mask.shape[1] if scale is None else scale
        return mask * (seq_mask / g / t)[:, None]
    if mode == "seq-mean-token-mean":
        return mask * (seq_mask / (lengths + 1e-8) / g)[:, None]
    raise AssertionError(mode)


def test_presets_name_their_version_and_anchor():
    for preset in PRESETS.values():
        assert preset.version and preset.anchor, preset.name
    assert "1dda039" in PRESETS["verl_dr_grpo"].version
    assert "removed" in PRESETS["verl_legacy"].version
    assert "default" not in PRESETS["verl_legacy"].framework
    assert "bypass_mode" in PRESETS["verl_dppo_tv"].anchor
    assert "rollout" in PRESETS["stable_rl_dppo"].anchor
    assert "steps_per_generation" in PRESETS["trl_dapo"].notes


def test_verl_dr_grpo_is_one_over_b_t_on_the_readme_batch(report):
    # README batch: B*G = 4 rows (one empty), T = 8. The new engine passes
    # global_batch_size = ppo_mini_batch_size * rollout.n = 4 (every row).
    weights = {p["name"]: p["per_token_weight"] for p in report["presets"]}
    assert weights["verl_dr_grpo"][:3] == pytest.approx([0.03125] * 3, rel=1e-12)
    mask = (np.arange(8)[None] < np.array([2, 8, 4, 0])[:, None]).astype(float)
    by_hand = _verl_agg_loss_by_hand(mask, "seq-mean-token-sum-norm", 4)
    assert by_hand[mask > 0] == pytest.approx(0.03125)


def test_verl_seq_mean_counts_empty_rows_and_adds_1e_8(report):
    weights = {p["name"]: p["per_token_weight"] for p in report["presets"]}
    mask = (np.arange(8)[None] < np.array([2, 8, 4, 0])[:, None]).astype(float)
    by_hand = _verl_agg_loss_by_hand(mask, "seq-mean-token-mean", 4)
    per_token = by_hand.sum(axis=1)[:3] / np.array([2, 8, 4])
    assert weights["verl_seq_mean"][:3] == pytest.approx(per_token, rel=1e-15)
    # the 1e-8 is visible: 1/(4 (2 + 1e-8)) is not 1/8
    assert weights["verl_seq_mean"][0] != 1 / 8
    assert weights["verl_seq_mean"][0] == pytest.approx(1 / 8, rel=1e-8)


def test_conventions_token_mean_scope_differs(report):
    item = next(i for i in report["same_name"] if i["name"] == "token-mean")
    assert item["differ"]
    # global token mean: 1/14 everywhere; legacy: mean of 1/10 and 1/4 micro means
    assert _variant(item, "verl new-engine token-mean")["per_token_weight"][:3] == (
        pytest.approx([1 / 14] * 3)
    )
    legacy = _variant(item, "verl legacy worker token-mean (to 2026-04-20)")
    assert legacy["per_token_weight"][:3] == pytest.approx([1 / 20, 1 / 20, 1 / 8])


def test_conventions_dr_grpo_history(report):
    item = next(
        i for i in report["same_name"] if i["name"].startswith("seq-mean-token-sum")
    )
    old_legacy = _variant(item, "verl before 2026-02-26, legacy worker")
    old_engine = _variant(item, "verl before 2026-02-26, new engine")
    new_legacy = _variant(item, "verl 2026-02-26 to 2026-04-20, legacy worker")
    now = _variant(item, "verl since 2026-02-26, new engine")
    skyrl = _variant(item, "SkyRL seq_mean_token_sum_norm")
    # before February: T only (1/8), averaged over 2 micro-batches in the legacy
    # worker (1/16); the factor of 4 to SkyRL is that history.
    assert old_engine["per_token_weight"][:3] == pytest.approx([1 / 8] * 3)
    assert old_legacy["per_token_weight"][:3] == pytest.approx([1 / 16] * 3)
    # now: 1/(B T) with every row counted, as SkyRL
    assert now["per_token_weight"] == pytest.approx(skyrl["per_token_weight"])
    assert now["per_token_weight"][:3] == pytest.approx([1 / 32] * 3)
    # legacy worker after the fix: local non-empty count (2, then 1), / 2 micro
    assert new_legacy["per_token_weight"][:3] == pytest.approx([1 / 32, 1 / 32, 1 / 16])


def test_conventions_empty_rows_change_seq_mean(report):
    item = next(i for i in report["same_name"] if i["name"] == "seq-mean-token-mean")
    label = "verl legacy worker seq-mean-token-mean (to 2026-04-20)"
    verl = _variant(item, label)["per_token_weight"]
    trl = _variant(item, "TRL grpo")["per_token_weight"]
    # micro-batch 2 = (4 tokens, empty): legacy verl counts 1 sequence, TRL counts
    # 2; each micro-batch loss is then divided by the 2 micro-batches.
    assert verl[2] == pytest.approx(1 / 8) and trl[2] == pytest.approx(1 / 16)
    now = _variant(item, "verl new-engine seq-mean-token-mean")["per_token_weight"]
    skyrl = _variant(item, "SkyRL sequence_mean")["per_token_weight"]
    assert now == pytest.approx(skyrl, rel=1e-7)


def test_conventions_rule_variants_differ_at_survey_points(report):
    rules = {r["topic"]: r for r in report["rules"]}
    dual = rules["ppo dual-clip"]
    assert dual["differ"]
    assert dual["variants"][0]["coefficient"][0] == 0.0  # verl: r = 4 floored
    assert dual["variants"][1]["coefficient"][0] == pytest.approx(-4.0)
    cispo = rules["cispo window"]
    trl_unset = _variant(cispo, "TRL cispo, epsilon_high unset")["coefficient"]
    assert trl_unset[0] == pytest.approx(0.2)  # every ratio capped at 0.2
    dppo = rules["dppo threshold and cap"]
    assert _variant(dppo, "survey (delta 0.15, uncapped)")["gated"][0]
    assert not _variant(dppo, "SkyRL dppo (delta 0.2, uncapped)")["gated"][0]


def test_conventions_dppo_caps_as_shipped(report):
    # (p, q) = (0.74, 0.90): |p - q| = 0.16 gates at delta 0.15, not at 0.2.
    # r = 5 and r = 9000: cap 3 gives 3; the shipped verl example (1e4) and the
    # cap-10 variant leave r = 5 alone; only 10 caps r = 9000.
    dppo = {r["topic"]: r for r in report["rules"]}["dppo threshold and cap"]
    shipped = _variant(dppo, "Stable-RL as shipped (clip_ratio 0.2, clip_ratio_c 3)")
    assert (shipped["params"]["delta"], shipped["params"]["cap"]) == (0.2, 3.0)
    assert shipped["coefficient"] == pytest.approx([-0.74 / 0.90, 3.0, 3.0])
    assert shipped["gated"] == [False, False, False]
    example = _variant(dppo, "verl dppo_tv example (delta 0.15, clip_ratio_c 1e4)")
    assert example["coefficient"] == pytest.approx([0.0, 5.0, 9000.0], rel=1e-12)
    assert example["gated"] == [True, False, False]
    ten = next(v for v in dppo["variants"] if v["framework"].startswith("delta 0.15"))
    assert "no shipped script" in ten["framework"]
    assert ten["coefficient"] == pytest.approx([0.0, 5.0, 10.0], rel=1e-12)


def test_conventions_weights_sum_as_documented(report):
    totals = {p["name"]: p["total_weight"] for p in report["presets"]}
    assert totals["verl"] == pytest.approx(1.0)
    assert totals["skyrl"] == pytest.approx(1.0)
    assert totals["miles"] == pytest.approx(3 / 4)  # the empty row still counts
    assert totals["verl_dr_grpo"] == pytest.approx(14 / 32)

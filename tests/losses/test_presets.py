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
    assert all(PRESETS[n].rule == "ppo" for n in ("skyrl", "miles", "trl_dapo"))


@pytest.fixture(scope="module")
def report():
    # 2 prompts x 2 responses, one response empty; micro-batches of 2 rows.
    return conventions_report((2, 2, 8), [2, 8, 4, 0], micro_batch_size=2)


def _variant(item, label):
    return next(v for v in item["variants"] if v["framework"] == label)


def test_conventions_token_mean_scope_differs(report):
    item = next(i for i in report["same_name"] if i["name"] == "token-mean")
    assert item["differ"]
    # global token mean: 1/14 everywhere; legacy: mean of 1/10 and 1/4 micro means
    assert _variant(item, "verl new-engine token-mean")["per_token_weight"][:3] == (
        pytest.approx([1 / 14] * 3)
    )
    assert _variant(item, "verl legacy token-mean")["per_token_weight"][:3] == (
        pytest.approx([1 / 20, 1 / 20, 1 / 8])
    )


def test_conventions_dr_grpo_scale_differs_by_sequences(report):
    item = next(
        i for i in report["same_name"] if i["name"].startswith("seq-mean-token-sum")
    )
    verl = np.array(_variant(item, "verl seq-mean-token-sum-norm")["per_token_weight"])
    skyrl = _variant(item, "SkyRL seq_mean_token_sum_norm")["per_token_weight"]
    skyrl = np.array(skyrl)
    # verl does not divide by the number of sequences in the micro-batch (2 here)
    assert verl[:3] == pytest.approx(2 * skyrl[:3])


def test_conventions_empty_rows_change_seq_mean(report):
    item = next(i for i in report["same_name"] if i["name"] == "seq-mean-token-mean")
    verl = _variant(item, "verl seq-mean-token-mean")["per_token_weight"]
    trl = _variant(item, "TRL grpo")["per_token_weight"]
    # micro-batch 2 = (4 tokens, empty): verl counts 1 sequence, TRL counts 2;
    # each micro-batch loss is then divided by the 2 micro-batches.
    assert verl[2] == pytest.approx(1 / 8) and trl[2] == pytest.approx(1 / 16)


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


def test_conventions_stable_rl_follows_its_shipped_config(report):
    # Stable-RL's actor config: delta from clip_ratio (0.2), cap clip_ratio_c = 3.
    # At (p, q) = (0.74, 0.90) |p - q| = 0.16 < 0.2 keeps the token; at r = 5 the
    # cap gives 3. The paper's values (delta 0.15, the code's fallback cap 10) stay
    # a separate variant, and they gate the first point and leave r = 5 uncapped.
    dppo = {r["topic"]: r for r in report["rules"]}["dppo threshold and cap"]
    shipped = _variant(dppo, "Stable-RL as shipped (clip_ratio 0.2, clip_ratio_c 3)")
    assert (shipped["params"]["delta"], shipped["params"]["cap"]) == (0.2, 3.0)
    assert shipped["coefficient"] == pytest.approx([-0.74 / 0.90, 3.0], rel=1e-12)
    assert shipped["gated"] == [False, False]
    paper = _variant(dppo, "DPPO paper values (delta 0.15, cap 10 = code fallback)")
    assert paper["coefficient"] == pytest.approx([0.0, 5.0], rel=1e-12)
    assert paper["gated"] == [True, False]


def test_conventions_verl_new_engine_dr_grpo_is_one_over_t(report):
    # verl's new engine: 1/T per token (T = 8), no division over micro-batches or
    # sequences; the legacy worker averages its 2 micro-batches.
    item = next(
        i for i in report["same_name"] if i["name"].startswith("seq-mean-token-sum")
    )
    new = _variant(item, "verl new-engine seq-mean-token-sum-norm")
    legacy = _variant(item, "verl seq-mean-token-sum-norm")
    assert new["per_token_weight"][:3] == pytest.approx([1 / 8] * 3)
    assert legacy["per_token_weight"][:3] == pytest.approx([1 / 16] * 3)


def test_conventions_weights_sum_as_documented(report):
    totals = {p["name"]: p["total_weight"] for p in report["presets"]}
    assert totals["verl"] == pytest.approx(1.0)
    assert totals["skyrl"] == pytest.approx(1.0)
    assert totals["miles"] == pytest.approx(3 / 4)  # the empty row still counts

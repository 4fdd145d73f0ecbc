"""The config resolver: what a verl or TRL config computes, and its traps."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("omegaconf")
pytest.importorskip("yaml")

from theorycheck._errors import BadInput  # noqa: E402
from theorycheck.losses import LOSSES, resolve_config  # noqa: E402

CONFIGS = "examples/configs/"


def test_verl_shipped_dppo_example():
    out = resolve_config(
        CONFIGS + "verl_dppo_tv.yaml", batch_shape=(2, 2, 8), lengths=[2, 8, 4, 0]
    )
    assert out["rule"] == "dppo_capped"
    assert (out["delta"], out["cap"]) == (0.15, 10000.0)
    assert out["reduction"] == "seq_mean_token_sum_norm"
    assert out["global_batch_size"] == 32 * 16
    assert "bypass_mode" not in " ".join(out["traps"])
    assert set(out["params"]) <= set(LOSSES[out["rule"]].defaults)
    # the README batch: 1/(B T) per token
    assert out["per_token_weight"] == pytest.approx([1 / 32] * 3 + [0.0])


def test_verl_bypass_mode_replaces_the_dppo_loss():
    out = resolve_config(CONFIGS + "verl_dppo_bypass.yaml")
    assert out["loss_mode"] == "bypass_mode" and out["rule"] == "dual_clip"
    assert out["params"]["eps_low"] == 0.15  # delta read as PPO's epsilon
    assert out["params"]["kappa"] == 10000.0
    assert "rollout" in out["anchor"]
    assert any("replaces loss_mode 'dppo_tv'" in t for t in out["traps"])


def test_verl_overrides_as_on_a_command_line():
    out = resolve_config(
        CONFIGS + "verl_dppo_bypass.yaml",
        overrides=["algorithm.rollout_correction.bypass_mode=false"],
    )
    assert out["rule"] == "dppo_capped" and out["anchor"].startswith("old_log_prob")
    assert any("divergence threshold" in t for t in out["traps"])
    assert any("weight cap" in t for t in out["traps"])


def test_verl_clip_ratio_alone_and_rejection_traps():
    out = resolve_config(CONFIGS + "verl_dr_grpo.yaml")
    traps = " ".join(out["traps"])
    assert "clip_ratio alone has no effect" in traps
    assert "#4852" in traps and "inverse" in traps
    assert list(out["not_interpreted"]) == ["trainer.total_epochs"]
    assert "algorithm.adv_estimator" in out["read"]


def test_verl_versions_differ_on_dr_grpo():
    now = resolve_config(
        CONFIGS + "verl_dr_grpo.yaml", batch_shape=(2, 2, 8), lengths=[2, 8, 4, 0]
    )
    old = resolve_config(
        CONFIGS + "verl_dr_grpo.yaml",
        version="verl@b178a3c",
        batch_shape=(2, 2, 8),
        lengths=[2, 8, 4, 0],
        micro_batch_size=2,
    )
    assert now["per_token_weight"][:3] == pytest.approx([1 / 32] * 3)
    assert old["per_token_weight"][:3] == pytest.approx([1 / 16] * 3)
    with pytest.raises(BadInput, match="not in verl@b178a3c"):
        resolve_config(CONFIGS + "verl_dppo_tv.yaml", version="verl@b178a3c")


def test_trl_cispo_traps():
    out = resolve_config(CONFIGS + "trl_cispo.yaml")
    assert out["framework"] == "trl" and out["rule"] == "cispo"
    assert out["params"] == {"low": 0.0, "high": 0.2}
    traps = " ".join(out["traps"])
    assert "falls back to epsilon" in traps
    assert "steps_per_generation (4) != gradient_accumulation_steps (2)" in traps
    assert list(out["not_interpreted"]) == ["learning_rate", "output_dir"]
    assert out["unknown_keys"] == []


def test_trl_json_unknown_key_is_reported():
    out = resolve_config(CONFIGS + "trl_dr_grpo.json")
    assert out["unknown_keys"] == ["num_generatons"]
    assert out["params"]["eps_high"] == 0.28
    assert out["reduction"] == "seq_mean_token_sum_norm"


def test_trl_delta_becomes_dual_clip(tmp_path):
    f = tmp_path / "c.json"
    f.write_text(json.dumps({"loss_type": "grpo", "delta": 4.0}))
    out = resolve_config(f)
    assert out["rule"] == "dual_clip" and out["params"]["kappa"] == 4.0


@pytest.mark.parametrize(
    "text,match",
    [
        ("a: [1, 2\n", "not valid YAML"),
        ("- 1\n- 2\n", "not a mapping"),
        ("foo: 1\n", "neither a verl config"),
        ("loss_type: nope\n", "unknown to trl"),
    ],
)
def test_bad_configs_are_one_line_errors(tmp_path, text, match):
    f = tmp_path / "c.yaml"
    f.write_text(text)
    with pytest.raises(BadInput, match=match):
        resolve_config(f)

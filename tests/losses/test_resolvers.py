"""The four trainer resolvers on configs written here: verl's bypass, IcePop and
multi-option rejection forms, version checks, and the SkyRL and Miles traps."""

from __future__ import annotations

import pytest

pytest.importorskip("omegaconf")
pytest.importorskip("yaml")

from theorycheck._errors import BadInput  # noqa: E402
from theorycheck.losses import resolve_config  # noqa: E402

RC = "algorithm.rollout_correction."


def _verl(tmp_path, *overrides, version=None, text="algorithm:\n  gamma: 1.0\n"):
    f = tmp_path / "verl.yaml"
    f.write_text(text)
    return resolve_config(f, overrides=list(overrides), framework=version or "verl")


def test_bypass_reinforce_is_reinforce_with_normalised_sequence_is(tmp_path):
    # examples/rollout_correction/run_qwen2_5_7b_fsdp.sh, as its overrides
    out = _verl(
        tmp_path,
        "algorithm.adv_estimator=rloo",
        RC + "rollout_is=sequence",
        RC + "rollout_is_threshold=2.0",
        RC + "rollout_is_batch_normalize=true",
        RC + "rollout_rs=null",
        RC + "rollout_rs_threshold=null",
        RC + "bypass_mode=true",
        RC + "loss_type=reinforce",
    )
    assert out["rule"] == "pg" and out["loss_type"] == "reinforce"
    assert "rollout" in out["anchor"]
    (c,) = out["corrections"]
    assert c["correction"] == "tis_sequence" and c["params"] == {"cap": 2.0}
    assert c["applied"] and c["batch_normalize"]
    text = " ".join(out["traps"])
    assert "dual-clip" not in text and "REINFORCE" in text
    assert out["advantage"]["estimator"] == "rloo"
    assert out["not_interpreted"] == {}


def test_bypass_ppo_clip_is_dual_clip_weights_not_applied(tmp_path):
    out = _verl(tmp_path, RC + "bypass_mode=true", RC + "rollout_is=token")
    assert out["rule"] == "dual_clip" and out["loss_type"] == "ppo_clip"
    assert not out["corrections"][0]["applied"]
    assert "dual-clip PPO against the rollout" in " ".join(out["traps"])


def test_icepop_lower_upper(tmp_path):
    out = _verl(tmp_path, RC + "rollout_is=token", RC + "rollout_is_threshold=0.5_5.0")
    (c,) = out["corrections"]
    assert c["correction"] == "icepop" and c["params"] == {"low": 0.5, "high": 5.0}
    assert out["fails_at_startup"] == []
    old = _verl(
        tmp_path,
        RC + "rollout_is=sequence",
        RC + "rollout_is_threshold=0.5_5.0",
        version="verl@v0.7.1",
    )
    assert old["corrections"][0]["correction"] == "mis_sequence"
    assert "IcePop" in old["fails_at_startup"][0]


def test_multi_option_rejection_per_option(tmp_path):
    out = _verl(
        tmp_path,
        RC + "rollout_rs=token_k1,seq_max_k2",
        RC + "rollout_rs_threshold='0.6_1.6,2.5'",
    )
    a, b = out["corrections"]
    assert a["params"] == {
        "estimator": "k1",
        "level": "token",
        "upper": 1.6,
        "lower": 0.6,
    }
    assert b["params"] == {"estimator": "k2", "level": "seq_max", "upper": 2.5}
    shared = _verl(
        tmp_path,
        RC + "rollout_rs=seq_mean_k3,seq_max_k3",
        RC + "rollout_rs_threshold=0.01",
    )
    assert [c["params"]["upper"] for c in shared["corrections"]] == [0.01, 0.01]
    with pytest.raises(BadInput, match="2 thresholds for 3"):
        _verl(tmp_path, RC + "rollout_rs=token_k2,token_k3,seq_sum_k2",
              RC + "rollout_rs_threshold='1,2'")  # fmt: skip


@pytest.mark.parametrize(
    "override,key",
    [
        ("actor_rollout_ref.actor.clip_ratio_low=.nan", "clip_ratio_low"),
        ("actor_rollout_ref.actor.clip_ratio_c=.inf", "clip_ratio_c"),
        ("actor_rollout_ref.actor.clip_ratio_high=abc", "clip_ratio_high"),
    ],
)
def test_nan_inf_and_text_exit_naming_the_key(tmp_path, override, key):
    with pytest.raises(BadInput, match=key):
        _verl(tmp_path, override)


def test_bad_threshold_strings_name_the_key(tmp_path):
    with pytest.raises(BadInput, match="rollout_rs_threshold.*0.6_abc"):
        _verl(tmp_path, RC + "rollout_rs=token_k1", RC + "rollout_rs_threshold=0.6_abc")
    with pytest.raises(BadInput, match="rollout_is_threshold"):
        _verl(tmp_path, RC + "rollout_is=token", RC + "rollout_is_threshold=nan")
    with pytest.raises(BadInput, match="clip_ratio_low"):
        _verl(tmp_path, text="actor_rollout_ref:\n  actor:\n    clip_ratio_low: .nan\n")


def test_cispo_shipped_window_has_no_lower_clip(tmp_path):
    out = _verl(
        tmp_path,
        "actor_rollout_ref.actor.policy_loss.loss_mode=cispo",
        "actor_rollout_ref.actor.clip_ratio_low=10",
        "actor_rollout_ref.actor.clip_ratio_high=0.2",
    )
    assert out["params"]["low"] == 0.0 and out["params"]["high"] == pytest.approx(1.2)
    assert "no lower clip" in " ".join(out["traps"])


def test_removed_options_fail_at_startup_on_new_verl_only(tmp_path):
    dead = (
        RC + "rollout_rs=geometric",
        RC + "rollout_rs_threshold=1.001",
        RC + "rollout_rs_threshold_lower=0.999",
        RC + "rollout_token_veto_threshold=1e-4",
    )
    now = _verl(tmp_path, *dead)
    fails = " ".join(now["fails_at_startup"])
    assert "'geometric'" in fails and "rollout_rs_threshold_lower" in fails
    assert "rollout_token_veto_threshold" in fails
    assert any("fails at startup on verl 1dda039" in t for t in now["traps"])
    assert now["corrections"] == []
    old = _verl(tmp_path, *dead, version="verl@v0.7.0")
    assert old["fails_at_startup"] == []
    assert old["corrections"][0]["correction"] == "geo_mask_sequence"
    v061 = _verl(tmp_path, RC + "bypass_mode=true", version="verl@v0.6.1")
    assert "rollout" in v061["anchor"] and v061["rule"] == "dual_clip"
    assert old["corrections"][0]["params"] == {"low": 0.999, "high": 1.001}


def test_a_framework_named_against_the_keys_exits_2(tmp_path):
    with pytest.raises(BadInput, match="looks like a verl config"):
        _verl(tmp_path, version="trl")


def test_versions_by_tag_commit_and_unknown(tmp_path):
    assert _verl(tmp_path, version="verl@0.7.1")["version"] == "verl@v0.7.1"
    assert _verl(tmp_path, version="verl@bec9ef747")["version"] == "verl@v0.7.1"
    with pytest.raises(BadInput, match="unknown; known"):
        _verl(tmp_path, version="verl@deadbee")
    recipe = _verl(tmp_path, "actor_rollout_ref.actor.policy_loss.loss_mode=gvpo")
    assert recipe["rule"] is None and "verl-recipe gvpo" in recipe["traps"][0]


def test_verl_kl_cov_ratio_is_a_token_fraction(tmp_path):
    out = _verl(tmp_path, "actor_rollout_ref.actor.policy_loss.loss_mode=kl_cov")
    assert "top 0.02% of tokens" in " ".join(out["traps"])
    with pytest.raises(BadInput, match="kl_cov_ratio"):
        _verl(
            tmp_path,
            "actor_rollout_ref.actor.policy_loss.loss_mode=kl_cov",
            "actor_rollout_ref.actor.policy_loss.kl_cov_ratio=-1",
        )


def test_advantage_entropy_and_kl_are_read(tmp_path):
    out = _verl(
        tmp_path,
        "algorithm.adv_estimator=grpo",
        "algorithm.norm_adv_by_std_in_grpo=false",
        "actor_rollout_ref.actor.entropy_coeff=0.001",
        "actor_rollout_ref.actor.use_kl_loss=true",
        "actor_rollout_ref.actor.kl_loss_coef=0.01",
        "data.train_batch_size=8",
    )
    assert "Dr. GRPO" in out["advantage"]["text"]
    terms = " ".join(out["extra_terms"])
    assert "0.01 x low_var_kl" in terms and "0.001 x entropy" in terms
    assert out["not_interpreted"] == {
        "data.train_batch_size": "data loading and prompt lengths: not the loss"
    }


# --- SkyRL ---
A = "trainer.algorithm."


def _sky(tmp_path, *overrides):
    f = tmp_path / "skyrl.yaml"
    f.write_text("trainer:\n  algorithm:\n    advantage_estimator: grpo\n  epochs: 1\n")
    return resolve_config(f, overrides=list(overrides))


def test_skyrl_defaults_and_cispo_window(tmp_path):
    out = _sky(tmp_path, A + "policy_loss_type=cispo")
    assert out["framework"] == "skyrl" and out["rule"] == "cispo"
    assert out["params"]["low"] == 0.0 and out["params"]["high"] == 5.0
    assert "use_kl_loss defaults to true" in " ".join(out["extra_terms"])
    assert "trainer.epochs" in out["not_interpreted"]


def test_skyrl_cispo_rollout_anchor_with_tis_is_double_counted(tmp_path):
    out = _sky(
        tmp_path,
        A + "policy_loss_type=cispo",
        A + "cispo.cispo_anchor=rollout",
        A + "off_policy_correction.tis_ratio_type=token",
    )
    assert "double-counted" in " ".join(out["traps"])
    assert out["fails_at_startup"] and "rollout" in out["anchor"]
    ok = _sky(tmp_path, A + "policy_loss_type=cispo", A + "cispo.cispo_anchor=rollout")
    assert ok["fails_at_startup"] == []


def test_skyrl_token_masks_outliers_kl_cov_and_maxrl(tmp_path):
    out = _sky(
        tmp_path,
        A + "policy_loss_type=kl_cov",
        A + "advantage_estimator=maxrl",
        A + "off_policy_correction.token_mask_is_threshold_low=0.5",
        A + "off_policy_correction.outlier_token_is_threshold_high=100",
    )
    traps = " ".join(out["traps"])
    assert "only one is set" in traps and "rejects its whole sequence" in traps
    assert "1000x" in traps and "kl_cov_frac = 0.2" in traps
    assert "mean reward near 0" in traps
    assert [c["correction"] for c in out["corrections"]] == ["outlier_sequence"]
    both = _sky(
        tmp_path,
        A + "off_policy_correction.token_mask_is_threshold_low=0.5",
        A + "off_policy_correction.token_mask_is_threshold_high=2",
    )
    assert both["corrections"][0]["params"] == {"low": 0.5, "high": 2.0}


def test_skyrl_token_mean_legacy_is_per_micro_batch(tmp_path):
    f = tmp_path / "skyrl.yaml"
    f.write_text("trainer:\n  algorithm:\n    loss_reduction: token_mean_legacy\n")
    out = resolve_config(f, batch_shape=(1, 4, 4), lengths=[1, 4, 4, 4],
                         micro_batch_size=2)  # fmt: skip
    assert out["per_micro_batch"] and "micro-batch" in " ".join(out["traps"])
    # micro-batch 1 holds 5 tokens, micro-batch 2 holds 8: 1/(2*5) and 1/(2*8)
    assert out["per_token_weight"] == pytest.approx([0.1, 0.1, 1 / 16, 1 / 16])
    now = resolve_config(f, overrides=[A + "loss_reduction=token_mean"],
                         batch_shape=(1, 4, 4), lengths=[1, 4, 4, 4])  # fmt: skip
    assert now["per_token_weight"] == pytest.approx([1 / 13] * 4)


def test_skyrl_custom_loss_is_named_not_modelled(tmp_path):
    out = _sky(tmp_path, A + "policy_loss_type=reinforce")
    assert out["rule"] is None and "PolicyLossRegistry" in out["traps"][0]


def test_skyrl_unknown_algorithm_key_is_flagged(tmp_path):
    out = _sky(tmp_path, A + "kl_cov_ratio=0.0002")  # verl's name, not SkyRL's
    assert "stock entry point" in " ".join(out["traps"])
    assert "not a field" in out["not_interpreted"][A + "kl_cov_ratio"]


def test_skyrl_dr_grpo_needs_max_seq_len(tmp_path):
    out = _sky(tmp_path, A + "loss_reduction=seq_mean_token_sum_norm")
    assert "max_seq_len" in out["fails_at_startup"][0]
    with pytest.raises(BadInput, match="eps_clip_low"):
        _sky(tmp_path, A + "eps_clip_low=.nan")


# --- Miles ---
def _miles(tmp_path, text, *overrides):
    f = tmp_path / "run.sh"
    f.write_text(text)
    return resolve_config(f, overrides=list(overrides))


def test_miles_gspo_through_the_advantage_estimator(tmp_path):
    out = _miles(
        tmp_path,
        "python train.py \\\n  --advantage-estimator gspo \\\n  --eps-clip 3e-4 "
        "--eps-clip-high=4e-4  # comment\n  --lr 1e-6 --rollout-batch-size ${BS}\n",
    )
    assert out["framework"] == "miles" and out["rule"] == "gspo_token"
    assert out["params"] == {"eps_low": 3e-4, "eps_high": 4e-4}
    assert "advantage-estimator gspo" in " ".join(out["traps"])
    assert "shell variable" in out["not_interpreted"]["rollout-batch-size"]
    assert "optimizer" in out["not_interpreted"]["lr"]


def test_miles_tis_denominators_and_startup_checks(tmp_path):
    out = _miles(tmp_path, "--use-tis --tis-clip 1.5 --eps-clip-c 3\n")
    assert out["rule"] == "dual_clip" and out["params"]["kappa"] == 3.0
    assert out["corrections"][0]["params"] == {"cap": 1.5}
    assert "pre-rejection mask sums" in " ".join(out["traps"])
    bad = _miles(tmp_path, "--use-tis --use-rollout-logprobs\n")
    assert "use-rollout-logprobs" in bad["fails_at_startup"][0]
    over = _miles(
        tmp_path, "--advantage-estimator grpo\n", "--disable-grpo-std-normalization"
    )
    assert "Dr. GRPO" in over["advantage"]["text"]
    with pytest.raises(BadInput, match="eps-clip"):
        _miles(tmp_path, "--eps-clip nan\n")

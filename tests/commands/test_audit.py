"""``theorycheck audit``: JSON / markdown / plot output and bad input (exit 2, nothing
written)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from theorycheck.cli import main
from theorycheck.losses._audit import synthetic_batch


@pytest.fixture()
def batch_file(tmp_path):
    path = tmp_path / "batch.npz"
    np.savez(path, **synthetic_batch(0, prompts=4, responses=4, length=16))
    return path


def test_audit_json_and_plot(tmp_path, batch_file, capsys):
    plot = tmp_path / "audit.png"
    assert (
        main(
            [
                "audit",
                str(batch_file),
                "--rules",
                "ppo,dppo_binary_tv,glm5",
                "--plot",
                str(plot),
                "--json",
            ]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert [r["rule"] for r in out["rules"]] == ["ppo", "dppo_binary_tv", "glm5"]
    assert {
        "gated_share",
        "gated_tokens",
        "clamp_share",
        "clamp_tokens",
        "params",
    } <= set(out["rules"][0])
    assert 0 <= out["zero_adv_group_share"] <= 1
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_audit_json_batch_and_markdown(tmp_path, capsys):
    batch = synthetic_batch(2, prompts=2, responses=2, length=4)
    path = tmp_path / "batch.json"
    path.write_text(json.dumps({k: v.tolist() for k, v in batch.items()}))
    assert (
        main(["audit", str(path), "--rules", "ppo", "--set", "ppo.eps_high=0.5"]) == 0
    )
    out = capsys.readouterr().out
    assert "| ppo |" in out and "Zero-advantage groups" in out


def _bad(tmp_path, capsys, argv, needle):
    plot = tmp_path / "never.png"
    assert main(["audit", *argv, "--plot", str(plot), "--json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and needle in captured.err
    assert captured.err.count("\n") == 1
    assert not plot.exists() and list(tmp_path.glob("*.png")) == []


def test_audit_missing_field_exits_2(tmp_path, capsys):
    batch = synthetic_batch(0, prompts=2, responses=2, length=4)
    del batch["q"]
    path = tmp_path / "noq.npz"
    np.savez(path, **batch)
    _bad(tmp_path, capsys, [str(path)], "missing field(s) q")


def test_audit_probability_outside_unit_interval_exits_2(tmp_path, capsys):
    batch = synthetic_batch(0, prompts=2, responses=2, length=4)
    batch["p"][0, 0] = 1.5
    path = tmp_path / "badp.npz"
    np.savez(path, **batch)
    _bad(tmp_path, capsys, [str(path)], "p[0, 0] = 1.5")


def test_audit_length_mismatch_exits_2(tmp_path, capsys):
    batch = synthetic_batch(0, prompts=2, responses=2, length=4)
    batch["q"] = batch["q"][:, :3]
    path = tmp_path / "short.npz"
    np.savez(path, **batch)
    _bad(tmp_path, capsys, [str(path)], "q has shape (4, 3)")


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["--rules", "nope"], "'nope'"),
        (["--rules", "predictive_kl"], "whole distributions"),
        (["--rules", "ppo", "--set", "ppo.kappa=3"], "'kappa'"),
        (["--rules", "ppo", "--set", "glm5.low=1"], "RULE.KEY=VALUE"),
    ],
)
def test_audit_bad_rules_exit_2(tmp_path, batch_file, capsys, argv, needle):
    _bad(tmp_path, capsys, [str(batch_file), *argv], needle)


def test_audit_missing_file_exits_2(tmp_path, capsys):
    _bad(tmp_path, capsys, [str(tmp_path / "absent.npz")], "does not exist")


def test_audit_reports_corrections_and_refuses_unknown_ones(capsys):
    from theorycheck.cli import main

    assert main(["audit", "examples/batches/synthetic.json", "--rules", "ppo"]) == 0
    out = capsys.readouterr().out
    assert "| geo_mask_sequence |" in out and "Sequence ratios over" in out
    assert (
        main(["audit", "examples/batches/synthetic.json", "--corrections", "nope"]) == 2
    )
    err = capsys.readouterr().err
    assert "nope" in err and len(err.strip().splitlines()) == 1


def test_audit_applies_a_config_and_plots_weights(tmp_path, batch_file, capsys):
    cfg = tmp_path / "verl.yaml"
    cfg.write_text(
        "algorithm:\n  rollout_correction:\n    rollout_is: token\n"
        "    rollout_is_threshold: '0.8_1.25'\n"
        "    rollout_rs: token_k1,seq_max_k2\n"
        "    rollout_rs_threshold: '0.6_1.6,2.5'\n"
    )
    plot = tmp_path / "w.png"
    argv = ["audit", str(batch_file), "--rules", "ppo", "--corrections", ""]
    argv += ["--config", str(cfg), "--weights-plot", str(plot), "--json"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)["applied"]
    assert out["framework"] == "verl@1dda039" and out["reduction"] == "token-mean"
    assert [c["correction"] for c in out["corrections"]] == [
        "icepop",
        "reject_token_k1",
        "reject_seq_max_k2",
    ]
    assert 0 < out["rejected_token_share"] < 1 and plot.stat().st_size > 0
    assert main(argv[:-1]) == 0
    assert "effective loss scale" in capsys.readouterr().out


@pytest.mark.parametrize(
    "extra,match",
    [
        (["--apply", "tis_token:cap=nan"], "cap"),
        (["--apply", "tis_token:cap"], "KEY=VALUE"),
        (["--apply", "tis_token:bogus=1"], "bogus"),
        (["--reduction", "nope"], "--reduction"),
    ],
)
def test_audit_apply_bad_input_exits_2(batch_file, capsys, extra, match):
    assert main(["audit", str(batch_file), "--corrections", "", *extra]) == 2
    assert match in capsys.readouterr().err


def test_audit_reads_a_trl_dump(tmp_path, capsys):
    b = synthetic_batch(1, prompts=2, responses=4, length=8)
    path = tmp_path / "trl.npz"
    np.savez(
        path,
        old_per_token_logps=np.log(b["p"]),
        sampling_per_token_logps=np.log(b["q"]),
        advantages=b["adv"],
        completion_mask=b["mask"],
    )
    argv = ["audit", str(path), "--from", "trl", "--rules", "ppo", "--json"]
    assert main([*argv, "--num-generations", "4"]) == 0
    assert json.loads(capsys.readouterr().out)["groups"] == 2
    assert main([*argv, "--num-generations", "3"]) == 2
    assert "num_generations" in capsys.readouterr().err

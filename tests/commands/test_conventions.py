"""``theorycheck conventions``: markdown and JSON output, bad input."""

from __future__ import annotations

import json

import pytest

from theorycheck.cli import main


def test_conventions_json_has_every_preset(capsys):
    assert main(["conventions", "--batch-shape", "1,2,4", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {p["name"] for p in out["presets"]} >= {
        "verl",
        "verl_legacy",
        "skyrl",
        "trl_grpo",
        "trl_bnpo",
        "trl_dr_grpo",
        "trl_dapo",
        "miles",
    }
    assert out["lengths"] == [2, 4]
    assert all(len(p["per_token_weight"]) == 2 for p in out["presets"])
    assert out["findings"]


def test_conventions_markdown_flags_differences(capsys):
    assert (
        main(
            [
                "conventions",
                "--batch-shape",
                "2,2,8",
                "--lengths",
                "2,8,4,0",
                "--micro-batch-size",
                "2",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "| preset |" in out and "DIFFER" in out and "verl_legacy" in out


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["--batch-shape", "2,2"], "B,G,T"),
        (["--batch-shape", "2,x,4"], "'2,x,4'"),
        (["--batch-shape", "2,0,4"], "2,0,4"),
        (["--batch-shape", "1,2,4", "--lengths", "1,2,3"], "3 entries"),
        (["--batch-shape", "1,2,4", "--lengths", "1,9"], "entry 9"),
        (["--batch-shape", "1,2,4", "--micro-batch-size", "0"], "--micro-batch-size 0"),
        (["--batch-shape", "1,2,4", "--max-len", str(2**63)], "--max-len 92233"),
        (["--batch-shape", "1,2,4", "--micro-batch-size", str(2**63)], "batch-size 92"),
    ],
)
def test_conventions_bad_input_exits_2(capsys, argv, needle):
    assert main(["conventions", *argv, "--json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and needle in captured.err
    assert captured.err.count("\n") == 1


def test_conventions_config_markdown_and_bad_file(capsys, tmp_path):
    pytest.importorskip("omegaconf")
    args = ["conventions", "--config", "examples/configs/verl_dppo_bypass.yaml"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "| registry rule | dual_clip" in out and "replaces loss_mode" in out
    assert main(args + ["--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["rule"] == "dual_clip" and data["version"] == "verl@1dda039"
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: [1\n")
    assert main(["conventions", "--config", str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not valid YAML" in err[0]
    assert main(["conventions"]) == 2
    assert "--batch-shape" in capsys.readouterr().err

"""``theorycheck convexity``: the JSON contract, --at local checks, bad input (exit
2)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from theorycheck.cli import main

KEYS = {"loss", "verdict", "scope", "methods", "counterexample", "condition"}
EX = "examples/losses/"


def _json(capsys, *argv, code=0):
    assert main(["convexity", *argv, "--json"]) == code
    out = capsys.readouterr().out
    assert out.count("\n") == 1
    return json.loads(out)


def test_convexity_json_contract_for_a_proof(capsys):
    out = _json(capsys, "sft")
    assert set(out) == KEYS
    assert out["verdict"] == "convex" and out["counterexample"] is None
    assert all(set(m) == {"method", "status", "detail"} for m in out["methods"])


def test_convexity_json_counterexample_fields(capsys):
    out = _json(capsys, EX + "is_surrogate.py:loss", "--set", "adv=1")
    assert out["verdict"] == "not_convex"
    ce = out["counterexample"]
    assert {"logits", "sampled", "params", "direction", "curvature"} <= set(ce)
    assert ce["curvature"] < 0 and ce["params"]["adv"] == 1.0
    assert out["condition"].startswith("pi_k >= 1/2")


def test_convexity_at_local_check(capsys):
    out = _json(capsys, "sft", "--at", "0,1,2,3", "--sampled", "2")
    assert set(out) == {"loss", "min_eigenvalue", "psd"}
    assert out["psd"] is True


def test_convexity_at_reads_npy(capsys, tmp_path):
    path = tmp_path / "z.npy"
    z = np.zeros(600)
    z[7] = -3.0
    np.save(path, z)
    out = _json(
        capsys,
        EX + "is_surrogate.py:loss",
        "--set",
        "adv=1",
        "--at",
        str(path),
        "--sampled",
        "7",
    )
    assert out["psd"] is False and out["min_eigenvalue"] < 0


def test_convexity_human_output(capsys):
    assert main(["convexity", "pg", "--set", "adv=-1"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("pg: not_convex (all V >= 3)")
    assert "counterexample" in text


def test_convexity_report_writes_markdown_and_plot(capsys, tmp_path):
    assert (
        main(
            [
                "convexity",
                EX + "is_surrogate.py:loss",
                "--set",
                "adv=1",
                "--report",
                str(tmp_path),
            ]
        )
        == 0
    )
    md = (tmp_path / "convexity_is_surrogate_py_loss.md").read_text()
    assert "not_convex" in md and "![minimum eigenvalue]" in md
    assert (tmp_path / "convexity_is_surrogate_py_loss.png").stat().st_size > 1000


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["nope"], "unknown loss 'nope'"),
        (["sft", "--set", "adv"], "expected KEY=VALUE"),
        (["sft", "--set", "adv=abc"], "'abc' is not a number"),
        (["sft", "--at", "0,1"], "--at needs --sampled"),
        (["sft", "--at", "0,x", "--sampled", "0"], "not a comma-separated list"),
        (["sft", "--at", "0,1", "--sampled", "5"], "--sampled 5 is out of range"),
        (["sft", "--vocab", "1"], "every V must be >= 2"),
        (["sft", "--timeout", "0"], "--timeout 0.0"),
        ([EX + "bad_losses.py:vector"], "not a scalar"),
    ],
)
def test_convexity_bad_input_exits_2_with_one_line(capsys, argv, needle):
    assert main(["convexity", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and needle in err

"""``theorycheck convexity``: the JSON contract, --at local checks, bad input (exit
2)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from theorycheck.cli import main

KEYS = {
    "loss",
    "params",
    "verdict",
    "scope",
    "reason",
    "methods",
    "counterexample",
    "condition",
}
EX = "examples/losses/"


def _json(capsys, *argv, code=0):
    assert main(["convexity", *argv, "--json"]) == code
    out = capsys.readouterr().out
    assert out.count("\n") == 1
    return json.loads(out)


def test_convexity_json_contract_for_a_proof(capsys, monkeypatch):
    monkeypatch.setenv("THEORYCHECK_PROGRESS", "1")  # stage lines on stderr only
    assert main(["convexity", "sft", "--json"]) == 0
    captured = capsys.readouterr()
    assert captured.out.count("\n") == 1
    out = json.loads(captured.out)
    stages = captured.err.splitlines()
    assert any(line.startswith("theorycheck: structure") for line in stages)
    assert any(line.startswith("theorycheck: numeric search") for line in stages)
    assert set(out) == KEYS
    assert out["verdict"] == "convex" and out["counterexample"] is None
    assert out["reason"] is None and out["params"] == {}
    assert all(set(m) == {"method", "status", "detail"} for m in out["methods"])


def test_convexity_json_counterexample_fields(capsys):
    out = _json(capsys, EX + "is_surrogate.py:loss", "--set", "adv=1")
    assert out["verdict"] == "not_convex"
    ce = out["counterexample"]
    assert {"logits", "sampled", "params", "direction", "curvature"} <= set(ce)
    assert ce["curvature"] < 0 and ce["params"]["adv"] == 1.0
    assert out["condition"].startswith("pi_k >= 1/2")
    # the values actually used: --set adv, and q from the function's own default
    assert out["params"] == {"adv": 1.0, "q": 0.5}


def test_convexity_at_local_check(capsys):
    out = _json(capsys, "sft", "--at", "0,1,2,3", "--sampled", "2")
    assert set(out) == {"loss", "params", "min_eigenvalue", "psd"}
    assert out["psd"] is True and out["params"] == {}


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
    assert text.startswith("pg: not_convex (all V >= 3, every sampled token)")
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
    assert "not_convex" in md and "![conditions and minimum eigenvalue]" in md
    assert "parameters: adv = 1.0, q = 0.5" in md
    assert (tmp_path / "convexity_is_surrogate_py_loss.png").stat().st_size > 1000


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["nope"], "unknown loss 'nope'"),
        (["sft", "--set", "adv"], "expected KEY=VALUE"),
        (["sft", "--set", "adv=abc"], "'abc' is not a number"),
        (["sft", "--at", "0,1"], "--at needs --sampled"),
        (
            ["sft", "--at", "0,x", "--sampled", "0"],
            "not a comma- or space-separated list",
        ),
        (["sft", "--at", "0,1", "--sampled", "5"], "--sampled 5 is out of range"),
        (["sft", "--vocab", "1"], "every V must be >= 2"),
        (["sft", "--timeout", "0"], "--timeout 0.0"),
        (["sft", "--timeout", "nan"], "--timeout nan"),
        (["sft", "--timeout", "inf"], "--timeout inf"),
        ([EX + "bad_losses.py:vector"], "not a scalar"),
        (["sft", "--set", "adv=1"], "unknown parameter 'adv'; it takes: (none)"),
        (["ppo", "--set", "delta=0.1"], "unknown parameter 'delta'; it takes: adv,"),
        (["ppo", "--set", "eps_low=2"], "eps_low=2.0 must lie in [0, 1)"),
        (["pg", "--set", "q=0.3"], "unknown parameter 'q'; it takes: adv"),
        (["ppo", "--set", "behavior_logp=1"], "an array input, built from q"),
        (["pg", "--set", "adv=1", "--set", "adv=2"], "'adv' is given twice"),
    ],
)
def test_convexity_bad_input_exits_2_with_one_line(capsys, argv, needle):
    assert main(["convexity", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and needle in err


def _write(tmp_path, body, name="user.py"):
    path = tmp_path / name
    path.write_text("import jax\nimport jax.numpy as jnp\n\n" + body)
    return str(path)


@pytest.mark.parametrize(
    "body,needle",
    [
        ("def loss(z, k):\n    return 3\n", "dtype int"),
        ("def loss(z, k):\n    return jnp.sum(z) * 1j\n", "dtype complex"),
        ("def loss(z, k):\n    return z.shape[7] * 1.0\n", "IndexError"),
        (
            "def loss(z, k):\n    return z[5] * 1.0\n",
            "indexes out of range at V = 3: out-of-bounds",
        ),
        ("def loss(z, k):\n    return jnp.sum(z[jnp.array([0, 9])])\n", "out of range"),
        ("def loss(z, k):\n    return jnp.sort(z)[0] ** 2\n", None),
    ],
)
def test_convexity_bad_loss_output_exits_2_with_one_line(
    capsys, tmp_path, body, needle
):
    spec = _write(tmp_path, body) + ":loss"
    # the unsupported operation needs the structure stage to reach the translation:
    # a 1 s timeout (a 5 s budget) can expire in the worker's start on a loaded machine
    timeout = "10" if needle is None else "1"
    code = main(["convexity", spec, "--timeout", timeout])
    captured = capsys.readouterr()
    err = captured.err.strip()
    if needle is None:  # an operation the translation lacks: other stages decide
        assert code == 0
        assert "[skipped] symbolic: unsupported operation" in captured.out
        assert "'sort'" in captured.out
        # min(z)^2 is not convex (V = 2: a = (0, 9), b = (9, 0), f(m) = 20.25 > 0)
        assert captured.out.startswith("user.py:loss: not_convex"), captured.out
        return
    assert code == 2 and err.count("\n") == 0 and needle in err, err


def test_convexity_unknown_key_of_a_user_loss_names_the_keys(capsys, tmp_path):
    body = "def loss(z, k, adv=1.0, beta=0.5):\n    return -adv * z[k] + beta\n"
    spec = _write(tmp_path, body) + ":loss"
    assert main(["convexity", spec, "--set", "bta=2"]) == 2
    err = capsys.readouterr().err.strip()
    assert "unknown parameter 'bta'; it takes: adv, beta" in err


def test_convexity_at_refuses_a_non_finite_loss(capsys, tmp_path):
    body = "def loss(z, k):\n    return jnp.log(z[k]) ** 2\n"  # NaN for z_k < 0
    spec = _write(tmp_path, body) + ":loss"
    assert main(["convexity", spec, "--at=-1,2,3", "--sampled", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "is not finite (nan) at logits" in err


def test_convexity_at_refuses_2d_npy_and_reads_whitespace_txt(capsys, tmp_path):
    np.save(tmp_path / "z2.npy", np.zeros((2, 3)))
    argv = ["convexity", "sft", "--sampled", "0", "--at"]
    assert main([*argv, str(tmp_path / "z2.npy")]) == 2
    assert "need a 1-D numeric array, got shape (2, 3)" in capsys.readouterr().err
    (tmp_path / "z.txt").write_text("0.0 1.0\n2.0\t-1.0\n")
    out = _json(capsys, "sft", "--at", str(tmp_path / "z.txt"), "--sampled", "1")
    assert out["psd"] is True
    out = _json(capsys, "sft", "--at", "0 1, 2", "--sampled", "1")
    assert out["psd"] is True


def test_convexity_report_refused_before_any_work(capsys, tmp_path, monkeypatch):
    import theorycheck.convexity as cv

    def boom(*args, **kwargs):  # the check must not even start
        raise AssertionError("check_convexity ran")

    monkeypatch.setattr(cv, "check_convexity", boom)
    afile = tmp_path / "a_file"
    afile.write_text("x")
    assert main(["convexity", "sft", "--report", str(afile)]) == 2
    assert "is a file; expected a directory" in capsys.readouterr().err
    assert main(["convexity", "sft", "--report", str(afile / "sub")]) == 2
    assert "is not a writable directory" in capsys.readouterr().err

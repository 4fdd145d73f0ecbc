"""The experiments' entry points keep the command line's contract: exit 2 with one
stderr line on bad input (argparse errors included), 130/143 on SIGINT/SIGTERM with
one line, ``--json`` one object, and a replay that checks what it reads first.

Every case here ends before a unit computes (in process, from copies of committed
results), so the file costs seconds."""

from __future__ import annotations

import json
import math
import os
import shutil
import signal

import pytest

from experiments import rollout_analysis
from experiments.runner import compare_units, guarded
from theorycheck._errors import BadInput

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RESULTS = os.path.join(ROOT, "experiments", "results")


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert "Traceback" not in err[0]
    return err[0]


def _copy(tmp_path, name: str):
    dst = tmp_path / name
    shutil.copytree(os.path.join(RESULTS, name), dst)
    return dst


@pytest.mark.parametrize("out", ["/proc/x/y", "", "FILE"])
def test_an_out_that_cannot_be_created_is_one_line(tmp_path, capsys, out):
    if out == "FILE":
        out = str(tmp_path / "a_file")
        (tmp_path / "a_file").write_text("x")
    assert rollout_analysis.main(["--tiny", "--out", out]) == 2
    line = _one_line(capsys)
    assert line.startswith("rollout_analysis: error: --out")


@pytest.mark.parametrize(
    "argv,named",
    [(["--nope"], "--nope"), (["--seeds", "many"], "many"), (["--seeds"], "--seeds")],
)
def test_argparse_errors_are_one_line(capsys, argv, named):
    assert rollout_analysis.main(["--tiny", *argv]) == 2
    line = _one_line(capsys)
    assert named in line and "usage" not in line


def _args_of(config: dict) -> list[str]:
    argv = []
    for key, value in config.items():
        if key != "out":
            argv += ["--" + key.replace("_", "-"), str(value)]
    return argv


def test_json_is_one_object_with_the_results_and_the_summary(tmp_path, capsys):
    run = _copy(tmp_path, "rollout_analysis")
    config = json.loads((run / "results.json").read_text())["config"]
    argv = [*_args_of(config), "--out", str(run), "--report-only", "--json"]
    assert rollout_analysis.main(argv) == 0
    out = json.loads(capsys.readouterr().out)  # exactly one object
    assert out["results"] == str(run / "results.json")
    assert out["summary"] == json.loads((run / "results.json").read_text())["summary"]


def _tamper(run, what: str) -> None:
    path = run / "results.json"
    data = json.loads(path.read_text())
    if what == "truncated results":
        path.write_text(path.read_text()[:1000])
    elif what == "truncated rollouts":
        raw = (run / "rollouts.npz").read_bytes()
        (run / "rollouts.npz").write_bytes(raw[: len(raw) // 2])
    elif what == "seeds many":
        data["config"]["seeds"] = "many"
    elif what == "units list":
        data["units"] = []
    elif what == "no units":
        data["units"] = {}
    elif what == "temperature inf":
        data["config"]["temperature"] = math.inf
    if what not in ("truncated results", "truncated rollouts"):
        path.write_text(json.dumps(data))


@pytest.mark.parametrize(
    "what,named",
    [
        ("truncated results", "not readable JSON"),
        ("truncated rollouts", "not a readable rollouts file"),
        ("seeds many", "seeds = 'many'"),
        ("units list", "'units' is not a JSON object"),
        ("no units", "no finished unit"),
        ("temperature inf", "temperature = inf is not finite"),
    ],
)
def test_a_replay_checks_what_it_reads_first(tmp_path, capsys, what, named):
    run = _copy(tmp_path, "rollout_analysis")
    _tamper(run, what)
    assert rollout_analysis.main(["--replay", str(run)]) == 2
    line = _one_line(capsys)
    assert named in line, line
    assert not (run / "replay").exists()


def test_a_replay_refuses_another_experiments_results(tmp_path, capsys):
    run = _copy(tmp_path, "sign_agreement")
    assert rollout_analysis.main(["--replay", str(run)]) == 2
    assert "another experiment" in _one_line(capsys)


def test_a_replay_sees_nan_against_a_number_either_way():
    recorded = {"u": {"a": 1.0, "b": [2.0, float("nan")], "c": None, "d": None}}
    replayed = {"u": {"a": float("nan"), "b": [2.0, 3.0], "c": None, "d": 4.0}}
    report = compare_units(recorded, replayed)["u"]
    assert report["over_tol"] == ["a", "b/1", "d"]
    assert report["max_rel_diff"] == 0.0  # "b/0": the one pair of numbers, equal
    same = compare_units(recorded, recorded)["u"]
    assert same["over_tol"] == [] and same["keys_in_one_only"] == []


def test_signals_end_in_one_line_with_the_shells_status(capsys):
    def interrupted():
        raise KeyboardInterrupt

    def terminated():
        os.kill(os.getpid(), signal.SIGTERM)
        raise AssertionError("SIGTERM was not delivered")

    assert guarded("x", interrupted) == 130
    assert "interrupted (SIGINT)" in _one_line(capsys)
    assert guarded("x", terminated) == 143
    assert "terminated (SIGTERM)" in _one_line(capsys)
    assert signal.getsignal(signal.SIGTERM) is not None  # the handler put back

    def bad():
        raise BadInput("a\nb")

    assert guarded("x", bad) == 2
    assert _one_line(capsys) == "x: error: a b"

"""The linearization experiment's --tiny mode end to end, resumability, bad input."""

import pytest

from experiments import linearization
from tests.experiments._results import (
    assert_fresh_report_only_refused,
    assert_report_only_computes_nothing,
    assert_same_results,
)
from tests.experiments._results import read as _read

ARGV = ["--tiny", "--seeds", "1", "--subsets", "1,all", "--losses", "lco_mse"]


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("lin") / "run"
    assert linearization.main([*ARGV, "--out", str(out)]) == 0
    return out


def test_tiny_run_writes_results_report_and_figure(tiny_run):
    for name in ("results.json", "timings.json", "report.md", "residual_vs_alpha.png"):
        assert (tiny_run / name).stat().st_size > 0
    data = _read(tiny_run / "results.json")
    assert sorted(data["units"]) == ["lco_mse/1/seed0", "lco_mse/all/seed0"]
    prov = data["provenance"]
    assert prov["seeds"] == [0] and prov["config"]["model"] == "tiny"
    assert prov["versions"]["jax"] and "commit" in prov
    unit = data["units"]["lco_mse/all/seed0"]
    assert sorted(unit["steps"], key=int) == ["1", "4"]
    step = unit["steps"]["1"]
    assert step["update_norm"] > 0
    # the residual grows with the step scale (a real transformer is not linear)
    res = step["residual_median"]
    assert res[-1] > res[0] > 0
    # training the whole model moves the logits less linearly than the last block
    last = data["units"]["lco_mse/1/seed0"]["steps"]["1"]["residual_median"]
    assert res[-1] > last[-1]
    assert "α (10%)" in (tiny_run / "report.md").read_text()


def test_killed_run_restarted_gives_the_same_json(tiny_run, tmp_path, monkeypatch):
    out = tmp_path / "run"
    real = linearization.run_unit
    calls = []

    def dies_after_one(*args, **kwargs):
        if calls:
            raise KeyboardInterrupt
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(linearization, "run_unit", dies_after_one)
    argv = [*ARGV, "--out", str(out)]
    assert linearization.main(argv) == 130  # SIGINT's status; finished units kept
    assert len(_read(out / "results.json")["units"]) == 1
    monkeypatch.setattr(linearization, "run_unit", real)
    assert linearization.main(argv) == 0
    assert_same_results(out / "results.json", tiny_run / "results.json")


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--losses", "nope"], "nope"),
        (["--subsets", "99"], "99"),
        (["--alpha-min", "0"], "alpha"),
        (["--rewards", "dice"], "dice"),
    ],
)
def test_bad_input_exits_2_naming_the_value(argv, needle, tmp_path, capsys):
    assert linearization.main(["--tiny", "--out", str(tmp_path), *argv]) == 2
    assert needle in capsys.readouterr().err


def test_report_only_summarizes_finished_units_without_computing(
    tiny_run, tmp_path, monkeypatch
):
    assert_report_only_computes_nothing(
        linearization, ARGV, tiny_run, tmp_path, monkeypatch
    )


def test_fresh_with_report_only_is_refused(tmp_path, capsys):
    assert_fresh_report_only_refused(linearization, ARGV, tmp_path, capsys)


def test_replay_recomputes_every_unit_from_the_recorded_rollouts(tiny_run, capsys):
    assert (tiny_run / "rollouts.npz").stat().st_size > 0
    units = _read(tiny_run / "results.json")["units"]
    assert all(u["regime"] == "bf16_engine" for u in units.values())
    assert linearization.main(["--replay", str(tiny_run)]) == 0
    assert "0 with numbers over 1e-06" in capsys.readouterr().out

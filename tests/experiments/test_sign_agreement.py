"""The experiment's --tiny mode end to end, resumability, bad input."""

import pytest

from experiments import sign_agreement
from tests.experiments._results import (
    assert_fresh_report_only_refused,
    assert_report_only_computes_nothing,
)
from tests.experiments._results import read as _read


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("sign") / "run"
    assert sign_agreement.main(["--tiny", "--seeds", "2", "--out", str(out)]) == 0
    return out


def test_tiny_run_writes_results_report_and_figures(tiny_run):
    for name in (
        "results.json",
        "timings.json",
        "report.md",
        "balanced_accuracy.png",
        "by_step.png",
    ):
        assert (tiny_run / name).stat().st_size > 0
    data = _read(tiny_run / "results.json")
    grid = sign_agreement.Config.tiny().grid.split(",")
    assert sorted(data["units"]) == sorted(f"{v}/seed{s}" for v in grid for s in (0, 1))
    prov = data["provenance"]
    assert prov["seeds"] == [0, 1] and prov["config"]["model"] == "tiny"
    assert prov["versions"]["jax"] and "commit" in prov
    base = data["summary"]["base"]
    live = [
        s for s in (0, 1) if data["units"][f"base/seed{s}"]["scale"]["updated_tokens"]
    ]
    assert live  # at least one seed has groups with mixed rewards
    assert base["metrics/step/always_rise/agreement"]["n"] == len(live)
    assert "## Decomposition" in (tiny_run / "report.md").read_text()


def test_killed_run_restarted_gives_the_same_json(tiny_run, tmp_path, monkeypatch):
    out = tmp_path / "run"
    real = sign_agreement.run_unit
    calls = []

    def dies_after_three(*args, **kwargs):
        if len(calls) == 3:
            raise KeyboardInterrupt
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(sign_agreement, "run_unit", dies_after_three)
    argv = ["--tiny", "--seeds", "2", "--out", str(out)]
    with pytest.raises(KeyboardInterrupt):
        sign_agreement.main(argv)
    assert len(_read(out / "results.json")["units"]) == 3
    monkeypatch.setattr(sign_agreement, "run_unit", real)
    assert sign_agreement.main(argv) == 0
    got, want = _read(out / "results.json"), _read(tiny_run / "results.json")
    # the output folder differs; everything else is identical
    for d in (got["config"], got["provenance"]["config"]):
        d["out"] = want["config"]["out"]
    assert got == want


def test_a_different_config_is_not_mixed_into_old_results(tiny_run, capsys):
    rc = sign_agreement.main(
        ["--tiny", "--seeds", "2", "--lr", "0.5", "--out", str(tiny_run)]
    )
    assert rc == 2
    assert "another config" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "needle"), [(["--grid", "nope"], "nope"), (["--seeds", "0"], "seeds")]
)
def test_bad_input_exits_2_naming_the_value(argv, needle, tmp_path, capsys):
    assert sign_agreement.main(["--tiny", "--out", str(tmp_path), *argv]) == 2
    assert needle in capsys.readouterr().err


def test_report_only_summarizes_finished_units_without_computing(
    tiny_run, tmp_path, monkeypatch
):
    argv = ["--tiny", "--seeds", "2"]
    assert_report_only_computes_nothing(
        sign_agreement, argv, tiny_run, tmp_path, monkeypatch
    )


def test_fresh_with_report_only_is_refused(tmp_path, capsys):
    assert_fresh_report_only_refused(sign_agreement, ["--tiny"], tmp_path, capsys)

"""The gradient-bounds experiment's --tiny mode end to end, resumability, bad input."""

import json
import math

import pytest

from experiments import gradient_bounds
from tests.experiments._results import (
    assert_fresh_report_only_refused,
    assert_report_only_computes_nothing,
    assert_same_results,
)
from tests.experiments._results import read as _read

ARGV = ["--tiny", "--seeds", "1", "--fixed-losses", "lco_mse"]


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("gb") / "run"
    assert gradient_bounds.main([*ARGV, "--out", str(out)]) == 0
    return out


def test_tiny_run_writes_results_report_and_figures(tiny_run):
    for name in (
        "results.json",
        "report.md",
        "bounds.png",
        "fixed_target.png",
        "reach.png",
    ):
        assert (tiny_run / name).stat().st_size > 0
    data = _read(tiny_run / "results.json")
    assert sorted(data["units"]) == [
        "bounds/lco_mse/seed0",
        "bounds/ppo/seed0",
        "fixed/lco_mse/seed0",
        "reach/lco_mse/seed0",
    ]
    for loss in ("lco_mse", "ppo"):
        unit = data["units"][f"bounds/{loss}/seed0"]
        for s in unit["steps"]:
            assert 0 < s["tightness"] <= 1 + 1e-6  # σ from power iteration ≤ σ_max
    lco = data["units"]["bounds/lco_mse/seed0"]
    # the MSE loss bound is the chain-rule bound exactly (|∇zℓ|² = κℓ)
    for s in lco["steps"]:
        assert s["loss_bound"] == pytest.approx(s["bound"], rel=1e-6)
    assert "loss_bound" not in data["units"]["bounds/ppo/seed0"]["steps"][0]
    fixed = data["units"]["fixed/lco_mse/seed0"]
    assert fixed["real_losses"][-1] < fixed["real_losses"][0]
    for r in fixed["inner"]:  # two routes to ⟨∇θL, θ − θ*⟩
        assert r["param_inner"] == pytest.approx(r["jvp_inner"], rel=1e-8)
    assert "Prop. 4.7" in (tiny_run / "report.md").read_text()


def _reach(run):
    return _read(run / "results.json")["units"]["reach/lco_mse/seed0"]


def test_reach_target_is_reached_two_routes(tiny_run):
    unit = _reach(tiny_run)
    assert [r["scale"] for r in unit["scales"]] == [1e-4, 1e-3, 1e-2, 0.1, 0.3, 1, 3]
    for r in unit["scales"]:
        # L(θ*) = 0 up to float64 rounding; L(θ_0): registry = ½V⁻¹Σw‖z − z*‖²
        assert 0 <= r["loss_star"] <= 1e-20 * r["loss0"]
        assert r["loss0_direct"] == pytest.approx(r["loss0"], rel=1e-12)
        for point in ("start", "mid"):
            p = r[point]
            assert p["param_inner"] == pytest.approx(p["jvp_inner"], rel=1e-8)
            assert p["logit_inner"] == pytest.approx(2 * p["loss"], rel=1e-10)
            assert p["holds"] == (p["param_inner"] >= p["gap"])
        start = r["start"]
        assert start["loss"] == pytest.approx(r["loss0"], rel=1e-12)
        assert start["param_inner"] - start["logit_inner"] == pytest.approx(
            r["inner_error"], abs=1e-9 * start["logit_inner"]
        )


def test_reach_ratio_tends_to_one_as_the_scale_shrinks(tiny_run):
    unit = _reach(tiny_run)
    recs = unit["scales"]
    dev = [abs(r["start"]["ratio"] - 1) for r in recs]
    for r, d in zip(recs, dev):  # Cauchy-Schwarz: |ratio − 1| ≤ ρ
        assert d <= r["residual"] * (1 + 1e-9)
    assert dev[0] < 1e-3 and recs[0]["residual"] < 1e-3  # the linear regime
    # ρ ∝ s there: a tenfold smaller s gives a tenfold smaller residual
    assert recs[0]["residual"] / recs[1]["residual"] == pytest.approx(0.1, rel=0.05)
    # the grid reaches ρ > 1, where the inequality fails: the scan can see it
    fails = [r["scale"] for r in recs if not r["start"]["holds"]]
    assert fails and unit["first_fail_scale"] == fails[0]
    first = next(r for r in recs if r["scale"] == fails[0])
    assert first["start"]["ratio"] < 0.5 and first["residual"] >= 0.5
    summary = _read(tiny_run / "results.json")["summary"]["reach"]
    assert summary["ratio_bound_violations"] == 0
    assert summary["per_seed"]["seed0"]["first_fail_scale"] == fails[0]
    assert math.isclose(
        summary["scales"][0]["ratio"]["mean"], recs[0]["start"]["ratio"]
    )
    assert "reachable target" in (tiny_run / "report.md").read_text()


def test_reach_only_run_gives_the_same_unit(tiny_run, tmp_path):
    out = tmp_path / "reach"
    argv = ["--tiny", "--seeds", "1", "--losses", "", "--fixed-losses", ""]
    assert gradient_bounds.main([*argv, "--out", str(out)]) == 0
    assert list(_read(out / "results.json")["units"]) == ["reach/lco_mse/seed0"]
    assert _reach(out) == _reach(tiny_run)
    assert not (out / "bounds.png").exists() and (out / "reach.png").exists()
    assert "Prop. 4.7" not in (out / "report.md").read_text()


def test_killed_run_restarted_gives_the_same_json(tiny_run, tmp_path, monkeypatch):
    out = tmp_path / "run"
    real = gradient_bounds.fixed_unit

    def dies(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(gradient_bounds, "fixed_unit", dies)
    argv = [*ARGV, "--out", str(out)]
    assert gradient_bounds.main(argv) == 130  # SIGINT's status; finished units kept
    assert len(_read(out / "results.json")["units"]) == 2
    monkeypatch.setattr(gradient_bounds, "fixed_unit", real)
    assert gradient_bounds.main(argv) == 0
    assert_same_results(out / "results.json", tiny_run / "results.json")


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--fixed-losses", "ppo"], "ppo"),
        (["--losses", "nope"], "nope"),
        (["--gd-scale", "0"], "gd_scale"),
        (["--reach-scales", "1e-3,0"], "'0'"),
        (["--reach-scales", "1e-3,nan"], "'nan'"),
        (["--reach-scales", "1e-2,1e-3"], "increasing"),
        (["--losses", "", "--fixed-losses", "", "--reach-scales", ""], "no units"),
        (["--trainable-blocks", "4"], "trainable_blocks = 4 must be in 1..3"),
        (["--trainable-blocks", "0"], "trainable_blocks = 0"),
    ],
)
def test_bad_input_exits_2_naming_the_value(argv, needle, tmp_path, capsys):
    assert gradient_bounds.main(["--tiny", "--out", str(tmp_path), *argv]) == 2
    assert needle in capsys.readouterr().err


def test_report_only_summarizes_finished_units_without_computing(
    tiny_run, tmp_path, monkeypatch
):
    assert_report_only_computes_nothing(
        gradient_bounds, ARGV, tiny_run, tmp_path, monkeypatch
    )


def test_fresh_with_report_only_is_refused(tmp_path, capsys):
    assert_fresh_report_only_refused(gradient_bounds, ARGV, tmp_path, capsys)


def test_replay_recomputes_every_unit_from_the_recorded_rollouts(tiny_run, capsys):
    assert (tiny_run / "rollouts.npz").stat().st_size > 0
    units = _read(tiny_run / "results.json")["units"]
    assert all(u["regime"] == "bf16_engine" for u in units.values())
    assert gradient_bounds.main(["--replay", str(tiny_run)]) == 0
    assert "0 with numbers over 1e-06" in capsys.readouterr().out


def test_the_whole_network_of_a_real_vocabulary_trains_in_float32():
    """The rule both LCO experiments share (float64 on the last blocks; the whole
    SmolLM2 network in float32), recorded per unit as ``train_dtype``."""
    import jax.numpy as jnp

    from experiments.linearization import trainer_dtype

    assert trainer_dtype(2, 49152) == jnp.float64
    assert trainer_dtype(30, 49152) == jnp.float32
    assert trainer_dtype(3, 64) == jnp.float64  # the tiny model, every block


def test_units_record_their_trainer_precision(tiny_run):
    units = json.loads((tiny_run / "results.json").read_text())["units"]
    assert {u["train_dtype"] for u in units.values()} == {"float64"}

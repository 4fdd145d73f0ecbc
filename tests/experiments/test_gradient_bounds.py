"""The gradient-bounds experiment's --tiny mode end to end, resumability, bad input."""

import pytest

from experiments import gradient_bounds
from tests.experiments._results import assert_same_results
from tests.experiments._results import read as _read

ARGV = ["--tiny", "--seeds", "1", "--fixed-losses", "lco_mse"]


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("gb") / "run"
    assert gradient_bounds.main([*ARGV, "--out", str(out)]) == 0
    return out


def test_tiny_run_writes_results_report_and_figures(tiny_run):
    for name in ("results.json", "report.md", "bounds.png", "fixed_target.png"):
        assert (tiny_run / name).stat().st_size > 0
    data = _read(tiny_run / "results.json")
    assert sorted(data["units"]) == [
        "bounds/lco_mse/seed0",
        "bounds/ppo/seed0",
        "fixed/lco_mse/seed0",
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


def test_killed_run_restarted_gives_the_same_json(tiny_run, tmp_path, monkeypatch):
    out = tmp_path / "run"
    real = gradient_bounds.fixed_unit

    def dies(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(gradient_bounds, "fixed_unit", dies)
    argv = [*ARGV, "--out", str(out)]
    with pytest.raises(KeyboardInterrupt):
        gradient_bounds.main(argv)
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
    ],
)
def test_bad_input_exits_2_naming_the_value(argv, needle, tmp_path, capsys):
    assert gradient_bounds.main(["--tiny", "--out", str(tmp_path), *argv]) == 2
    assert needle in capsys.readouterr().err

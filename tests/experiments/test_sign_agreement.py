"""The experiment's --tiny mode end to end: per-unit keys, both regimes, matched
controls, resumability, replay from the recorded rollouts, bad input."""

import json
import shutil
from pathlib import Path

import pytest

from experiments import sign_agreement
from tests.experiments._results import (
    assert_fresh_report_only_refused,
    assert_report_only_computes_nothing,
    assert_same_results,
)
from tests.experiments._results import read as _read

ARGV = ["--tiny", "--seeds", "2"]


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("sign") / "run"
    assert sign_agreement.main([*ARGV, "--out", str(out)]) == 0
    return out


def test_tiny_run_writes_results_rollouts_report_and_figures(tiny_run):
    for name in (
        "results.json",
        "rollouts.npz",
        "timings.json",
        "report.md",
        "balanced_accuracy.png",
    ):
        assert (tiny_run / name).stat().st_size > 0
    data = _read(tiny_run / "results.json")
    grid = sign_agreement.Config.tiny().grid.split(",")
    assert sorted(data["units"]) == sorted(f"{v}/seed{s}" for v in grid for s in (0, 1))
    prov = data["provenance"]
    assert prov["seeds"] == [0, 1] and prov["config"]["model"] == "tiny"
    assert prov["versions"]["jax"] and "commit" in prov and "dirty" in prov
    assert prov["wall_s"] > 0 and "load_average_end" in prov
    report = (tiny_run / "report.md").read_text()
    assert "regime `bf16_engine`" in report and "regime `on_policy`" in report


def test_every_unit_records_variant_seed_regime_and_tokens(tiny_run):
    units = _read(tiny_run / "results.json")["units"]
    for uid, u in units.items():
        variant, seed = uid.split("/")
        assert u["variant"] == variant and f"seed{u['seed']}" == seed
        want = "on_policy" if variant == "on_policy" else "bf16_engine"
        assert u["regime"] == want
        assert u["updated_tokens"] == u["scale"]["updated_tokens"]
        assert set(u["predictors"]) == {"step", "epoch", "run"}
        assert u["signal_tokens"] + u["zero_signal"]["tokens"] == u["updated_tokens"]


def test_on_policy_first_minibatch_is_zero_signal(tiny_run):
    units = _read(tiny_run / "results.json")["units"]
    for s in (0, 1):
        on, off = units[f"on_policy/seed{s}"], units[f"base/seed{s}"]
        if on["updated_tokens"]:
            # π = μ exactly until the first nonzero update: counted apart, only there
            zero = on["zero_signal"]
            assert zero["tokens"] == zero["before_first_update"]
            assert on["zero_signal"]["tokens"] > 0
            assert on["zero_signal"]["rise_share"] in (None, 1.0)
        assert off["zero_signal"]["tokens"] == 0  # the bf16 engine: D > 0 everywhere


def test_matched_controls_mask_the_coupled_share(tiny_run):
    units = _read(tiny_run / "results.json")["units"]
    for variant in ("base", "on_policy"):
        for s in (0, 1):
            masks = units[f"{variant}/seed{s}"]["masks"]
            want = {
                "none",
                "ratio",
                "predictive",
                "coupled",
                "random_matched",
                "ratio_matched",
                "predictive_matched",
            }
            assert set(masks) == want
            for c in ("random_matched", "ratio_matched", "predictive_matched"):
                assert masks[c]["masked_share"] == masks["coupled"]["masked_share"]
            # computed in the probe's own pass: no second trajectory to compare
            assert (
                "max_rel_update_norm_gap" not in units[f"{variant}/seed{s}"]["checks"]
            )
    assert "masks" in units["base/seed0"] and units["sgd/seed0"]["masks"] == {}


def test_units_record_the_probed_rows_and_the_report_names_them(tiny_run):
    # the default probes each step's minibatch rows only: "others" is not measured
    data = _read(tiny_run / "results.json")
    assert data["config"]["probe_rows"] == "minibatch"
    assert data["config"]["others_rows"] == 0
    for u in data["units"].values():
        assert u["probed"] == {
            "probe_rows": "minibatch",
            "others_rows": 0,
            "others_tokens": 0,
        }
        assert u["others"] is None
    assert "Probed rows `minibatch`" in (tiny_run / "report.md").read_text()


def test_summary_carries_intervals_and_paired_differences(tiny_run):
    summary = _read(tiny_run / "results.json")["summary"]
    assert set(summary) == {"base", "on_policy", "sgd"}
    base = summary["base"]
    assert base["regime"] == "bf16_engine" and base["seeds"] == [0, 1]
    st = base["stats"]["signal/ntk1/agreement"]
    assert {"mean", "se", "n", "ci95", "mde"} <= set(st)
    lo, hi = st["ci95"]
    assert lo <= st["mean"] <= hi
    assert "paper_4_2/delta" in base["stats"]
    key = "masks/coupled/unsafe_keep - masks/ratio_matched/unsafe_keep"
    assert key in base["diffs"]
    assert [r["seed"] for r in base["per_seed"]] == [0, 1]


def test_paper_metric_states_delta_and_its_share_outside(tiny_run):
    unit = _read(tiny_run / "results.json")["units"]["base/seed0"]
    u = unit["paper_4_2"]
    assert u["quantile"] == 0.5 and u["delta"] > 0
    # δ is the median of D over the signal tokens: half of them are outside
    assert abs(u["step"]["outside"] - unit["signal_tokens"] / 2) <= 1
    assert u["run"]["outside"] == u["step"]["outside"]


def test_replay_reproduces_every_number_from_the_recorded_rollouts(tiny_run, capsys):
    assert sign_agreement.main(["--replay", str(tiny_run)]) == 0
    assert "0 with numbers over 1e-06" in capsys.readouterr().out
    rep = _read(tiny_run / "replay" / "replay.json")
    assert len(rep["units"]) == 6
    assert all(
        r["max_rel_diff"] <= 1e-6 and not r["over_tol"] for r in rep["units"].values()
    )
    assert all(r["numbers"] > 100 for r in rep["units"].values())


def test_replay_reports_a_number_that_differs(tiny_run, tmp_path, capsys):
    out = tmp_path / "copy"
    shutil.copytree(tiny_run, out)
    data = _read(out / "results.json")
    data["units"]["base/seed1"]["signal"]["ntk1"]["agreement"] += 0.01
    (out / "results.json").write_text(json.dumps(data))
    assert sign_agreement.main(["--replay", str(out)]) == 1
    assert "base/seed1" in capsys.readouterr().out
    rep = _read(out / "replay" / "replay.json")
    assert rep["units"]["base/seed1"]["over_tol"] == ["signal/ntk1/agreement"]


def test_replay_without_recorded_rollouts_is_bad_input(tiny_run, tmp_path, capsys):
    out = tmp_path / "norollouts"
    out.mkdir()
    shutil.copy(tiny_run / "results.json", out / "results.json")
    assert sign_agreement.main(["--replay", str(out)]) == 2
    assert "rollouts.npz" in capsys.readouterr().err


def test_replay_of_another_analysis_version_is_refused_in_one_line(tmp_path, capsys):
    """A results file whose units an older analysis wrote (e.g. version 3: every row
    probed, controls in a second pass) would be compared with other functions of the
    same rollouts, so its replay is refused before any work, naming both versions and
    the commit that wrote it."""
    committed = Path(sign_agreement.__file__).parent / "results" / "sign_agreement"
    out = tmp_path / "old"
    shutil.copytree(committed, out, ignore=shutil.ignore_patterns("replay"))
    data = _read(out / "results.json")
    for unit in data["units"].values():
        unit["analysis_version"] = sign_agreement.ANALYSIS_VERSION - 1
    (out / "results.json").write_text(json.dumps(data))
    assert sign_agreement.main(["--replay", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    old, new = sign_agreement.ANALYSIS_VERSION - 1, sign_agreement.ANALYSIS_VERSION
    assert f"version {old} and this code computes version {new}" in err[0]
    assert data["provenance"]["commit"][:10] in err[0]
    assert not (out / "replay").exists()


def test_committed_results_are_this_analysis_version():
    """The committed run is replayable by this code (its replay is not refused)."""
    committed = Path(sign_agreement.__file__).parent / "results" / "sign_agreement"
    data = _read(committed / "results.json")
    found = {u["analysis_version"] for u in data["units"].values()}
    assert found == {sign_agreement.ANALYSIS_VERSION}


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
    argv = [*ARGV, "--out", str(out)]
    assert sign_agreement.main(argv) == 130  # SIGINT's status; finished units kept
    assert len(_read(out / "results.json")["units"]) == 3
    monkeypatch.setattr(sign_agreement, "run_unit", real)
    assert sign_agreement.main(argv) == 0
    assert_same_results(out / "results.json", tiny_run / "results.json")


def test_a_different_config_is_not_mixed_into_old_results(tiny_run, capsys):
    rc = sign_agreement.main([*ARGV, "--lr", "0.5", "--out", str(tiny_run)])
    assert rc == 2
    assert "another config" in capsys.readouterr().err


#: one seed, both regimes: the smallest run with units that read the anchor and
#: units that do not
ANCHOR_ARGV = ["--tiny", "--seeds", "1", "--grid", "base,on_policy"]


@pytest.fixture(scope="module")
def xla_run(tmp_path_factory):
    """The tiny run with the anchor rescored by XLA's bfloat16 arithmetic."""
    out = tmp_path_factory.mktemp("sign_xla") / "run"
    argv = [*ANCHOR_ARGV, "--anchor-arithmetic", "xla", "--out", str(out)]
    assert sign_agreement.main(argv) == 0
    return out


def test_changing_only_the_anchor_arithmetic_recomputes_the_anchored_units(
    xla_run, tiny_run, tmp_path
):
    """A restart with another ``--anchor-arithmetic`` recomputes the bf16_engine
    units (they read the anchor) and keeps the on_policy ones (they never do); the
    recomputed unit is the one a run with the exact anchor from the start has."""
    out = tmp_path / "run"
    shutil.copytree(xla_run, out)
    xla = _read(out / "results.json")
    assert sign_agreement.main([*ANCHOR_ARGV, "--out", str(out)]) == 0
    exact = _read(out / "results.json")
    assert exact["config"]["anchor_arithmetic"] == "exact"
    assert (
        exact["units"].keys()
        == xla["units"].keys()
        == {"base/seed0", "on_policy/seed0"}
    )
    assert exact["units"]["on_policy/seed0"] == xla["units"]["on_policy/seed0"]
    base = exact["units"]["base/seed0"]
    assert (
        base["rollouts"]["anchor_gap"]
        != xla["units"]["base/seed0"]["rollouts"]["anchor_gap"]
    )
    assert base == _read(tiny_run / "results.json")["units"]["base/seed0"]


def test_changing_the_trunk_dtype_recomputes_every_unit(tmp_path, monkeypatch):
    """A restart with another trunk dtype (here the experiment's float64 default
    after a run with ``--trunk-dtype float32`` written before the field existed,
    which reads as float32) recomputes every unit (each reads the trunk) from the
    recorded rollouts, without sampling; the result is the run a float64 trunk
    gives from the start."""
    out, ref = tmp_path / "run", tmp_path / "ref"
    argv = [*ANCHOR_ARGV, "--trunk-dtype", "float32", "--out", str(out)]
    assert sign_agreement.main(argv) == 0
    data = _read(out / "results.json")
    assert data["config"]["trunk_dtype"] == "float32"
    del data["config"]["trunk_dtype"]  # as written before the field existed
    (out / "results.json").write_text(json.dumps(data))
    assert sign_agreement.main([*ANCHOR_ARGV, "--out", str(ref)]) == 0
    seen = _computed_units_without_sampling(monkeypatch)
    assert sign_agreement.main([*ANCHOR_ARGV, "--out", str(out)]) == 0
    assert sorted(seen) == ["base/seed0", "on_policy/seed0"]
    after, want = _read(out / "results.json"), _read(ref / "results.json")
    assert after["config"]["trunk_dtype"] == "float64"
    assert after["units"] == want["units"]
    assert after["units"] != data["units"]


def test_a_results_file_without_the_field_replays_with_xla_arithmetic(
    xla_run, tmp_path, monkeypatch, capsys
):
    """A results file written before ``anchor_arithmetic`` existed recomputed its
    anchor with XLA's arithmetic; its replay reads it so (recorded_config) and so
    reproduces its numbers (each unit recomputed by the real unit function)."""
    out = tmp_path / "legacy"
    shutil.copytree(xla_run, out)
    data = _read(out / "results.json")
    del data["config"]["anchor_arithmetic"]
    (out / "results.json").write_text(json.dumps(data))
    seen = []
    real = sign_agreement.run_unit

    def spy(ctx, cfg, unit):
        seen.append(cfg.anchor_arithmetic)
        return real(ctx, cfg, unit)

    monkeypatch.setattr(sign_agreement, "run_unit", spy)
    argv = ["--replay", str(out), "--replay-units", "base/seed0"]
    assert sign_agreement.main(argv) == 0
    assert seen == ["xla"]
    assert "0 with numbers over 1e-06" in capsys.readouterr().out


def _computed_units_without_sampling(monkeypatch) -> list:
    """The ids of the units the run computes (appended as they run); sampling new
    rollouts fails the test."""
    seen = []
    real = sign_agreement.run_unit

    def spy(ctx, cfg, unit):
        seen.append(unit.id)
        return real(ctx, cfg, unit)

    def no_sampling(*args, **kwargs):
        raise AssertionError("a recompute sampled new rollouts")

    monkeypatch.setattr(sign_agreement, "run_unit", spy)
    monkeypatch.setattr(sign_agreement, "generate", no_sampling)
    return seen


def test_recompute_computes_the_named_units_again_from_the_recorded_rollouts(
    tiny_run, tmp_path, monkeypatch
):
    """``--recompute`` drops the named finished units and computes them again from
    ``rollouts.npz`` (no new sampling): a unit whose numbers were changed comes back
    as the run computed it; the other units are not recomputed."""
    out = tmp_path / "run"
    shutil.copytree(tiny_run, out)
    data = _read(out / "results.json")
    want = data["units"]["base/seed0"]
    data["units"]["base/seed0"] = {**want, "updated_tokens": -1}
    (out / "results.json").write_text(json.dumps(data))
    seen = _computed_units_without_sampling(monkeypatch)
    argv = [*ARGV, "--out", str(out), "--recompute", "base/seed0"]
    assert sign_agreement.main(argv) == 0
    assert seen == ["base/seed0"]
    after = _read(out / "results.json")
    assert after["units"]["base/seed0"] == want
    assert after["units"].keys() == data["units"].keys()
    replayed = out / "replay" / "replay.json"
    if replayed.exists():
        assert "base/seed0" not in _read(replayed)["units"]


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--recompute", "base/seed9"], "base/seed9"),
        (["--recompute", "base/seed0,"], "empty unit id"),
        (["--recompute", "base/seed0", "--fresh"], "--fresh"),
        (["--recompute", "base/seed0", "--report-only"], "--report-only"),
    ],
)
def test_recompute_bad_input_exits_2(extra, needle, tiny_run, tmp_path, capsys):
    out = tmp_path / "run"
    shutil.copytree(tiny_run, out)
    before = (out / "results.json").read_text()
    assert sign_agreement.main([*ARGV, "--out", str(out), *extra]) == 2
    assert needle in capsys.readouterr().err
    assert (out / "results.json").read_text() == before


def test_recompute_without_recorded_rollouts_exits_2(tiny_run, tmp_path, capsys):
    out = tmp_path / "run"
    shutil.copytree(tiny_run, out)
    (out / "rollouts.npz").unlink()
    argv = [*ARGV, "--out", str(out), "--recompute", "on_policy/seed1"]
    assert sign_agreement.main(argv) == 2
    assert "no recorded rollouts" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--grid", "nope"], "nope"),
        (["--seeds", "0"], "seeds"),
        (["--beta2", "1.5"], "beta2"),
        (["--eps", "0"], "eps"),
        (["--paper-quantile", "1"], "paper_quantile"),
        (["--probe-rows", "some"], "probe_rows"),
        (["--others-rows", "-1"], "others_rows"),
        (["--others-rows", "99"], "others_rows"),
        (["--anchor-arithmetic", "fast"], "anchor_arithmetic"),
        (["--trunk-dtype", "float16"], "float16"),
    ],
)
def test_bad_input_exits_2_naming_the_value(argv, needle, tmp_path, capsys):
    assert sign_agreement.main(["--tiny", "--out", str(tmp_path), *argv]) == 2
    assert needle in capsys.readouterr().err


def test_report_only_summarizes_finished_units_without_computing(
    tiny_run, tmp_path, monkeypatch
):
    assert_report_only_computes_nothing(
        sign_agreement, ARGV, tiny_run, tmp_path, monkeypatch
    )


def test_fresh_with_report_only_is_refused(tmp_path, capsys):
    assert_fresh_report_only_refused(sign_agreement, ["--tiny"], tmp_path, capsys)


def test_engine_determinism_against_a_run_regenerates_its_batch_bit_for_bit(
    tiny_run, tmp_path
):
    """On the CPU that recorded it, the recorded bfloat16 batch is generated again
    bit for bit, and its rescored anchor agrees with the unit's recorded gap."""
    from experiments import engine_determinism

    out = tmp_path / "against"
    argv = ["--against", str(tiny_run), "--seed", "1", "--out", str(out)]
    assert engine_determinism.main(argv) == 0
    found = _read(out / "against.json")
    assert found["seed"] == 1
    assert set(found["generation"]) >= {"tokens", "sampled_logp", "topk_logp", "meta"}
    assert all(v["bit_identical"] for v in found["generation"].values())
    assert found["anchor_gap_here"] == found["anchor_gap_recorded"]


def test_engine_determinism_against_a_folder_without_results_exits_2(tmp_path, capsys):
    from experiments import engine_determinism

    argv = ["--against", str(tmp_path), "--out", str(tmp_path / "o")]
    assert engine_determinism.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no results.json" in err[0]


def test_engine_determinism_the_exact_rescoring_survives_other_xla_code(tmp_path):
    """The tiny model's batch generated and rescored in this process and in two
    children whose XLA computes every matmul another way (single-threaded; SSE4.2
    code only): the exactly rounded rescoring of the same recorded tokens is
    bit-identical in every one of them."""
    from experiments import engine_determinism

    assert engine_determinism.main(["--tiny", "--out", str(tmp_path)]) == 0
    found = _read(tmp_path / "results.json")
    for key in ("same_process", "single_threaded_child", "sse42_child"):
        assert found[key]["rescored_parent_tokens_exact"]["bit_identical"], key
    assert found["same_process"]["tokens"]["bit_identical"]

"""The experiment blocks of README.md and docs/: generated from the committed
``experiments/results/`` by scripts/gen_experiment_tables.py and kept in sync."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load(name: str):
    sys.path.insert(0, str(ROOT / "scripts"))
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gen = _load("gen_experiment_tables")
docgen = _load("docgen")


def test_committed_experiment_blocks_are_current():
    stale = docgen.stale_blocks(gen.blocks(), ROOT)
    assert stale == [], "run `python scripts/gen_experiment_tables.py` (make docs)"


def test_a_changed_result_makes_its_blocks_stale(tmp_path):
    src = ROOT / "experiments" / "results" / "sign_agreement" / "results.json"
    if not src.exists():
        return  # nothing committed: the "not measured yet" blocks are checked above
    res = tmp_path / "results"
    shutil.copytree(src.parent, res / "sign_agreement")  # its replay record too
    data = json.loads(src.read_text())
    _copy_pages(tmp_path)
    (res / "sign_agreement" / "results.json").write_text(json.dumps(data))
    for other in (ROOT / "experiments" / "results").iterdir():
        if other.is_dir() and other.name != "sign_agreement":
            shutil.copytree(other, res / other.name)
    assert docgen.stale_blocks(gen.blocks(res), tmp_path) == []
    variant = next(iter(data["summary"]))
    stat = data["summary"][variant]["stats"]["signal/ntk1/balanced_accuracy"]
    stat["mean"] = (stat["mean"] or 0) + 0.123
    (res / "sign_agreement" / "results.json").write_text(json.dumps(data))
    stale = docgen.stale_blocks(gen.blocks(res), tmp_path)
    assert "docs/probes.md:probes-tables" in stale
    assert "README.md:readme-probes" in stale


def _copy_pages(dest):
    """Every page with an experiment block, copied under ``dest``."""
    for page in sorted({page for page, _ in gen.blocks()}):
        (dest / page).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / page, dest / page)


def _copy_results(dest, changed: str | None = None, edit=None):
    """The committed results under ``dest``/results; ``edit(data)`` changes the
    results.json of run ``changed``. Returns the folder."""
    res = dest / "results"
    shutil.copytree(ROOT / "experiments" / "results", res)
    if changed is not None:
        path = res / changed / "results.json"
        data = json.loads(path.read_text())
        edit(data)
        path.write_text(json.dumps(data))
    return res


PARTS = ("scale", "tables", "conclusions")

#: a number of each LCO run's summary, and the blocks a change of it must reach.
LCO_CASES = [
    (
        "linearization",
        lambda d: d["summary"]["lco_mse/2/m1"]["at_alpha_1"]["residual_median"],
        [
            "docs/linearization.md:linearization-tables",
            "docs/linearization.md:linearization-conclusions",
            "docs/findings.md:findings-linearization",
        ],
    ),
    (
        "linearization_subsets",
        lambda d: d["summary"]["ppo/all/m4"]["at_alpha_1"]["logp_sign_agreement"],
        [
            "docs/linearization.md:linearization-subsets-tables",
            "docs/linearization.md:linearization-subsets-conclusions",
            "docs/findings.md:findings-linearization",
        ],
    ),
    (
        "gradient_bounds",
        lambda d: d["summary"]["bounds"]["ppo"]["tightness"],
        [
            "docs/linearization.md:gradient-tables",
            "docs/linearization.md:gradient-conclusions",
            "docs/findings.md:findings-linearization",
        ],
    ),
    (
        "reach_tiny",
        lambda d: d["summary"]["reach"]["scales"][0]["residual"],
        ["docs/linearization.md:reach-tiny-tables"],
    ),
    (
        "linearization_tiny",
        lambda d: d["summary"]["lco_mse/all/m1"]["thresholds"]["residual_median"][
            "0.1"
        ],
        ["docs/linearization.md:linearization-tiny"],
    ),
]


#: the docs/linearization.md blocks each LCO run renders.
RUN_BLOCKS = {
    "linearization": [f"linearization-{p}" for p in PARTS],
    "linearization_subsets": [f"linearization-subsets-{p}" for p in PARTS],
    "gradient_bounds": [f"gradient-{p}" for p in PARTS],
    "reach_tiny": [f"reach-tiny-{p}" for p in PARTS],
    "linearization_tiny": ["linearization-tiny"],
}


@pytest.mark.parametrize(("name", "number", "blocks"), LCO_CASES)
def test_a_changed_lco_result_makes_its_blocks_stale(name, number, blocks, tmp_path):
    if not (ROOT / "experiments" / "results" / name / "results.json").exists():
        pytest.skip(f"no committed {name} run: its blocks are 'not measured yet'")
    _copy_pages(tmp_path)
    assert docgen.stale_blocks(gen.blocks(_copy_results(tmp_path)), tmp_path) == []

    def edit(data):
        stat = number(data)
        stat["mean" if "mean" in stat else "alpha_geomean"] *= 1.37

    res = _copy_results(tmp_path / "other", name, edit)
    stale = set(docgen.stale_blocks(gen.blocks(res), tmp_path))
    assert set(blocks) <= stale
    # and no block of another run
    assert stale <= {f"docs/linearization.md:{b}" for b in RUN_BLOCKS[name]} | {
        "docs/findings.md:findings-linearization"
    }


@pytest.mark.parametrize("name", list(RUN_BLOCKS))
def test_an_absent_lco_run_renders_not_measured_in_its_blocks(name, tmp_path):
    res = _copy_results(tmp_path)
    shutil.rmtree(res / name, ignore_errors=True)
    got = gen.blocks(res)
    missing = (
        f"Not measured yet: no committed `experiments/results/{name}/results.json`"
    )
    for block in RUN_BLOCKS[name]:
        assert got[("docs/linearization.md", block)] == f"*{missing}.*"
    others = [
        body
        for (page, block), body in got.items()
        if page == "docs/linearization.md" and block not in RUN_BLOCKS[name]
    ]
    assert others and not any(missing in body for body in others)


def test_a_missing_results_file_renders_not_measured(tmp_path):
    blocks = gen.blocks(tmp_path)
    assert all("Not measured yet" in body for body in blocks.values())


def test_a_difference_is_called_one_only_outside_its_interval():
    assert gen._verdict({"ci95": [-0.2, -0.01]}) == "lower"
    assert gen._verdict({"ci95": [0.01, 0.2]}) == "higher"
    assert "no difference" in gen._verdict({"ci95": [-0.1, 0.2]})
    assert "cannot tell" in gen._verdict({"ci95": None})


def test_committed_results_are_small():
    folder = ROOT / "experiments" / "results"
    total = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    assert total < 5_000_000


def test_a_partial_replay_keeps_the_units_an_earlier_one_checked(tmp_path):
    from experiments.runner.replay import _merged_replay

    path = tmp_path / "replay.json"
    units = {"a": {}, "b": {}, "c": {}}
    first = _merged_replay(
        str(path),
        {"a": {"max_rel_diff": 0.0, "over_tol": []}},
        1e-6,
        {"commit": "1" * 40, "started": "t1"},
        units,
    )
    path.write_text(json.dumps(first))
    second = _merged_replay(
        str(path),
        {"b": {"max_rel_diff": 2e-9, "over_tol": []}},
        1e-6,
        {"commit": "2" * 40, "started": "t2"},
        units,
    )
    assert sorted(second["units"]) == ["a", "b"]
    assert second["units"]["a"]["run"] == 0 and second["units"]["b"]["run"] == 1
    assert [r["commit"][0] for r in second["runs"]] == ["1", "2"]
    line = gen.replay_line({"units": units}, second)
    assert "2 of 3 units (`a`, `b`)" in line and "2.0e-09" in line
    assert "(commit `111111111111`, t1): 1 unit(s)" in line
    assert "(commit `222222222222`, t2): 1 unit(s), largest relative" in line
    # a unit no longer in the results, or a replay at another tolerance, is dropped
    path.write_text(json.dumps(second))
    third = _merged_replay(
        str(path), {"c": {"max_rel_diff": 0.0, "over_tol": []}}, 1e-3, {}, {"c": {}}
    )
    assert sorted(third["units"]) == ["c"] and len(third["runs"]) == 1


def test_a_replay_entry_of_numbers_since_recomputed_is_not_kept(tmp_path):
    """An earlier replay checked a unit's numbers as they were (``recorded_sha``);
    once the unit is recomputed (other numbers) the entry no longer speaks for it,
    and a restart that recomputes units prunes their entries at once."""
    from experiments.runner.replay import _merged_replay, unit_sha
    from experiments.runner.store import prune_replay

    (tmp_path / "replay").mkdir()
    path = tmp_path / "replay" / "replay.json"
    old = {"a": {"x": 1.0}, "b": {"x": 2.0}}
    entry = lambda u: {"max_rel_diff": 0.0, "over_tol": [], "recorded_sha": u}  # noqa: E731
    first = _merged_replay(
        str(path),
        {"a": entry(unit_sha(old["a"])), "b": entry(unit_sha(old["b"]))},
        1e-6,
        {"started": "t1"},
        old,
    )
    path.write_text(json.dumps(first))
    new = {"a": {"x": 1.0}, "b": {"x": 2.5}, "c": {"x": 3.0}}  # b recomputed
    second = _merged_replay(str(path), {"c": entry(unit_sha(new["c"]))}, 1e-6, {}, new)
    assert sorted(second["units"]) == ["a", "c"]
    path.write_text(json.dumps(second))
    assert prune_replay(str(tmp_path), ["a", "zz"]) == 1
    assert sorted(json.loads(path.read_text())["units"]) == ["c"]
    assert prune_replay(str(tmp_path)) == 1
    assert json.loads(path.read_text())["units"] == {}


def test_the_replay_line_names_each_replays_cpu_and_its_units_over_tolerance():
    units = {"a": {}, "b": {}, "c": {}}
    replay = {
        "tol": 1e-6,
        "runs": [
            {"commit": "1" * 40, "started": "t1", "cpu": "CPU-A"},
            {"commit": "2" * 40, "started": "t2", "cpu": "CPU-B"},
        ],
        "units": {
            "a": {"max_rel_diff": 0.0, "over_tol": [], "numbers": 3, "run": 0},
            "b": {"max_rel_diff": 0.25, "over_tol": ["x"], "numbers": 3, "run": 1},
            "c": {"max_rel_diff": 1e-9, "over_tol": [], "numbers": 3, "run": 1},
        },
    }
    line = gen.replay_line({"units": units, "provenance": {"cpu": "CPU-A"}}, replay)
    assert "3 of 3 units (every unit), 9 numbers" in line
    # one model name, instruction sets unrecorded: not claimed to be the run's CPU
    assert "on CPU-A, the run's CPU name (instruction sets not recorded)" in line
    assert "difference 0.0e+00, 0 with a number over 1e-06" in line
    assert "on CPU-B, another CPU (commit `222222222222`, t2): 2 unit(s)" in line
    assert "difference 2.5e-01, 1 with a number over 1e-06 (b)" in line
    # a replay under other XLA code generation on the run's CPU says so
    replay["runs"][1] = {**replay["runs"][0], "xla_flags": "--xla_cpu_max_isa=SSE4_2"}
    line = gen.replay_line({"units": units, "provenance": {"cpu": "CPU-A"}}, replay)
    assert "(instruction sets not recorded), with `XLA_FLAGS=" in line


def test_the_replay_line_splits_a_replays_units_by_regime():
    units = {"a": {"regime": "on_policy"}, "b": {"regime": "bf16_engine"}}
    replay = {
        "tol": 1e-6,
        "runs": [{"commit": "1" * 40, "started": "t1", "cpu": "CPU-B"}],
        "units": {
            "a": {"max_rel_diff": 2e-6, "over_tol": ["x"], "numbers": 1, "run": 0},
            "b": {"max_rel_diff": 0.5, "over_tol": ["y"], "numbers": 1, "run": 0},
        },
    }
    line = gen.replay_line({"units": units, "provenance": {"cpu": "CPU-A"}}, replay)
    assert "`bf16_engine`: 1 unit(s), largest 5.0e-01, 1 over 1e-06" in line
    assert "`on_policy`: 1 unit(s), largest 2.0e-06, 1 over 1e-06" in line


def test_the_replay_line_calls_a_cpu_the_runs_only_with_its_instruction_sets():
    units = {"a": {}, "b": {}}
    replay = {
        "tol": 1e-6,
        "runs": [
            {"commit": "1" * 40, "started": "t1", "cpu": "X", "cpu_isa": ["avx2"]},
            {"commit": "2" * 40, "started": "t2", "cpu": "X", "cpu_isa": ["avx512f"]},
        ],
        "units": {
            "a": {"max_rel_diff": 0.0, "over_tol": [], "numbers": 1, "run": 0},
            "b": {"max_rel_diff": 0.0, "over_tol": [], "numbers": 1, "run": 1},
        },
    }
    prov = {"cpu": "X", "cpu_isa": ["avx2"]}
    line = gen.replay_line({"units": units, "provenance": prov}, replay)
    assert "on X, the run's CPU (commit `111111111111`" in line
    assert "on X, another CPU (commit `222222222222`" in line


def test_a_replay_file_without_units_reads_not_replayed():
    """A replay.json whose entries were all pruned (a fresh run) is no replay: the
    line says so instead of counting 0 units."""
    units = {"base/seed0": {"regime": "bf16_engine"}}
    line = gen.replay_line({"units": units}, {"units": {}, "tol": 1e-6, "runs": []})
    assert line.startswith("**Not replayed yet**") and "0 of" not in line

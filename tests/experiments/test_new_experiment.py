"""Adding an experiment, as docs/development.md walks a newcomer through it: one
module with its config, units and unit function, and one report module; the run
loop does the rest (flags, resumable results, provenance, report, ``--json``).

The toy here is built in a temporary folder and run in process; it reads no model
and no rollouts, so it costs a second."""

from __future__ import annotations

import importlib
import json

EXPERIMENT = '''"""A toy experiment: the mean of seeded normal draws, per seed."""

import dataclasses
import sys

import numpy as np

import toy_report as report  # noqa: F401  (the run loop's)
from experiments import runner
from theorycheck.rl import RolloutConfig


@dataclasses.dataclass(frozen=True)
class Config(RolloutConfig):
    out: str = "reports/toy"
    draws: int = 1000

    @classmethod
    def tiny(cls):
        return cls(model="tiny", seeds=3, draws=10)


def units(cfg):
    return [runner.Unit(f"seed{s}", s) for s in cfg.seed_list()]


def generate(ctx, seed, engine):
    raise AssertionError("the toy reads no rollouts")


def run_unit(ctx, cfg, unit):
    x = np.random.default_rng(unit.seed).normal(size=cfg.draws)
    return {"seed": unit.seed, "mean": float(x.mean())}


def main(argv=None):
    return runner.main(sys.modules[__name__], argv)
'''

REPORT = '''"""The toy's report: its summary, markdown and (no) figures."""

from experiments import runner


def summarize(data):
    return {"mean": runner.stat([u["mean"] for u in data["units"].values()])}


def markdown(data, timings):
    mean = data["summary"]["mean"]
    return f"# Toy\\n\\nmean {mean['mean']:.3f} over {mean['n']} seeds\\n"


def figures(out_dir, data):
    pass


def section(data):
    return markdown(data, {})
'''


def test_a_toy_experiment_in_a_new_folder_runs_resumes_and_answers_json(
    tmp_path, monkeypatch, capsys
):
    (tmp_path / "toy.py").write_text(EXPERIMENT)
    (tmp_path / "toy_report.py").write_text(REPORT)
    monkeypatch.syspath_prepend(str(tmp_path))
    toy = importlib.import_module("toy")
    out = tmp_path / "out"
    assert toy.main(["--tiny", "--out", str(out)]) == 0
    data = json.loads((out / "results.json").read_text())
    assert sorted(data["units"]) == ["seed0", "seed1", "seed2"]
    assert data["config"]["draws"] == 10 and data["summary"]["mean"]["n"] == 3
    assert data["provenance"]["seeds"] == [0, 1, 2]
    assert (out / "report.md").read_text().startswith("# Toy")
    capsys.readouterr()

    def computes(*args):
        raise AssertionError("a finished unit was computed again")

    monkeypatch.setattr(toy, "run_unit", computes)  # a restart resumes
    assert toy.main(["--tiny", "--out", str(out), "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["summary"] == data["summary"] and answer["missing_units"] == []
    # its own flag, from its config, with the contract's one line on a bad value
    assert toy.main(["--tiny", "--out", str(out), "--draws", "many"]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1

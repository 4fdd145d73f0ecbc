"""The experiment blocks of README.md and docs/: generated from the committed
``experiments/results/`` by scripts/gen_experiment_tables.py and kept in sync."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path

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
    (res / "sign_agreement").mkdir(parents=True)
    data = json.loads(src.read_text())
    for page in ("README.md", "docs/probes.md", "docs/findings.md", "docs/demo.md"):
        (tmp_path / page).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / page, tmp_path / page)
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

"""The report skeleton: sections in order, a crashing section recorded, provenance."""

from __future__ import annotations

import json

from theorycheck.reproduce import SECTIONS, Section, SectionResult, run_sections


def _ok(out, quick):
    (out / "fig.png").write_bytes(b"\x89PNG")
    return SectionResult(f"quick = {quick}", {"value": 1.5}, ("fig.png",), {"seed": 0})


def _boom(out, quick):
    raise RuntimeError("section exploded")


def test_run_sections_writes_index_with_provenance(tmp_path):
    secs = [Section("a", "First", _ok), Section("b", "Second", _boom)]
    index = run_sections(tmp_path, quick=True, sections=secs)
    assert [s["name"] for s in index["sections"]] == ["a", "b"]
    assert index["sections"][0]["error"] is None
    assert "RuntimeError: section exploded" in index["sections"][1]["error"]
    prov = index["provenance"]
    assert {"commit", "versions", "python", "platform", "started", "finished"} <= set(
        prov
    )
    assert prov["versions"]["jax"] and prov["quick"] is True
    on_disk = json.loads((tmp_path / "index.json").read_text())
    assert on_disk["sections"][0]["data"] == {"value": 1.5}
    md = (tmp_path / "index.md").read_text()
    assert "## First" in md and "![fig.png](fig.png)" in md
    assert "section exploded" in md and "| jax |" in md


def test_sections_are_the_documented_five():
    names = [s.name for s in SECTIONS]
    assert names == ["proofs", "convexity", "rollouts", "probes", "linearization"]


def test_without_the_repository_experiment_sections_say_what_they_need(
    tmp_path, monkeypatch, capsys
):
    # an installed, non-editable package has no experiments/ beside it
    from theorycheck.cli import main
    from theorycheck.reproduce import _subprocess

    monkeypatch.setattr(_subprocess, "ROOT", tmp_path)
    argv = ["reproduce", "--quick", "--section", "probes", "--out", str(tmp_path / "o")]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "experiments/" in err[0] and "clone" in err[0]
    assert not (tmp_path / "o" / "index.md").exists()


def test_one_provenance_record_for_reports_and_experiments():
    # the report and every experiment's results.json write the same record; "dirty"
    # means tracked files differ from HEAD in both (untracked files do not count)
    from experiments import _common
    from theorycheck.reproduce import git_state, provenance

    report = provenance(True)
    cfg = _common.RolloutConfig()
    run = _common.provenance(cfg, seeds=[0, 1])
    state = git_state()
    for key in ("commit", "dirty", "versions", "platform", "cpu_count"):
        assert report[key] == run[key], key
    assert (report["commit"], report["dirty"]) == (state["commit"], state["dirty"])
    assert run["seeds"] == [0, 1] and run["config"]["model"] == "smollm2"
    assert (
        report["load_average_start"] is None or len(report["load_average_start"]) == 3
    )

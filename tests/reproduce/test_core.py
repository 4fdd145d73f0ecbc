"""The report skeleton: sections in order, a crashing section recorded, provenance."""

from __future__ import annotations

import json
import os

import pytest

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


def test_a_reused_out_names_the_files_the_run_did_not_write(tmp_path):
    old = tmp_path / "old_figure.png"
    old.write_bytes(b"from an earlier run")
    (tmp_path / "fig.png").write_bytes(b"rewritten below")
    os.utime(old, (1, 1))
    os.utime(tmp_path / "fig.png", (1, 1))
    index = run_sections(tmp_path, quick=True, sections=[Section("a", "First", _ok)])
    assert index["stale_files"] == ["old_figure.png"]
    md = (tmp_path / "index.md").read_text()
    assert "1 file(s) this run did not write" in md and "`old_figure.png`" in md
    fresh = tmp_path / "fresh"
    assert run_sections(fresh, quick=True, sections=[])["stale_files"] == []
    assert "did not write" not in (fresh / "index.md").read_text()


def test_quick_headings_name_the_model_the_quick_run_used(tmp_path):
    from theorycheck.reproduce import SECTIONS

    by_name = {s.name: s for s in SECTIONS}
    for name in ("probes", "linearization"):
        assert "SmolLM2" in by_name[name].heading(False)
        assert "tiny random model" in by_name[name].heading(True)
    # the quick rollout analysis still runs on SmolLM2
    assert by_name["rollouts"].heading(True) == by_name["rollouts"].heading(False)
    sec = Section("a", "On SmolLM2", _ok, "On the tiny model")
    run_sections(tmp_path, quick=True, sections=[sec])
    md = (tmp_path / "index.md").read_text()
    assert "## On the tiny model" in md and "On SmolLM2" not in md


def test_report_cells_are_rounded_never_raw_floats_or_dicts():
    from theorycheck.reproduce._core import fmt

    assert fmt(0.1 + 0.2) == "0.3"
    assert fmt({"lr": 1.2345678e-6, "seeds": [0, 1]}) == "lr: 1.235e-06; seeds: 0, 1"
    assert fmt(True) == "True" and fmt(3) == "3" and fmt("pg") == "pg"


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
    from experiments import runner
    from theorycheck.reproduce import git_state, provenance

    report = provenance(True)
    cfg = runner.RolloutConfig()
    run = runner.provenance(cfg, seeds=[0, 1])
    state = git_state()
    for key in ("commit", "dirty", "versions", "platform", "cpu_count"):
        assert report[key] == run[key], key
    assert (report["commit"], report["dirty"]) == (state["commit"], state["dirty"])
    assert run["seeds"] == [0, 1] and run["config"]["model"] == "smollm2"
    assert (
        report["load_average_start"] is None or len(report["load_average_start"]) == 3
    )


def test_a_runs_own_output_folder_does_not_make_it_dirty(tmp_path, monkeypatch):
    # a resumed run of committed results rewrites its own folder: that alone is not
    # "dirty"; a change anywhere else still is
    import subprocess

    from theorycheck import _git
    from theorycheck.reproduce import git_state

    def sh(*args):
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    (tmp_path / "code.py").write_text("x = 1\n")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "results.json").write_text("{}\n")
    sh("init", "-q")
    sh("add", ".")
    sh("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init")
    monkeypatch.setattr(_git, "ROOT", tmp_path)
    (tmp_path / "out" / "results.json").write_text('{"units": 1}\n')
    assert git_state()["dirty"] is True
    assert git_state(str(tmp_path / "out"))["dirty"] is False
    (tmp_path / "code.py").write_text("x = 2\n")
    assert git_state(str(tmp_path / "out"))["dirty"] is True


def test_sections_render_through_the_experiments_declared_list(tmp_path):
    # the library renders an experiment's section in a child process from the
    # repository root (the declared list, ``python -m experiments section``): the
    # same markdown as the experiment's report module, without importing it here
    import experiments
    from theorycheck.reproduce._subprocess import ROOT, render

    run_dir = ROOT / "experiments" / "results" / "rollout_analysis"
    text, data = render("rollout_analysis", run_dir)
    assert text == experiments.report("rollout_analysis").section(data)
    with pytest.raises(RuntimeError, match="no experiment 'nope'"):
        render("nope", run_dir)


def test_benchmarks_and_experiments_take_provenance_from_the_base():
    # the one record lives below reproduce: reproduce re-exports it
    from theorycheck import _provenance, reproduce

    assert reproduce.provenance is _provenance.provenance
    assert reproduce.git_state is _provenance.git_state

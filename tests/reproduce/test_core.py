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

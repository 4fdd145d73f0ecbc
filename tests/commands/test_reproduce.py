"""``theorycheck reproduce``: bad input, and the quick main job end to end (slow)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from theorycheck.cli import main


def test_reproduce_bad_section_and_out_are_bad_input(capsys, tmp_path):
    assert main(["reproduce", "--section", "nope", "--out", str(tmp_path)]) == 2
    assert "nope" in capsys.readouterr().err
    f = tmp_path / "file"
    f.write_text("x")
    assert main(["reproduce", "--out", str(f)]) == 2
    assert "is a file" in capsys.readouterr().err


EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "claims"


@pytest.mark.slow
def test_reproduce_quick_writes_the_report(capsys, tmp_path, monkeypatch):
    """Every section of the quick main job, composed into one report. The proofs
    section runs on the example claims: the project's own claims are each decided
    in quick mode by tests/proofs/ (one test per claim), so running all of them
    again here would only repeat those tests."""
    monkeypatch.setenv("THEORYCHECK_PROOFS", str(EXAMPLES))
    assert main(["reproduce", "--quick", "--out", str(tmp_path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    names = ["proofs", "convexity", "rollouts", "probes", "linearization"]
    assert [s["name"] for s in out["sections"]] == names
    assert all(s["error"] is None for s in out["sections"])
    index = json.loads((tmp_path / "index.json").read_text())
    claims = index["sections"][0]["data"]["claims"]
    assert {c["id"] for c in claims} >= {"example.max_prob_at_most_half"}
    for name in ("index.md", "proofs.md", "proofs.png", "convexity.png"):
        assert (tmp_path / name).is_file(), name
    assert (tmp_path / "rollout_analysis" / "results.json").is_file()
    # the probe and LCO sections (one run serves both: each is a tiny-model subprocess)
    sections = {s["name"]: s for s in index["sections"]}
    md = (tmp_path / "index.md").read_text()
    assert "| ntk2 |" in md and "regime `on_policy`" in md
    assert "α (10%)" in md and "Prop. 4.7" in md
    probes, lco = sections["probes"], sections["linearization"]
    assert "--tiny" in probes["config"]["command"]
    assert all("--tiny" in c for c in lco["config"]["commands"])
    assert set(lco["data"]) == {"linearization", "gradient_bounds"}
    for sub in ("sign_agreement", "linearization"):
        assert (tmp_path / sub / "results.json").is_file(), sub
    for f in probes["figures"] + lco["figures"]:
        assert (tmp_path / f).is_file(), f


def test_reproduce_proofs_section_on_the_example_claims(capsys, tmp_path, monkeypatch):
    examples = EXAMPLES
    monkeypatch.setenv("THEORYCHECK_PROOFS", str(examples))
    argv = ["reproduce", "--quick", "--section", "proofs", "--out", str(tmp_path)]
    assert main([*argv, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [s["name"] for s in out["sections"]] == ["proofs"]
    index = json.loads((tmp_path / "index.json").read_text())
    data = index["sections"][0]["data"]
    assert data["counts"] == {"holds": 1, "holds_with_correction": 1}
    assert index["sections"][0]["config"]["proofs"] == str(examples)
    md = (tmp_path / "index.md").read_text()
    assert "example.max_prob_at_most_half" in md and "Correction that holds" in md
    assert (tmp_path / "proofs.png").is_file()

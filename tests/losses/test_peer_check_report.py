"""docs/peer_check.md is the rendering of the committed docs/peer_check.json (the peer
check itself needs torch and the peers' checkouts: scripts/peer_check.py)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _script():
    spec = importlib.util.spec_from_file_location(
        "peer_check", ROOT / "scripts" / "peer_check.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_peer_check_report_is_rendered_from_its_results():
    results = json.loads((ROOT / "docs" / "peer_check.json").read_text())
    assert (ROOT / "docs" / "peer_check.md").read_text() == _script().render(results)
    assert set(results["commits"]) == {"verl", "stable-rl", "skyrl", "trl"}
    assert all(len(c) == 40 for c in results["commits"].values())


def test_peer_check_covers_the_new_rules_and_the_reductions():
    results = json.loads((ROOT / "docs" / "peer_check.json").read_text())
    rules = {r["rule"] for r in results["rows"]}
    assert {"dppo_binary_kl_capped", "gspo_token", "gmpo", "dro", "vespo"} <= rules
    agg = [r for r in results["rows"] if "agg_loss" in r["peer"]]
    assert len(agg) == 10 and all(r["agree"] == r["points"] for r in agg)

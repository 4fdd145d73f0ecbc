"""The claims tables of docs/proofs.md, README.md and docs/findings.md are generated
from the committed ``prove --json`` run (proofs/results/prove.json), which covers every
claim of proofs/."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from theorycheck.claims import discover, verdict_of

from ._helpers import PROOFS

ROOT = Path(__file__).resolve().parents[2]


def _script(name: str):
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        spec = importlib.util.spec_from_file_location(
            name, ROOT / "scripts" / f"{name}.py"
        )
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    return module


gen = _script("gen_claims_table")
docgen = _script("docgen")


def test_generated_claims_blocks_are_current():
    assert docgen.stale_blocks(gen.blocks(), ROOT) == []


def test_committed_run_covers_every_claim_with_its_metadata():
    data = gen.load()
    ran = [c["id"] for c in data["claims"]]
    assert ran == [item.claim.id for item in discover([PROOFS])]
    for c in data["claims"]:
        assert c["quote"] and c["location"] and c["assumptions"], c["id"]
        assert c["verdict"] == verdict_of(c["kind"], c["status"]), c["id"]
    prov = data["provenance"]
    assert prov["commit"] and prov["loadavg_before"] and prov["wall_seconds"] > 0


def test_headline_holds_only_claims_that_fail_as_stated():
    data = gen.load()
    body = gen.summary(data)
    headline = body.split("Fails as stated")[1].split("Not the paper failing")[0]
    for c in data["claims"]:
        listed = f"`{c['id']}`" in headline
        assert listed == (c["verdict"] == "fails as stated"), c["id"]

"""scripts/gen_convexity_table.py: the table it writes, the block it owns, rendered
from the committed results file ``benchmarks/results/convexity_registry.json`` (no
verdict is computed here: the run itself is ``scripts/gen_convexity_table.py --run``
and takes minutes)."""

from __future__ import annotations

import copy
import importlib.util
import json
import pathlib
import sys
import types

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _script():
    sys.path.insert(0, str(ROOT / "scripts"))
    path = ROOT / "scripts" / "gen_convexity_table.py"
    spec = importlib.util.spec_from_file_location("gen_convexity_table", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_table_rows_escape_pipes_and_mark_rules_without_adv():
    gen = _script()
    res = types.SimpleNamespace(verdict="convex", scope="all V >= 2", condition="a|b")
    results = [("sft", None, res, 1.25), ("pg", -1.0, res, 2.0)]
    lines = gen.table(results).splitlines()
    assert lines[2] == "| `sft` | — | convex | all V >= 2 | a\\|b | 1.2 |"
    assert lines[3].startswith("| `pg` | -1 | convex |")
    assert "the slowest is `pg` (Â = -1.0) at 2.0 s" in gen.summary(results, 3.25)


def test_the_page_holds_the_block_the_script_owns():
    gen = _script()
    text = (ROOT / gen.PAGE).read_text()
    assert text.count(f"<!-- BEGIN generated:{gen.BLOCK} -->") == 1
    assert text.count(f"<!-- END generated:{gen.BLOCK} -->") == 1
    import docgen  # scripts/ is on sys.path (_script)

    assert not docgen.stale_blocks(gen.blocks()), (
        "run scripts/gen_convexity_table.py (renders the committed results file)"
    )
    assert gen.main(["--check"]) == 0


def test_the_results_file_has_every_row_and_its_provenance():
    from theorycheck.losses import LOSSES

    gen = _script()
    doc = json.loads(gen.RESULTS.read_text())
    want = [
        (name, adv)
        for name in LOSSES
        for adv in ((1.0, -1.0) if "adv" in LOSSES[name].inputs else (None,))
    ]
    assert [(r["name"], r["adv"]) for r in doc["rows"]] == want
    prov = doc["provenance"]
    for key in ("commit", "dirty", "date_utc", "cpu_count", "jax", "numpy"):
        assert key in prov
    assert prov["load_1min_start"] is not None and prov["load_1min_end"] is not None
    assert prov["settings"] == gen.SETTINGS


def test_the_rendered_block_follows_the_file():
    gen = _script()
    doc = json.loads(gen.RESULTS.read_text())
    changed = copy.deepcopy(doc)
    changed["rows"][0]["verdict"] = "unknown"
    changed["rows"][0]["seconds"] = 99.0
    changed["provenance"]["dirty"] = True
    text = gen.render(changed)
    first = text.splitlines()[2]
    assert "| unknown |" in first and first.endswith("| 99.0 |")
    assert "with uncommitted changes" in text
    assert f"the slowest is `{doc['rows'][0]['name']}`" in text
    assert gen.render(doc) != text

"""scripts/gen_provers_table.py: the block it renders from the committed results file
is current, and the committed run has no verdict that contradicts the hand-derived
truth (the run itself takes minutes: ``--run``)."""

from __future__ import annotations

import importlib.util
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _script(name):
    sys.path.insert(0, str(ROOT / "scripts"))
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_block_is_rendered_from_the_results_file():
    gen, docgen = _script("gen_provers_table"), _script("docgen")
    assert docgen.stale_blocks(gen.blocks(), ROOT) == [], (
        "run scripts/gen_provers_table.py"
    )


def test_the_committed_run_covers_the_corpus_and_is_sound():
    gen = _script("gen_provers_table")
    data = json.loads(gen.RESULTS.read_text())
    specs = [r["spec"] for r in data["rows"]]
    assert sorted(specs) == sorted(s for s, _, _ in gen._specs())
    for r in data["rows"]:
        if r["truth"] is None:
            continue
        for col in ("before", "after"):
            if r[col] in ("convex", "not_convex"):
                assert r[col] == r["truth"], (r["spec"], col)


def test_render_counts_decided_and_wrong_verdicts():
    gen = _script("gen_provers_table")
    row = dict(
        spec="x.py:f",
        params={},
        truth="convex",
        before="unknown",
        before_scope="V = 3",
        after="convex",
        after_scope="all V >= 2",
        by=["composition (DCP)"],
        seconds=1.0,
    )
    data = dict(
        rows=[row, dict(row, after="not_convex", by=["chord"])],
        wall_s=2.0,
        num_starts=64,
        commit="abc",
        load_average=["1", "2", "3"],
    )
    text = gen.render(data)
    assert "0 of 2 decided before (0%), 2 of 2 after (100%)" in text
    assert "0 before, 1 after" in text

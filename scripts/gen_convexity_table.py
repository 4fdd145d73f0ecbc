"""Renders the registry convexity table (block ``convexity-registry`` of
``docs/convexity.md``) from ``benchmarks/results/convexity_registry.json``.

``--run`` computes the results file: ``check_convexity`` on every registered rule with
Â = +1 and Â = -1 (a rule that takes no advantage runs once), q = 1/2 and the
registry defaults otherwise, with :data:`SETTINGS` (V = 3, the CLI's defaults: 512
search starts, ``--timeout 20``, seed 0), all in one process, and records verdict,
scope, convex region and wall time per run, with the run's provenance (commit and
whether the tree had uncommitted changes, date, cores, the 1-minute load average at
start and end, versions, the settings: :mod:`benchmarks._results`). Progress and the
total/slowest time go to stderr. Without ``--run`` (``make docs``) nothing is
computed: the block is rendered from the committed file; ``--check`` (a test runs it)
fails when the page differs from it.

On a busy machine the registry can be split over processes: ``--rows NAME... --save
PART.json`` computes some rules (one process each part, each with its provenance),
``--assemble PART.json...`` writes the results file from the parts, in registry
order.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import docgen  # noqa: E402

PAGE, BLOCK = "docs/convexity.md", "convexity-registry"
RESULTS = docgen.ROOT / "benchmarks" / "results" / "convexity_registry.json"
#: ``check_convexity``'s settings for every row (the CLI's defaults).
SETTINGS = {"vocab": [3], "num_starts": 512, "timeout_s": 20.0, "seed": 0}


def _cell(text) -> str:
    return "—" if not text else str(text).replace("|", "\\|")


def rows(names):
    """``(name, adv, result, seconds)`` per run, in registry order."""
    from theorycheck.convexity import check_convexity
    from theorycheck.losses import LOSSES

    settings = dict(SETTINGS, vocab=tuple(SETTINGS["vocab"]))
    for name in names:
        advs = (1.0, -1.0) if "adv" in LOSSES[name].inputs else (None,)
        for adv in advs:
            params = {} if adv is None else {"adv": adv}
            start = time.perf_counter()
            res = check_convexity(name, params=params, **settings)
            seconds = time.perf_counter() - start
            print(
                f"{name} adv={adv}: {res.verdict} ({res.scope}) {seconds:.1f} s",
                file=sys.stderr,
                flush=True,
            )
            yield name, adv, res, seconds


def table(results) -> str:
    """The markdown table of :func:`rows`' output."""
    lines = [
        "| rule | Â | verdict | scope | convex where | time (s) |",
        "|---|---|---|---|---|---|",
    ]
    for name, adv, res, seconds in results:
        a = "—" if adv is None else f"{adv:+g}"
        lines.append(
            f"| `{name}` | {a} | {res.verdict} | {_cell(res.scope)} | "
            f"{_cell(res.condition)} | {seconds:.1f} |"
        )
    return "\n".join(lines)


def summary(results, total: float, processes: int = 1) -> str:
    name, adv, _, slowest = max(results, key=lambda r: r[3])
    where = (
        "in one process"
        if processes == 1
        else f"(wall clock) in {processes} processes in parallel"
    )
    return (
        f"{len(results)} verdicts in {total:.0f} s {where}; the slowest is "
        f"`{name}` (Â = {adv}) at {slowest:.1f} s"
    )


def run(names, args) -> dict:
    """The results file's content: every row of ``names`` and the provenance."""
    import jax

    from benchmarks import _results

    jax.config.update("jax_enable_x64", True)
    doc = _results.start("convexity_registry", args)
    doc["provenance"]["settings"] = dict(SETTINGS)
    start = time.perf_counter()
    doc["rows"] = [
        {
            "name": name,
            "adv": adv,
            "verdict": str(res.verdict),
            "scope": res.scope,
            "condition": res.condition,
            "seconds": round(seconds, 2),
        }
        for name, adv, res, seconds in rows(names)
    ]
    doc["wall_s"] = round(time.perf_counter() - start, 1)
    doc["processes"] = 1
    return _results.finish(doc)


def assemble(parts: list[dict]) -> dict:
    """One results file from parts run in parallel (registry order; wall clock is
    the longest part's; every part's provenance is kept)."""
    from theorycheck.losses import LOSSES

    order = {name: i for i, name in enumerate(LOSSES)}
    advs = {1.0: 0, -1.0: 1, None: 2}
    doc = dict(parts[0])
    doc["rows"] = sorted(
        (r for p in parts for r in p["rows"]),
        key=lambda r: (order[r["name"]], advs[r["adv"]]),
    )
    doc["wall_s"] = max(p["wall_s"] for p in parts)
    doc["processes"] = len(parts)
    doc["parts"] = [p["provenance"] for p in parts]
    return doc


def _provenance(doc: dict) -> str:
    p = doc["provenance"]
    commit = "unknown commit" if p["commit"] is None else f"commit `{p['commit'][:10]}`"
    if p.get("dirty"):
        commit += " with uncommitted changes"
    parts = doc.get("parts") or [p]
    starts = [q["load_1min_start"] for q in parts]
    ends = [q["load_1min_end"] for q in parts]
    if None in starts + ends:
        load = "load average unknown"
    else:
        load = (
            f"1-minute load average {max(starts):.1f} at start, {max(ends):.1f} at end"
        )
    s = p["settings"]
    return (
        f"measured {p['date_utc']} at {commit}: {p['cpu_count']} cores "
        f"({p['platform']}), {load}; Python {p['python']}, jax {p['jax']}, numpy "
        f"{p['numpy']}; V = {', '.join(map(str, s['vocab']))}, {s['num_starts']} "
        f"search starts, --timeout {s['timeout_s']:g}, seed {s['seed']}"
    )


def render(doc: dict) -> str:
    results = [
        (r["name"], r["adv"], types.SimpleNamespace(**r), r["seconds"])
        for r in doc["rows"]
    ]
    note = summary(results, doc["wall_s"], doc.get("processes", 1))
    return (
        table(results)
        + "\n\nGenerated by `scripts/gen_convexity_table.py` from "
        + f"`benchmarks/results/convexity_registry.json` ({_provenance(doc)}): "
        + f"{note}."
    )


def blocks():
    return {(PAGE, BLOCK): render(json.loads(RESULTS.read_text()))}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--run", action="store_true", help="recompute the results")
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--rows", nargs="+", metavar="NAME", help="with --save")
    parser.add_argument("--save", metavar="PART.json")
    parser.add_argument("--assemble", nargs="+", metavar="PART.json")
    args = parser.parse_args(argv)
    from benchmarks import _results

    if args.rows:
        if not args.save:
            parser.error("--rows needs --save PART.json")
        doc = run(args.rows, args)
        print(summary_line(doc), file=sys.stderr)
        _results.write(args.save, doc)
        return 0
    if args.assemble:
        doc = assemble([json.loads(Path(p).read_text()) for p in args.assemble])
        _results.write(RESULTS, doc)
    elif args.run:
        from theorycheck.losses import LOSSES

        doc = run(list(LOSSES), args)
        print(summary_line(doc), file=sys.stderr)
        _results.write(RESULTS, doc)
    return docgen.main(blocks, ["--check"] if args.check else [])


def summary_line(doc: dict) -> str:
    results = [(r["name"], r["adv"], None, r["seconds"]) for r in doc["rows"]]
    return summary(results, doc["wall_s"], doc.get("processes", 1))


if __name__ == "__main__":
    raise SystemExit(main())

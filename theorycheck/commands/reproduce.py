"""``theorycheck reproduce``: the main job (``make demo``).

Runs, on the embedded SmolLM2 default, the papers' claims (``prove``), the convexity
table over the registry and the rollout analysis; writes ``DIR/index.md`` (tables, PNG
figures, provenance) and ``DIR/index.json``. Exit 0 when the report was written (failing
claims are findings), 1 when a section crashed (recorded in the report), 2 on bad input.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

NAME = "reproduce"
HELP = "the main job: claims, convexity table and rollout analysis, as one report"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--quick",
        action="store_true",
        help="fewer samples, rules and claims sizes (CI)",
    )
    parser.add_argument(
        "--out",
        default="reports",
        metavar="DIR",
        help="output folder (default: reports)",
    )
    parser.add_argument(
        "--section",
        action="append",
        default=[],
        metavar="NAME",
        help="run only this section (repeatable): proofs, convexity, rollouts, probes",
    )


def run(args: argparse.Namespace) -> int:
    from theorycheck._errors import BadInput
    from theorycheck.commands._output import check_output_dir
    from theorycheck.reproduce import SECTIONS, proofs_dir, reproduce

    out = check_output_dir("--out", args.out)  # before any work
    known = {s.name: s for s in SECTIONS}
    for name in args.section:
        if name not in known:
            raise BadInput(f"--section {name!r}: not one of {', '.join(known)}")
    chosen = [s for s in SECTIONS if not args.section or s.name in args.section]
    if any(s.name == "proofs" for s in chosen):
        proofs = proofs_dir()
        if not proofs.is_dir():
            source = (
                "$THEORYCHECK_PROOFS" if os.environ.get("THEORYCHECK_PROOFS") else ""
            )
            raise BadInput(
                f"{source + ' ' if source else ''}{str(proofs)!r}: the proofs folder "
                "does not exist (the proofs section needs it)"
            )
    index = reproduce(out, quick=args.quick, sections=chosen)
    failed = [s for s in index["sections"] if s["error"]]
    for s in failed:
        first = s["error"].splitlines()[0]
        print(
            f"theorycheck reproduce: section {s['name']} failed: {first}",
            file=sys.stderr,
        )
    summary = {
        "out": str(out),
        "index_md": str(out / "index.md"),
        "index_json": str(out / "index.json"),
        "provenance": index["provenance"],
        "sections": [
            {"name": s["name"], "seconds": s["seconds"], "error": s["error"]}
            for s in index["sections"]
        ],
    }
    if args.json:
        print(json.dumps(summary, default=str))
    else:
        for s in index["sections"]:
            state = "FAILED" if s["error"] else "ok"
            print(f"{s['name']:<10} {s['seconds']:7.1f} s  {state}")
        print(f"report: {out / 'index.md'}")
    return 1 if failed else 0

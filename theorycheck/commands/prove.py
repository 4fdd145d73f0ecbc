"""``theorycheck prove``: check the papers' claims (or your own) by several methods.

Discovers module-level :class:`theorycheck.claims.Claim` objects under each PATH
(default ``./proofs``), the way pytest discovers tests, and evaluates them. The exit
code is 0 whenever the claims ran: a claim that *fails* is a finding (its counterexample
is in the output), not an error. Exit 2 on bad input: a path that does not exist, a
module that does not import, an unknown ``--only`` id."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

NAME = "prove"
HELP = "check paper propositions (claims) by at least two independent methods"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        help="claim files or folders (default: ./proofs)",
    )
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="ID",
        help="run only this claim id (repeatable)",
    )
    parser.add_argument(
        "--quick", action="store_true", help="fewer samples, smaller sizes (CI)"
    )
    parser.add_argument(
        "--report",
        metavar="DIR",
        help="also write DIR/proofs.md and DIR/proofs.json",
    )


def _emit_json(obj: dict) -> None:
    """Exactly one JSON object on stdout (claim results are plain, finite JSON)."""
    import json

    print(json.dumps(obj, allow_nan=False))


def run(args: argparse.Namespace) -> int:
    from theorycheck._errors import BadInput
    from theorycheck.claims import run_claims, table_lines, write_report
    from theorycheck.commands._output import flag_names

    paths = args.paths or ["proofs"]
    if args.report is not None and Path(args.report).is_file():
        raise BadInput(f"--report {args.report}: is a file, not a folder")
    with flag_names(only="--only"):
        results = run_claims(paths, only=args.only, quick=args.quick)
    for r in results:
        for m in r.errors:
            print(
                f"theorycheck prove: {r.id}: check {m.name!r} raised {m.error}",
                file=sys.stderr,
            )
    if args.report is not None:
        write_report(results, args.report)
    if args.json:
        _emit_json({"claims": [r.to_json() for r in results]})
        return 0
    print("\n".join(table_lines(results)))
    return 0

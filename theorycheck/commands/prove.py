"""``theorycheck prove``: check the papers' claims (or your own) by several methods.

Discovers module-level :class:`theorycheck.claims.Claim` objects under each PATH
(default: ``$THEORYCHECK_PROOFS``, else ``./proofs`` when it exists, else the
project's own ``proofs/``, so that it works from any folder), the way pytest
discovers tests, and evaluates them. The exit code is 0 whenever the claims ran: a
claim that *fails* is a finding (its counterexample is in the output), not an error.
Exit 2 on bad input: a path that is empty, does not exist or is no ``.py`` file or
folder, a module that does not import, no claims, an unknown ``--only`` id, an
unwritable ``--report`` (checked before any work), ``--remeasure`` with ``--quick``,
and a claim file that does not import. The files are imported and run only in child
processes (:mod:`theorycheck.commands._claim_files`) with a deadline per claim
(``--timeout``), their output captured: a claim that loops, hangs, crashes its
process or calls ``sys.exit`` is ``unknown`` with the reason (one line on stderr),
every other claim is reported and ``--json`` prints one object; a ``print`` never
reaches ``--json``.

An expensive real-checkpoint measurement (``theorycheck.claims.measured``) is read back
from its committed file when its settings and code match; ``--remeasure`` measures
again and rewrites the file; each such check's detail names the source it used.
"""

from __future__ import annotations

import argparse
import json
import sys

NAME = "prove"
HELP = "check paper propositions (claims) by at least two independent methods"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from theorycheck.commands._claim_files import DEFAULT_TIMEOUT_S

    parser.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        help="claim files or folders (default: $THEORYCHECK_PROOFS, else ./proofs "
        "when it exists, else the project's own claims: works from any folder)",
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
        "--remeasure",
        action="store_true",
        help="redo the expensive real-checkpoint measurements and rewrite their "
        "committed files (default: read them back when their settings and code "
        "match)",
    )
    parser.add_argument(
        "--report",
        metavar="DIR",
        help="also write DIR/proofs.md and DIR/proofs.json",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT_S,
        metavar="S",
        help=f"seconds each claim may take (default {DEFAULT_TIMEOUT_S:g}); the "
        "import of the claim files gets 20 s more",
    )


def run(args: argparse.Namespace) -> int:
    from theorycheck._errors import BadInput
    from theorycheck.commands._claim_files import (
        check_claim_paths,
        check_timeout,
        run_claim_files,
    )
    from theorycheck.commands._output import check_output_dir, flag_names
    from theorycheck.reproduce import proofs_dir

    paths = check_claim_paths(args.paths or [str(proofs_dir())])
    check_timeout(args.timeout)
    if args.remeasure and args.quick:
        raise BadInput(
            "--remeasure with --quick: a quick run measures its cheap settings now "
            "and never writes a committed measurement"
        )
    if args.report is not None:
        check_output_dir("--report", args.report)
    with flag_names(only="--only"):
        done = run_claim_files(
            paths,
            only=args.only,
            quick=args.quick,
            remeasure=args.remeasure,
            report=args.report,
            timeout_s=args.timeout,
        )
    if done.output:  # the claim files' own prints: stderr, never stdout
        sys.stderr.write(done.output)
    for claim_id, check, error in done.errors:
        print(
            f"theorycheck prove: {claim_id}: check {check!r} raised {error}",
            file=sys.stderr,
        )
    for claim_id, why in done.stopped:
        print(f"theorycheck prove: {claim_id}: unknown: {why}", file=sys.stderr)
    sys.stderr.flush()
    if args.json:
        print(json.dumps({"claims": done.claims}, allow_nan=False), flush=True)
        return 0
    print("\n".join(done.table), flush=True)
    return 0

"""Command-line entry point: ``theorycheck <command> ...``.

Each command lives in its own module under :mod:`theorycheck.commands` and exposes

* ``NAME`` (the sub-command), ``HELP`` (one line),
* ``add_arguments(parser)`` and ``run(args) -> int``.

Contract (DESIGN.md): ``--json`` prints exactly one JSON object on stdout; exit 0 on
success, 2 on bad input with a one-line error on stderr naming the bad value.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import pkgutil
import sys
from collections.abc import Sequence
from typing import Any

from theorycheck._errors import BadInput


def _command_modules():
    import theorycheck.commands as pkg

    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda i: i.name):
        if info.name.startswith("_"):
            continue
        yield importlib.import_module(f"theorycheck.commands.{info.name}")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse exits 2 already; keep one line
        self.print_usage(sys.stderr)
        print(f"theorycheck: error: {message}", file=sys.stderr)
        raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="theorycheck",
        description="Checks the theory behind RL surrogate losses for LLMs: "
        "symbolically, formally, numerically, and on real checkpoints.",
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for mod in _command_modules():
        p = sub.add_parser(mod.NAME, help=mod.HELP, description=mod.HELP)
        p.add_argument("--json", action="store_true", help="print one JSON object")
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run)
    return parser


def to_jsonable(obj: Any) -> Any:
    """Converts numpy/jax scalars and arrays to plain JSON values (NaN/inf -> null)."""
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if hasattr(obj, "tolist"):
        return to_jsonable(obj.tolist())
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def emit_json(obj: dict) -> None:
    """Prints exactly one JSON object on stdout."""
    print(json.dumps(to_jsonable(obj), allow_nan=False))


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args._run(args) or 0)
    except BadInput as err:
        print(f"theorycheck {args.command}: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())

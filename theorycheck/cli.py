"""Command-line entry point: ``theorycheck <command> ...``.

Each command lives in its own module under :mod:`theorycheck.commands` and exposes

* ``NAME`` (the sub-command), ``HELP`` (one line),
* ``add_arguments(parser)`` and ``run(args) -> int``.

Contract (DESIGN.md): ``--json`` prints exactly one JSON object on stdout; exit 0 on
success, 2 on bad input with ONE line on stderr naming the bad value (argparse errors
included: the usage text is printed only for ``--help``), never a traceback for bad
input. JSON emission lives in :mod:`theorycheck.commands._output`, user code runs
isolated through :mod:`theorycheck.commands._isolate`.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from collections.abc import Sequence

from theorycheck._errors import BadInput
from theorycheck._version import __version__

#: exit status for bad input (argparse uses 2 as well).
EXIT_BAD_INPUT = 2


def _command_modules():
    import theorycheck.commands as pkg

    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda i: i.name):
        if info.name.startswith("_"):
            continue
        yield importlib.import_module(f"theorycheck.commands.{info.name}")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:
        """One line, ``<prog>: error: <message>`` (no usage block), exit 2."""
        text = " ".join(message.split())
        print(
            f"{self.prog}: error: {text} (see {self.prog} --help)",
            file=sys.stderr,
            flush=True,
        )
        raise SystemExit(EXIT_BAD_INPUT)

    def _get_values(self, action, arg_strings):
        # ``--flag=--``: argparse strips the "--" and hands the command an empty
        # list instead of a value (CPython 3.11-3.12); refuse it as a parse error.
        if action.option_strings and action.nargs is None and arg_strings == ["--"]:
            self.error(f"argument {action.option_strings[-1]}: expected one argument")
        return super()._get_values(action, arg_strings)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="theorycheck",
        description="Checks the theory behind RL surrogate losses for LLMs: "
        "symbolically, formally, numerically, and on real checkpoints.",
    )
    parser.add_argument(
        "--version", action="version", version=f"theorycheck {__version__}"
    )
    sub = parser.add_subparsers(
        dest="command", required=True, parser_class=_Parser, metavar="COMMAND"
    )
    for mod in _command_modules():
        p = sub.add_parser(mod.NAME, help=mod.HELP, description=mod.HELP)
        p.add_argument("--json", action="store_true", help="print one JSON object")
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run, _parser=p)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Runs one command; returns its exit status (0 ok, 2 bad input).

    ``--help`` and ``--version`` print on stdout and return 0.
    """
    parser = build_parser()
    try:
        args, extra = parser.parse_known_args(argv)
        if extra:  # said by the command's parser, so the line names the command
            args._parser.error(f"unrecognized arguments: {' '.join(extra)}")
    except SystemExit as stop:  # --help, --version, or a parse error (printed)
        return stop.code if isinstance(stop.code, int) else EXIT_BAD_INPUT
    try:
        return int(args._run(args) or 0)
    except BadInput as err:
        text = " ".join(str(err).split())
        print(f"theorycheck {args.command}: error: {text}", file=sys.stderr, flush=True)
        return EXIT_BAD_INPUT


if __name__ == "__main__":
    raise SystemExit(main())

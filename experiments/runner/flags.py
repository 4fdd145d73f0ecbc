"""Command-line flags of an experiment: one ``--field-name VALUE`` flag per field of
its config dataclass, ``--tiny`` (the class's ``tiny()`` config first; explicit flags
win) and the run loop's own flags."""

from __future__ import annotations

import argparse
import dataclasses

from experiments.runner import distributed
from theorycheck._errors import BadInput


class Parser(argparse.ArgumentParser):
    """argparse whose errors are :class:`BadInput`: one line naming the bad value
    (the usage block only for ``--help``)."""

    def error(self, message: str):
        text = " ".join(message.split())
        raise BadInput(f"{text} (see {self.prog} --help)")


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _bool(text: str) -> bool:
    if text.lower() in ("1", "true", "yes", "on"):
        return True
    if text.lower() in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true/false, got {text!r}")


def _flag_fields(cls):
    """The fields settable from the command line (tuple-valued ones are not)."""
    return [f for f in dataclasses.fields(cls) if not isinstance(f.default, tuple)]


def parse_config(cls, argv, *, prog: str, description: str):
    """``(config, args)`` from ``argv``: one flag per dataclass field, plus ``--tiny``.

    Args:
        cls: a frozen dataclass with defaults and a classmethod ``tiny()``.
        argv: the arguments (None = ``sys.argv[1:]``).
        prog: program name for ``--help``.
        description: help text.

    Returns:
        ``(config, namespace)``.

    Raises:
        BadInput: an unknown flag, a value of the wrong type, a config the
            class refuses.
    """
    p = Parser(prog=prog, description=description)
    p.add_argument(
        "--tiny", action="store_true", help="tiny random model built in code"
    )
    p.add_argument("--fresh", action="store_true", help="discard finished units")
    p.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object on stdout: the results file and the summary",
    )
    p.add_argument(
        "--report-only",
        action="store_true",
        help="write the report from the finished units; compute nothing new",
    )
    p.add_argument(
        "--replay",
        metavar="DIR",
        default=None,
        help="recompute every unit of DIR/results.json from DIR/rollouts.npz and "
        "report the numbers that differ",
    )
    p.add_argument(
        "--replay-units",
        metavar="IDS",
        default=None,
        help="with --replay: only these comma-separated unit ids",
    )
    p.add_argument(
        "--recompute",
        metavar="IDS",
        default=None,
        help="compute these finished units (comma-separated ids) again from the "
        "recorded rollouts, e.g. after a fix; their old numbers and replay entries "
        "are dropped",
    )
    distributed.add_flags(p)
    for f in _flag_fields(cls):
        kind = {bool: _bool, int: int, float: float}.get(type(f.default), str)
        p.add_argument(
            _flag(f.name), type=kind, default=None, help=f"default {f.default!r}"
        )
    args = p.parse_args(argv)
    base = cls.tiny() if args.tiny else cls()
    overrides = {
        f.name: getattr(args, f.name)
        for f in _flag_fields(cls)
        if getattr(args, f.name) is not None
    }
    try:
        return dataclasses.replace(base, **overrides), args
    except (TypeError, ValueError) as err:  # BadInput is a ValueError
        raise BadInput(str(err)) from None


def _ids(raw: str | None, flag: str) -> list[str]:
    """Comma-separated unit ids (an empty one is bad input)."""
    if raw is None:
        return []
    ids = [u.strip() for u in raw.split(",")]
    if not all(ids):
        raise BadInput(f"{flag} {raw!r}: an empty unit id")
    return list(dict.fromkeys(ids))

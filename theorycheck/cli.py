"""Command-line entry point: ``theorycheck <command> ...``.

Each command lives in its own module under :mod:`theorycheck.commands` and exposes

* ``NAME`` (the sub-command), ``HELP`` (one line),
* ``add_arguments(parser)`` and ``run(args) -> int``.

Contract (docs/cli.md): ``--json`` prints exactly one JSON object on stdout; exit 0 on
success, 2 on bad input with ONE line on stderr naming the bad value (argparse errors,
the environment and unusable paths included: the usage text is printed only for
``--help``), 130/143 with one line on SIGINT/SIGTERM, 2 when the answer could not be
written (stdout closed or full); never a traceback for bad input or a signal. JSON
emission lives in :mod:`theorycheck.commands._output`, user code runs isolated through
:mod:`theorycheck.commands._isolate`.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import importlib
import os
import pkgutil
import re
import signal
import sys
import threading
from collections.abc import Sequence

from theorycheck._environment import (
    check_jax_environment,
    check_shadowing,
    safe_streams,
)
from theorycheck._errors import BadInput
from theorycheck._isolation import Interrupted
from theorycheck._version import __version__

#: exit status for bad input (argparse uses 2 as well).
EXIT_BAD_INPUT = 2


def _command_modules():
    import theorycheck.commands as pkg

    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda i: i.name):
        if info.name.startswith("_"):
            continue
        yield importlib.import_module(f"theorycheck.commands.{info.name}")


#: what reads as a value, not a flag, after an option: a negative number, a list that
#: starts with one (``--lengths -1,2``, ``--at -1,0,1``), ``-inf``, ``-nan``. argparse's
#: own rule takes only ``-1`` and ``-.5`` (``--adv -1e3`` was "expected one argument").
_NEGATIVE_VALUE = re.compile(r"^-(\.?\d|inf(inity)?$|nan$)", re.IGNORECASE)


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = _NEGATIVE_VALUE

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


def _check_leading_options(parser: argparse.ArgumentParser, argv: list[str]) -> None:
    """An option before COMMAND that ``theorycheck`` itself does not take is named
    (argparse would only say that COMMAND is missing)."""
    own = {s for a in parser._actions for s in a.option_strings}
    for arg in argv:
        if not arg.startswith("-") or arg == "-":
            return  # the command (or a stray value argparse will name)
        if arg == "--":
            return
        if arg.split("=", 1)[0] not in own:
            parser.error(
                f"unrecognized option {arg!r} before COMMAND (a command's options "
                "go after it)"
            )


def _single_options(parser: argparse.ArgumentParser) -> dict[str, str]:
    """Option string -> its flag, for the options that keep one value (``--p``,
    ``--prompt``; not ``--set``, ``--only`` or switches)."""
    return {
        s: a.option_strings[-1]
        for a in parser._actions
        if type(a) is argparse._StoreAction
        for s in a.option_strings
    }


def _check_repeats(parser: argparse.ArgumentParser, argv: Sequence[str]) -> None:
    """A one-value option given twice is refused: argparse would keep the last one
    silently (``--p 0.5 --p 0.6``)."""
    single = _single_options(parser)
    seen: set[str] = set()
    for arg in argv:
        if arg == "--":
            return
        name = arg.split("=", 1)[0]
        if not name.startswith("--"):
            continue
        hits = {f for s, f in single.items() if s == name} or {
            f for s, f in single.items() if s.startswith(name)
        }
        if len(hits) != 1:
            continue
        flag = hits.pop()
        if flag in seen:
            parser.error(f"argument {flag}: given twice; give it once")
        seen.add(flag)


def _say(command: str | None, text: str) -> None:
    """One line on stderr: ``theorycheck[ COMMAND]: error: TEXT``."""
    who = f"theorycheck {command}" if command else "theorycheck"
    line = " ".join(str(text).split())
    try:
        print(f"{who}: error: {line}", file=sys.stderr, flush=True)
    except (OSError, ValueError, AttributeError):  # stderr closed too
        pass  # the exit status still says it


def _parse(argv: list[str]) -> argparse.Namespace | int:
    """The parsed arguments, or the exit status of ``--help``, ``--version`` or a
    parse error (printed)."""
    parser = build_parser()
    try:
        _check_leading_options(parser, argv)
        args, extra = parser.parse_known_args(argv)
        if extra:  # said by the command's parser, so the line names the command
            args._parser.error(f"unrecognized arguments: {' '.join(extra)}")
        _check_repeats(args._parser, argv[argv.index(args.command) + 1 :])
    except SystemExit as stop:  # --help, --version, or a parse error (printed)
        return stop.code if isinstance(stop.code, int) else EXIT_BAD_INPUT
    return args


def _run(args: argparse.Namespace) -> int:
    """The command, its bad input and its storage errors as one line and exit 2."""
    try:
        check_jax_environment()
        return int(args._run(args) or 0)
    except BadInput as err:
        _say(args.command, str(err))
    except RecursionError:
        _say(args.command, "the input is nested too deeply")
    except OSError as err:
        if err.filename is None and err.errno not in _WRITE_ERRORS:
            raise  # neither a path of the user's nor a stream: a bug, with traceback
        _say(args.command, _os_error_text(err))
    return EXIT_BAD_INPUT


#: what writing to a closed, full or broken stream raises (no file name attached).
_WRITE_ERRORS = frozenset(
    {errno.EPIPE, errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EBADF, errno.EFBIG}
)


def _os_error_text(err: OSError) -> str:
    if err.filename is None:  # a write to stdout: what is left of it is dropped
        _stdout_broken()
        return f"the answer could not be written to stdout ({err.strerror or err})"
    name = os.fsdecode(err.filename)
    shown = name if len(name) <= 120 else name[:60] + "..." + name[-40:]
    return f"{shown!r}: {err.strerror or err}"


def _stdout_broken() -> bool:
    """Whether stdout refuses what was written to it (closed, full, a broken pipe);
    stdout is then pointed at /dev/null, so that the exit's own flush is quiet."""
    try:
        sys.stdout.flush()
        return False
    except (OSError, ValueError):
        pass
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass
    return True


def _interrupt(signum: int, frame) -> None:
    """SIGINT/SIGTERM -> :class:`Interrupted`, once: a second signal during the
    clean-up is ignored, so no traceback can come from it."""
    for sig in _SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    raise Interrupted(signum)


_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def _signals_interrupt():
    """SIGINT and SIGTERM raise :class:`Interrupted` in the main thread while a
    command runs (harnesses kill their children in their ``finally``)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = {sig: signal.signal(sig, _interrupt) for sig in _SIGNALS}
    try:
        yield
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


def _dispatch(argv: list[str], named: list[str]) -> int:
    """Checks the environment, parses ``argv`` and runs the command (its name is
    appended to ``named``); the exit status."""
    try:
        check_shadowing()  # before any command module imports numpy or jax
    except BadInput as err:
        _say(None, str(err))
        return EXIT_BAD_INPUT
    args = _parse(argv)
    if isinstance(args, int):
        return args
    named.append(args.command)
    return _run(args)


def main(argv: Sequence[str] | None = None) -> int:
    """Runs one command; returns its exit status: 0 ok, 2 bad input (one line on
    stderr), 128 + the signal's number on SIGINT (130) or SIGTERM (143), 2 when the
    answer could not be written (stdout closed or full).

    ``--help`` and ``--version`` print on stdout and return 0. Run as the program
    (``argv`` is ``None``), a signal ends the process at once after that line (no
    interpreter shutdown that could meet half-torn-down threads).
    """
    as_program = argv is None
    argv = sys.argv[1:] if argv is None else list(argv)
    safe_streams()
    if sys.stdout is None:
        _say(None, "stdout is closed: the answer could not be written")
        return EXIT_BAD_INPUT
    named: list[str] = []  # the command, once parsed (for the interrupt's line)
    try:
        with _signals_interrupt():
            code = _dispatch(argv, named)
    except KeyboardInterrupt as err:  # Interrupted (SIGINT/SIGTERM) or a Ctrl-C
        command = named[0] if named else None
        signum = getattr(err, "signum", signal.SIGINT)
        _say(command, f"interrupted by {signal.Signals(signum).name}")
        code = 128 + signum
        if as_program:
            _stdout_broken()  # flushes what was written
            os._exit(code)
        return code
    if _stdout_broken():
        _say(named[0] if named else None, "the answer could not be written to stdout")
        return EXIT_BAD_INPUT
    return code


if __name__ == "__main__":
    raise SystemExit(main())

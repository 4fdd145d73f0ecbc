"""The error contract of every command, kept by fuzzing (issue 11).

For every command: malformed numbers, shapes, dtypes, files, paths and user loss files
give exit 2 with ONE stderr line naming the value, never a traceback; every run is
bounded; stdout is empty on exit 2 and one JSON object with ``--json`` on exit 0.

Adding a command to the contract is one entry in :data:`VALID` (a valid command line):
the generic tests then fuzz every flag argparse knows for it, drop its required flags
and add unknown ones. :func:`test_every_command_has_a_contract_entry` fails until the
entry exists. Commands are run in-process through ``theorycheck.cli.main``; user loss
files run in a child process (the isolation under test), a few cases as a subprocess.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.commands._contract import (
    FUZZ,
    ODD_NUMBERS,
    ODD_TEXT,
    check_contract,
    run_cli,
)
from theorycheck import __version__
from theorycheck.cli import build_parser

CLAIMS = str(Path(__file__).resolve().parents[2] / "examples" / "claims")

#: one valid ``--json`` command line per command (add new commands here).
VALID = {
    "audit": lambda f: ["audit", f["batch"], "--rules", "ppo", "--json"],
    "coefficient": lambda f: [
        *("coefficient", "ppo", "--p", "0.4", "--q", "0.5", "--adv", "1", "--json")
    ],
    "conventions": lambda f: ["conventions", "--batch-shape", "1,2,4", "--json"],
    "convexity": lambda f: [
        *("convexity", "sft", "--at", "0,1,2", "--sampled", "0", "--json")
    ],
    "logits": lambda f: [
        *("logits", "--model", f["model"], "--prompt", "the cat", "--top", "3"),
        "--json",
    ],
    "predict": lambda f: [
        *("predict", "--behavior", "0.5,0.3,0.2", "--policy", "0.2,0.3,0.5"),
        *("--sampled", "0", "--adv", "1", "--json"),
    ],
    "prove": lambda f: ["prove", CLAIMS, "--quick", "--json"],
    "reproduce": lambda f: ["reproduce", "--json"],
}
#: commands whose valid line is too long to run here (the main job): the fuzz only
#: adds bad flags to it, which are refused before any work.
NOT_RUN = {"reproduce"}
#: options the fuzz leaves alone: a value they accept starts long work or writes
#: files where the tests run.
UNFUZZED = {"prove": {"--report"}, "reproduce": {"--out"}}


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    action = next(
        a for a in parser._actions if isinstance(a, argparse._SubParsersAction)
    )
    return dict(action.choices)


def _options(command: str) -> list[argparse.Action]:
    """The options of ``command`` that take one value."""
    return [
        a
        for a in _subparsers()[command]._actions
        if a.option_strings and a.nargs is None and a.const is None
        if not isinstance(a, (argparse._HelpAction, argparse._StoreTrueAction))
    ]


def _replace(argv: list[str], flag: str, value: str, *, joined: bool) -> list[str]:
    """``argv`` with ``flag``'s value replaced (or the flag added)."""
    out = list(argv)
    if flag in out:
        i = out.index(flag)
        del out[i : i + 2]
    return out + ([f"{flag}={value}"] if joined else [flag, value])


def _not(convert):
    def fails(text: str) -> bool:
        try:
            convert(text)
        except (ValueError, OverflowError):
            return True
        return False

    return fails


def malformed(action: argparse.Action):
    """Strings that argparse refuses for ``action``, and odd ones it accepts."""
    if action.choices is not None:
        return ODD_TEXT.filter(lambda t: t not in action.choices)
    if action.type is float:
        return (
            st.sampled_from(["", "x", "1,2", "0x10", "1e", "--", "1..2", "1_0e"])
            | ODD_TEXT.filter(_not(float))
            | ODD_NUMBERS
        )
    if action.type is int:
        return (
            st.sampled_from(["1.5", "1e3", "", "x", "0x10", "nan"])
            | st.integers(-(10**30), 10**30).map(str)
            | ODD_TEXT.filter(_not(int))
        )
    return ODD_TEXT | ODD_NUMBERS


# ------------------------------------------------------------------ every command


def test_every_command_has_a_contract_entry():
    assert set(VALID) == set(_subparsers()), "add the command to VALID"


@pytest.mark.parametrize("command", sorted(set(VALID) - NOT_RUN))
def test_the_valid_line_passes(files, command):
    check_contract(VALID[command](files), expect=0)


@pytest.mark.parametrize("command", sorted(VALID))
@FUZZ
@given(data=st.data())
def test_every_flag_refuses_malformed_values(files, command, data):
    options = [
        a
        for a in _options(command)
        if a.option_strings[-1] not in UNFUZZED.get(command, ())
    ]
    action = data.draw(st.sampled_from(options), label="option")
    flag = action.option_strings[-1]
    value = data.draw(malformed(action), label="value")
    joined = data.draw(st.booleans(), label="--flag=value")
    argv = _replace(VALID[command](files), flag, value, joined=joined)
    check_contract(argv, names=(flag, value))


@pytest.mark.parametrize("command", sorted(VALID))
def test_missing_and_unknown_flags_are_one_line(files, command):
    base = VALID[command](files)
    for action in _options(command):
        if action.required:
            flag = action.option_strings[-1]
            argv = _replace(base, flag, "", joined=False)[:-2]
            check_contract(argv, names=(flag,), expect=2)
    check_contract([*base, "--no-such-flag"], names=("--no-such-flag",), expect=2)
    check_contract([*base, "--no-such", "1"], names=("--no-such",), expect=2)


@pytest.mark.parametrize("command", sorted(VALID))
def test_help_prints_usage_on_stdout(command):
    res = run_cli([command, "--help"])
    assert res.code == 0 and res.out.startswith("usage: theorycheck") and not res.err


def test_version_and_no_command():
    res = run_cli(["--version"])
    assert (res.code, res.out.strip(), res.err) == (0, f"theorycheck {__version__}", "")
    check_contract([], names=("COMMAND", "command"), expect=2)
    check_contract(["nope"], names=("'nope'",), expect=2)


def test_version_as_a_subprocess():
    proc = subprocess.run(
        [sys.executable, "-m", "theorycheck", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    )
    assert (proc.returncode, proc.stdout.strip()) == (0, f"theorycheck {__version__}")


# ------------------------------------------------------------------- meta-test


class _Broken:
    """A command that breaks the contract in every way the checker must catch."""

    NAME = "broken"
    HELP = "breaks the contract on purpose"

    @staticmethod
    def add_arguments(parser):
        parser.add_argument("--mode", required=True)

    @staticmethod
    def run(args):
        from theorycheck._errors import BadInput

        if args.mode == "raise":
            raise ValueError("not a BadInput: a traceback")
        if args.mode == "two-lines":
            print("first\nsecond", file=sys.stderr)
            return 2
        if args.mode == "not-json":
            print("plain text")
            return 0
        if args.mode == "nan":
            print(json.dumps({"value": float("nan")}))
            return 0
        if args.mode == "null":
            print(json.dumps({"value": None}))
            return 0
        if args.mode == "exit-1":
            return 1
        if args.mode == "stdout-on-error":
            print("{}")
            raise BadInput("--mode stdout-on-error: refused")
        if args.mode == "vague":
            raise BadInput("something is wrong")
        print(json.dumps({"value": 1.0}))
        return 0


@pytest.mark.parametrize(
    "mode",
    [
        "raise",
        "two-lines",
        "not-json",
        "nan",
        "null",
        "exit-1",
        "stdout-on-error",
        "vague",
    ],
)
def test_meta_the_checker_catches_a_broken_handler(monkeypatch, mode):
    import theorycheck.cli as cli

    real = cli._command_modules
    monkeypatch.setattr(cli, "_command_modules", lambda: [*real(), _Broken])
    argv = ["broken", "--mode", mode, "--json"]
    with pytest.raises(AssertionError):
        check_contract(argv, names=("--mode",), required_numbers=("value",))
    check_contract(["broken", "--mode", "ok", "--json"], required_numbers=("value",))

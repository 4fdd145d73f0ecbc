"""The CLI's error contract as one checker (used by ``test_contract.py``).

docs/design.md: exit 0 on success, 2 on bad input with ONE line on stderr naming the bad
value, never a traceback; with ``--json`` stdout holds exactly one JSON object (and
nothing at all on exit 2). Every run is bounded in time.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import time
import traceback
from collections.abc import Sequence
from dataclasses import dataclass

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from theorycheck.cli import main

#: hypothesis settings of the fuzz tests: 10 examples each keeps the suite in the CI
#: budget; ``THEORYCHECK_FUZZ_EXAMPLES=200`` fuzzes deeper locally.
FUZZ = settings(
    max_examples=int(os.environ.get("THEORYCHECK_FUZZ_EXAMPLES", "10")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
#: odd text: any code point, a lone surrogate (a non-UTF-8 argv byte), NUL, newline.
ODD_TEXT = st.text(
    st.characters(exclude_categories=("Cs",)) | st.sampled_from("\udc80\x00\n"),
    max_size=12,
)
ODD_NUMBERS = st.sampled_from(
    ["nan", "inf", "-inf", "1e308", "1e999", "-1e308", "5e-324", "1e-320", "-0"]
)

#: a run slower than this breaks the "bounded" promise (generous: shared CPUs).
TIME_LIMIT_S = 120.0


@dataclass(frozen=True)
class Outcome:
    """What one in-process run of ``theorycheck ARGV`` did."""

    argv: tuple[str, ...]
    code: int | None
    out: str
    err: str
    seconds: float
    crash: str | None  # the traceback of an exception that escaped main()


def run_cli(argv: Sequence[str]) -> Outcome:
    """Runs ``main(argv)`` in this process with stdout/stderr captured."""
    out, err = io.StringIO(), io.StringIO()
    start = time.monotonic()
    code, crash = None, None
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(argv))
        except BaseException:  # noqa: BLE001 -- whatever escapes is the finding
            crash = traceback.format_exc()
    return Outcome(
        tuple(argv),
        code,
        out.getvalue(),
        err.getvalue(),
        time.monotonic() - start,
        crash,
    )


def _no_constants(name: str):
    raise ValueError(f"non-JSON constant {name}")


def check_contract(
    argv: Sequence[str],
    *,
    names: Sequence[str] = (),
    expect: int | None = None,
    required_numbers: Sequence[str] = (),
) -> Outcome:
    """Runs ``argv`` and asserts the contract; returns the outcome.

    Args:
        argv: the command line (without the program name).
        names: on exit 2, stderr must contain at least one of these (the bad
            value, or the flag or file that carried it).
        expect: the exit status required (``None``: 0 or 2).
        required_numbers: on exit 0 with ``--json``, top-level keys that must hold
            a number (not ``null``: no silent NaN).
    """
    res = run_cli(argv)
    shown = f"theorycheck {' '.join(map(repr, argv))}"
    assert res.crash is None, f"{shown} raised instead of exiting:\n{res.crash}"
    assert res.code in (0, 2), f"{shown}: exit {res.code}, stderr {res.err!r}"
    if expect is not None:
        assert res.code == expect, f"{shown}: exit {res.code}, stderr {res.err!r}"
    assert "Traceback" not in res.err, f"{shown}: traceback on stderr:\n{res.err}"
    assert res.seconds < TIME_LIMIT_S, f"{shown}: took {res.seconds:.1f} s"
    if res.code == 2:
        assert res.out == "", f"{shown}: exit 2 but stdout {res.out[:200]!r}"
        lines = res.err.splitlines()
        assert len(lines) == 1 and res.err.endswith("\n"), (
            f"{shown}: exit 2 needs ONE stderr line, got {res.err!r}"
        )
        assert lines[0].startswith("theorycheck"), f"{shown}: {lines[0]!r}"
        if names:
            forms = [
                f
                for n in map(str, names)
                for f in (n, repr(n)[1:-1], n.strip(), repr(n.strip())[1:-1])
            ]
            assert any(f in res.err for f in forms), (
                f"{shown}: the error {lines[0]!r} names none of {list(names)!r}"
            )
    elif "--json" in argv and "--help" not in argv:
        assert res.out.count("\n") == 1, f"{shown}: stdout is not one line"
        try:
            obj = json.loads(res.out, parse_constant=_no_constants)
        except ValueError as err:
            raise AssertionError(f"{shown}: stdout is not JSON ({err})") from None
        assert isinstance(obj, dict), f"{shown}: stdout is not a JSON object"
        for key in required_numbers:
            value = obj.get(key)
            assert isinstance(value, (int, float)) and math.isfinite(value), (
                f"{shown}: {key} = {value!r} (silent NaN/inf?)"
            )
    return res

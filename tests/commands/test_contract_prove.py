"""The error contract of ``prove`` and ``reproduce`` with misbehaving claim files and
output folders: every case exits 2 with one stderr line naming the file (and claim),
never a hang, a silent exit 0, a traceback or the user's text in ``--json``.

Claim files run in a child process (``commands/_claim_files``), so each case here
starts one; the deadlines are short (``--timeout``) to keep the suite fast.
"""

from __future__ import annotations

import json
import textwrap
import time
from pathlib import Path

import pytest

from tests.commands._contract import check_contract, run_cli

EXAMPLES = str(Path(__file__).resolve().parents[2] / "examples" / "claims")
HEAD = "from theorycheck.claims import Check, CheckResult, Claim, Method, Outcome\n"


def _claim(check_body: str, *, top: str = "") -> str:
    """A file with a claim that passes (``a.first``), then ``b.bad`` whose one
    check runs ``check_body``."""
    body = textwrap.indent(check_body, "    ")
    return (
        HEAD
        + "import os, sys, time\n"
        + top
        + "\ndef _ok():\n    return CheckResult(Outcome.PASS, 'ok')\n"
        + f"def _check():\n{body}\n"
        + "A = Claim('a.first', 's', 'DERIVED', 'st', "
        + "(Check('ok', Method.NUMERIC, _ok),))\n"
        + "B = Claim('b.bad', 's', 'DERIVED', 'st', "
        + "(Check('bad', Method.NUMERIC, _check),))\n"
    )


#: name -> (file text, words the one error line must contain)
BAD_FILES = {
    "exit-at-import": (HEAD + "import sys\nsys.exit(0)\n", ["sys.exit(0)", "imported"]),
    "exit3-at-import": (HEAD + "raise SystemExit(3)\n", ["sys.exit(3)"]),
    "os-exit-at-import": (HEAD + "import os\nos._exit(0)\n", ["exited with status 0"]),
    "kill-at-import": (
        HEAD + "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n",
        ["SIGKILL"],
    ),
    "raise-at-import": (HEAD + "1 / 0\n", ["ZeroDivisionError"]),
    "syntax-error": ("def (:\n", ["SyntaxError"]),
    "null-bytes": ("x = 1\x00\n", ["cannot import"]),
    "no-claims": ("x = 1\n", ["no claims found"]),
    "exit-in-check": (_claim("sys.exit(0)"), ["'b.bad'", "sys.exit(0)"]),
    "os-exit-in-check": (_claim("os._exit(0)"), ["'b.bad'", "exited with status 0"]),
    "interrupt-in-check": (
        _claim("raise KeyboardInterrupt"),
        ["'b.bad'", "KeyboardInterrupt"],
    ),
    "loop-in-check": (_claim("while True:\n    pass"), ["'b.bad'", "deadline"]),
    "sleep-in-check": (_claim("time.sleep(3600)"), ["'b.bad'", "deadline"]),
    "duplicate-id": (
        HEAD
        + "def _ok():\n    return CheckResult(Outcome.PASS, 'ok')\n"
        + "C = (Check('o', Method.NUMERIC, _ok),)\n"
        + "A = Claim('a.same', 's', 'DERIVED', 'st', C)\n"
        + "B = Claim('a.same', 's', 'DERIVED', 'x', C)\n",
        ["a.same"],
    ),
}


@pytest.mark.parametrize("name", sorted(BAD_FILES))
def test_misbehaving_claim_files_are_one_line(tmp_path, name):
    text, words = BAD_FILES[name]
    f = tmp_path / f"{name.replace('-', '_')}.py"
    f.write_text(text)
    res = check_contract(
        ["prove", str(f), "--timeout", "2", "--json"], names=(f.name,), expect=2
    )
    for word in words:
        assert word in res.err, (name, res.err)


def test_a_loop_at_import_is_stopped_at_the_import_deadline(tmp_path):
    f = tmp_path / "spins.py"
    f.write_text(HEAD + "while True:\n    pass\n")
    start = time.monotonic()
    res = check_contract(
        ["prove", str(f), "--timeout", "1"], names=("spins.py",), expect=2
    )
    assert "importing" in res.err and "21 s" in res.err
    assert time.monotonic() - start < 60


def test_prints_never_reach_json_stdout(tmp_path):
    f = tmp_path / "chatty.py"
    f.write_text(
        _claim(
            "print('from the check')\n"
            "os.write(1, b'raw fd 1\\n')\n"
            "return CheckResult(Outcome.PASS, 'ok')",
            top="print('at import')",
        )
    )
    res = check_contract(["prove", str(f), "--json"], expect=0)
    out = json.loads(res.out)
    assert [c["id"] for c in out["claims"]] == ["a.first", "b.bad"]
    for text in ("at import", "from the check", "raw fd 1"):
        assert text in res.err and text not in res.out


def test_a_claim_that_runs_past_its_deadline_names_the_claim_not_the_first(tmp_path):
    f = tmp_path / "slow.py"
    f.write_text(_claim("time.sleep(3600)"))
    res = check_contract(["prove", str(f), "--timeout", "1.5"], expect=2)
    assert "claim 'b.bad'" in res.err and "--timeout 1.5" in res.err


@pytest.mark.parametrize(
    "path", ["", " ", "missing.py", "DIR/notes.txt", "/dev/null", "NUL\x00.py"]
)
def test_bad_paths_are_refused_before_a_process_starts(tmp_path, path):
    if path.startswith("DIR/"):
        (tmp_path / "notes.txt").write_text("x")
        path = str(tmp_path / "notes.txt")
    elif path == "missing.py":
        path = str(tmp_path / "missing.py")
    res = check_contract(["prove", path], names=(path,), expect=2)
    assert res.seconds < 5.0


def test_an_empty_folder_has_no_claims(tmp_path):
    check_contract(["prove", str(tmp_path)], names=("no claims found",), expect=2)


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "1e999", "86401"])
def test_prove_timeout_values(value):
    check_contract(
        ["prove", EXAMPLES, "--timeout", value], names=("--timeout",), expect=2
    )


def _unwritable(tmp_path: Path) -> str:
    """A folder that cannot be created, even by root: below a regular file."""
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    return str(blocker / "out")


@pytest.mark.parametrize("kind", ["under-a-file", "a-file", "empty", "proc"])
def test_prove_report_is_checked_before_any_work(tmp_path, kind):
    report = {
        "under-a-file": _unwritable(tmp_path),
        "a-file": str(tmp_path / "f.txt"),
        "empty": "",
        "proc": "/proc/theorycheck-report",
    }[kind]
    if kind == "a-file":
        Path(report).write_text("x")
    res = check_contract(
        ["prove", EXAMPLES, "--report", report], names=("--report",), expect=2
    )
    assert res.seconds < 5.0  # refused before the claims ran


@pytest.mark.parametrize("kind", ["under-a-file", "empty", "proc", "nul"])
def test_reproduce_out_is_checked_before_any_work(tmp_path, kind):
    out = {
        "under-a-file": _unwritable(tmp_path),
        "empty": "",
        "proc": "/proc/theorycheck-out",
        "nul": "out\x00dir",
    }[kind]
    res = check_contract(["reproduce", "--out", out], names=("--out",), expect=2)
    assert res.seconds < 5.0


def test_reproduce_with_a_missing_proofs_folder_is_bad_input(tmp_path, monkeypatch):
    missing = tmp_path / "no-proofs"
    monkeypatch.setenv("THEORYCHECK_PROOFS", str(missing))
    argv = ["reproduce", "--section", "proofs", "--out", str(tmp_path / "out")]
    check_contract(argv, names=(str(missing),), expect=2)
    assert not (tmp_path / "out").exists()


def test_the_examples_still_prove_through_the_child():
    res = run_cli(["prove", EXAMPLES, "--quick", "--json"])
    assert res.code == 0 and res.err == ""
    got = {c["id"]: c["status"] for c in json.loads(res.out)["claims"]}
    assert got == {
        "example.log_softmax_gradient": "holds",
        "example.max_prob_at_most_half": "holds_with_correction",
    }

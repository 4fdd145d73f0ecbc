"""The error contract of ``prove`` and ``reproduce`` with misbehaving claim files and
output folders: a file that does not import exits 2 with one stderr line naming the
file, never a hang, a silent exit 0, a traceback or the user's text in ``--json``; a
claim that misbehaves (exits, crashes its process, hangs) is ``unknown`` with the
reason, and every other claim is still reported.

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
    check runs ``check_body``, then ``c.after`` (passes)."""
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
        + "C = Claim('c.after', 's', 'DERIVED', 'st', "
        + "(Check('ok', Method.NUMERIC, _ok), Check('ok2', Method.SYMBOLIC, _ok)))\n"
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
    "duplicate-id": (
        HEAD
        + "def _ok():\n    return CheckResult(Outcome.PASS, 'ok')\n"
        + "C = (Check('o', Method.NUMERIC, _ok),)\n"
        + "A = Claim('a.same', 's', 'DERIVED', 'st', C)\n"
        + "B = Claim('a.same', 's', 'DERIVED', 'x', C)\n",
        ["a.same"],
    ),
}


#: name -> (the check's body, words the claim's reason must contain); the claims
#: that end by themselves get a deadline the others never reach under load.
BAD_CLAIMS = {
    "exit-in-check": ("sys.exit(0)", ["sys.exit(0)"]),
    "exit3-in-check": ("raise SystemExit(3)", ["sys.exit(3)"]),
    "os-exit-in-check": ("os._exit(0)", ["exited with status 0"]),
    "kill-in-check": ("os.kill(os.getpid(), 9)", ["SIGKILL"]),
    "interrupt-in-check": ("raise KeyboardInterrupt", ["KeyboardInterrupt"]),
    "loop-in-check": ("while True:\n    pass", ["deadline", "--timeout 4"]),
    "sleep-in-check": ("time.sleep(3600)", ["deadline", "--timeout 4"]),
}


def _survives(res, words) -> dict:
    """The run reported every claim; ``b.bad`` is unknown with the reason."""
    claims = {c["id"]: c for c in json.loads(res.out)["claims"]}
    assert list(claims) == ["a.first", "b.bad", "c.after"]
    bad = claims["b.bad"]
    assert bad["status"] == "unknown" and bad["methods"] == []
    for word in words:
        assert word in bad["reason"], (words, bad["reason"])
        assert word in res.err
    assert "reason" not in claims["a.first"] and "reason" not in claims["c.after"]
    assert claims["c.after"]["status"] == "holds"
    return claims


@pytest.mark.parametrize("name", sorted(BAD_CLAIMS))
def test_a_misbehaving_claim_is_unknown_and_the_others_are_reported(tmp_path, name):
    body, words = BAD_CLAIMS[name]
    f = tmp_path / f"{name.replace('-', '_')}.py"
    f.write_text(_claim(body))
    timeout = "4" if "deadline" in words else "60"
    res = check_contract(["prove", str(f), "--timeout", timeout, "--json"], expect=0)
    _survives(res, words)
    assert "theorycheck prove: b.bad: unknown: " in res.err


def _gone(pid: int) -> bool:
    """No such process (or a zombie about to be reaped)."""
    for _ in range(50):
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state == "Z":
            return True
        time.sleep(0.1)
    return False


@pytest.mark.parametrize("then", ["hang", "return"])
def test_a_claims_own_session_child_is_killed_with_it(tmp_path, then):
    """A check starts a child in a session of its own (outside every process
    group of the run), then hangs or returns: the child does not outlive the claim."""
    if not Path("/proc/self/stat").exists():
        pytest.skip("needs Linux /proc")
    pid_file = tmp_path / "pid"
    end = "time.sleep(3600)" if then == "hang" else "return CheckResult('pass', 'ok')"
    body = (
        "import subprocess\n"
        "p = subprocess.Popen(['sleep', '3600'], start_new_session=True)\n"
        f"open({str(pid_file)!r}, 'w').write(str(p.pid))\n" + end
    )
    f = tmp_path / "spawns.py"
    f.write_text(_claim(body))
    res = check_contract(["prove", str(f), "--timeout", "4", "--json"], expect=0)
    pid = int(pid_file.read_text())
    assert _gone(pid), f"the claim's own-session child {pid} outlived it"
    claims = {c["id"]: c for c in json.loads(res.out)["claims"]}
    assert claims["c.after"]["status"] == "holds"
    if then == "hang":
        assert "deadline" in claims["b.bad"]["reason"]


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
    assert [c["id"] for c in out["claims"]] == ["a.first", "b.bad", "c.after"]
    for text in ("at import", "from the check", "raw fd 1"):
        assert text in res.err and text not in res.out


def test_a_claim_that_runs_past_its_deadline_is_named_in_the_table(tmp_path):
    f = tmp_path / "slow.py"
    f.write_text(_claim("time.sleep(3600)"))
    res = check_contract(["prove", str(f), "--timeout", "1.5"], expect=0)
    assert "b.bad: unknown: stopped at the deadline" in res.err
    assert "--timeout 1.5" in res.err
    assert "stopped: stopped at the deadline of 1.5 s" in res.out
    assert "3 claims:" in res.out


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

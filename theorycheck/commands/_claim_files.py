"""Running claim files where they can be stopped: ``prove``'s child process.

``theorycheck prove`` never imports a claim file itself: :func:`run_claim_files`
starts ``python -m theorycheck.commands._claim_files DIR`` in its own session, and the
child discovers, selects and evaluates the claims through the public API of
:mod:`theorycheck.claims` (``discover``, ``select``, ``evaluate``, ``write_report``,
``table_lines``). The two talk over the child's original stdout, one JSON object a
line; the child's own fd 1 (the user's ``print``, C-level writes included) and its
stderr go to files. So:

* **deadlines**: the start-up and the import of every claim file get
  ``DEADLINE_BASE_S + S`` seconds, each claim (all its checks, its correction) gets
  ``S`` (``--timeout S``), the child's own work between claims ``DEADLINE_BASE_S``;
* **a report survives any one claim**: a claim past its deadline, a crash of the
  child (``os._exit``, a signal, the kernel's out-of-memory kill) or ``sys.exit`` /
  ``KeyboardInterrupt`` in a check makes *that* claim ``unknown`` with the reason
  (``ClaimResult.reason``); the child and every process below it are killed (stopped
  first, then SIGKILL: its process group, and what its checks started in sessions of
  their own, found through ``/proc``; the child is a subreaper, so an orphan of a
  check stays below it) and a new child carries on with the next claim. The table and
  the report are built here from the claims' JSON;
* **bad input is one line**: a claim file that does not import (``sys.exit``,
  ``os._exit``, a signal or a deadline while importing), no claims, a duplicate id,
  an unknown ``--only`` id become :class:`~theorycheck._errors.BadInput` naming the
  file; a check that *raises* stays what :func:`theorycheck.claims.evaluate` makes of
  it (``unknown``);
* **the user's output never reaches stdout**: captured, passed on to stderr when the
  run succeeds, dropped when it fails (the error stays one line);
* nothing of the user's code comes back: the parent receives plain JSON (each
  claim's ``ClaimResult.to_json()``, the errors of its checks, the table's lines).

Examples:
    >>> check_timeout(0.0)
    Traceback (most recent call last):
    ...
    theorycheck._errors.BadInput: --timeout 0.0 must be a number in (0, 86400] s
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from theorycheck import _progress
from theorycheck._errors import BadInput
from theorycheck._isolation import guard_child
from theorycheck.commands._isolate import DEADLINE_BASE_S, MAX_TIMEOUT_S

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "ClaimRun",
    "check_claim_paths",
    "check_timeout",
    "run_claim_files",
]

#: ``prove --timeout``'s default, seconds per claim: the slowest claim of ``proofs/``
#: takes about 25 s on an idle 2-core machine, so this leaves a factor of 12 for load.
DEFAULT_TIMEOUT_S = 300.0
_CHILD = "theorycheck.commands._claim_files"
_POLL_S = 0.5


@dataclasses.dataclass(frozen=True)
class ClaimRun:
    """What the child sent back: plain data, no user code."""

    claims: list[dict[str, Any]]  # ClaimResult.to_json() of each claim, in order
    errors: list[tuple[str, str, str]]  # (claim id, check name, the exception)
    table: list[str]  # table_lines() of the results
    output: str  # the user's captured stdout and stderr
    stopped: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    # (claim id, why it was stopped): each such claim is ``unknown``


def check_timeout(timeout_s: float) -> float:
    """``--timeout``: a number in (0, a day]; raises BadInput otherwise."""
    if not (isinstance(timeout_s, (int, float)) and 0 < timeout_s <= MAX_TIMEOUT_S):
        raise BadInput(
            f"--timeout {timeout_s!r} must be a number in (0, {MAX_TIMEOUT_S:g}] s"
        )
    return float(timeout_s)


def check_claim_paths(paths: Sequence[str]) -> list[str]:
    """The PATHs of ``prove``, checked before a process is started: each must be a
    readable ``.py`` file or a readable folder (an empty string is not ``.``).

    Examples:
        >>> check_claim_paths([""])
        Traceback (most recent call last):
        ...
        theorycheck._errors.BadInput: PATH '' is empty: name a .py file or a folder
    """
    for text in paths:
        if text.strip() == "":
            raise BadInput(f"PATH {text!r} is empty: name a .py file or a folder")
        try:
            _check_claim_path(text)
        except BadInput:
            raise
        except (OSError, ValueError) as err:  # a name too long, a NUL byte ...
            raise BadInput(f"PATH {text!r} is not a usable path: {err}") from None
    return list(paths)


def _check_claim_path(text: str) -> None:
    path = Path(text)
    if os.path.lexists(path) and not path.exists():
        raise BadInput(f"PATH {text!r} is a broken or looping symbolic link")
    if not path.exists():
        raise BadInput(f"PATH {text!r} does not exist")
    if path.is_dir():
        if not os.access(path, os.R_OK | os.X_OK):
            raise BadInput(f"PATH {text!r}: the folder is not readable")
    elif not path.is_file():
        raise BadInput(f"PATH {text!r} is not a .py file or a folder")
    elif path.suffix != ".py":
        raise BadInput(f"PATH {text!r} is not a Python (.py) file")
    elif not os.access(path, os.R_OK):
        raise BadInput(f"PATH {text!r}: the file is not readable")


# ----------------------------------------------------------------------- parent


def _child_env() -> dict[str, str]:
    """The environment of the child: ours, with this package's folder first on
    ``PYTHONPATH`` (the child imports the same theorycheck from any working folder)."""
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (root, env.get("PYTHONPATH", "")) if p
    )
    env["THEORYCHECK_PROGRESS"] = "0"
    return env


def _descendants(pid: int) -> set[int]:
    """Every process below ``pid`` (Linux ``/proc``; empty elsewhere)."""
    below: dict[int, list[int]] = {}
    for entry in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = entry.read_text().rsplit(")", 1)[-1].split()
        except OSError:
            continue
        below.setdefault(int(fields[1]), []).append(int(entry.parent.name))
    out, todo = set(), [pid]
    while todo:
        for child in below.get(todo.pop(), ()):
            out.add(child)
            todo.append(child)
    return out


def _signal(pids, sig: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def _kill_tree(pid: int) -> None:
    """Kills ``pid`` and every process below it, also those in sessions of their own
    (outside its process group): each is stopped first (a stopped process cannot
    fork), the tree is scanned again until nothing new appears, then all get SIGKILL,
    with ``pid``'s process group."""
    seen = {pid}
    _signal(seen, signal.SIGSTOP)
    for _ in range(5):
        new = _descendants(pid) - seen
        if not new:
            break
        _signal(new, signal.SIGSTOP)
        seen |= new
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    _signal(seen, signal.SIGKILL)


class _Stop(Exception):
    """The child passed its deadline (it has been killed)."""


class _Follow:
    """The parent's view of the children: the claims, which phase the current child
    is in, and its deadline."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self.items: list[tuple[str, str]] = []  # (claim id, file)
        self.stubs: list[dict[str, Any]] = []  # each claim's JSON, not yet run
        self.claims: dict[int, dict[str, Any]] = {}
        self.errors: list[tuple[str, str, str]] = []
        self.stopped: list[tuple[str, str]] = []
        self.bar: Iterator[int] | None = None
        self.restart()

    def restart(self) -> None:
        """A new child: it imports the claim files again."""
        self.importing: str | None = None
        self.listed = False
        self.current: int | None = None
        self._until(DEADLINE_BASE_S + self.timeout_s)

    def _until(self, seconds: float) -> None:
        self.budget = seconds
        self.deadline = time.monotonic() + seconds

    def where(self) -> str:
        if self.current is not None:
            cid, file = self.items[self.current]
            return f"{file}: claim {cid!r}"
        if self.listed:
            return "the claims' process, between claims"
        if self.importing:
            return f"{self.importing}: importing it"
        return "starting the claims' process"

    def timed_out(self) -> str:
        if self.current is not None:
            text = f"{self.budget:g} s (--timeout {self.timeout_s:g})"
        elif self.listed:
            text = f"{self.budget:g} s"
        else:
            text = f"{self.budget:g} s (= {DEADLINE_BASE_S:g} + --timeout "
            text += f"{self.timeout_s:g})"
        return f"stopped at the deadline of {text} (still running)"

    def died(self, returncode: int | None) -> str:
        if returncode is not None and returncode < 0:
            how = f"was killed by {signal.Signals(-returncode).name}"
            if -returncode == signal.SIGKILL:
                how += " (out of memory?)"
        else:
            how = f"exited with status {returncode}"
            how += " (os._exit?)" if self.current is not None or self.importing else ""
        return f"the process running it {how} before it finished"

    def stop(self, why: str) -> int | None:
        """The current claim becomes ``unknown`` with ``why``; the index of the
        claim to go on with (None: none left). Outside a claim: BadInput."""
        if self.current is None:
            raise BadInput(f"{self.where()}: {why}")
        i = self.current
        self.claims[i] = {**self.stubs[i], "reason": why}
        self.stopped.append((self.items[i][0], why))
        return i + 1 if i + 1 < len(self.items) else None

    def _listed(self, msg: dict[str, Any]) -> None:
        items = [(cid, file) for cid, file, _ in msg["claims"]]
        if self.listed or (self.items and items != self.items):
            raise RuntimeError("prove: the claim files changed while they ran")
        if not self.items:
            self.items = items
            self.stubs = [stub for _, _, stub in msg["claims"]]
            self.bar = iter(
                _progress.bar(range(len(items)), desc="prove", unit="claim")
            )
        self.listed = True
        self._until(DEADLINE_BASE_S)

    def feed(self, msg: dict[str, Any]) -> bool:
        """Takes one message; True at the end."""
        ev = msg.get("ev")
        if ev == "importing":
            self.importing = msg["file"]
        elif ev == "claims":
            self._listed(msg)
        elif ev == "start":
            self.current = msg["i"]
            next(self.bar, None)
            _progress.stage(f"claim {self.items[self.current][0]}")
            self._until(self.timeout_s)
        elif ev == "done":
            self.current = None
            self.claims[msg["i"]] = msg["json"]
            if msg["json"].get("reason") is not None:  # sys.exit in a check
                self.stopped.append((msg["json"]["id"], msg["json"]["reason"]))
            self.errors += [(msg["json"]["id"], n, e) for n, e in msg["errors"]]
            self._until(DEADLINE_BASE_S)
        elif ev == "bad":
            raise BadInput(msg["message"])
        elif ev == "internal":
            raise RuntimeError(f"prove: the claims' process failed: {msg['message']}")
        elif ev == "end":
            return True
        else:
            raise RuntimeError(f"prove: the claims' process sent {msg!r}")
        return False

    def results(self) -> list[dict[str, Any]]:
        for _ in self.bar or ():
            pass
        return [self.claims[i] for i in sorted(self.claims)]


def _messages(proc: subprocess.Popen, follow: _Follow) -> Iterator[dict[str, Any]]:
    """The child's messages, until it closes its channel or exits; :class:`_Stop`
    (the child's tree killed) at a deadline."""
    fd = proc.stdout.fileno()
    pending = b""
    while True:
        left = follow.deadline - time.monotonic()
        if left <= 0:
            _kill_tree(proc.pid)
            raise _Stop
        ready, _, _ = select.select([fd], [], [], min(left, _POLL_S))
        if not ready:
            if proc.poll() is not None:
                return  # exited; what it wrote was readable, so all is read
            continue
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            try:
                yield json.loads(line)
            except ValueError:
                raise RuntimeError(
                    f"prove: the claims' process sent {line[:200]!r}"
                ) from None


def _captured(workdir: Path) -> str:
    parts = []
    for name in ("stdout.txt", "stderr.txt"):
        path = workdir / name
        if path.is_file() and path.stat().st_size:
            text = path.read_bytes().decode("utf-8", "replace")
            parts.append(text if text.endswith("\n") else text + "\n")
    return "".join(parts)


def _follow_child(proc: subprocess.Popen, follow: _Follow) -> int | None:
    """Follows one child to its end; the claim to restart from when it stopped
    inside a claim (None when all are done)."""
    try:
        for msg in _messages(proc, follow):
            if follow.feed(msg):
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=DEADLINE_BASE_S)  # it exits on its own
                return None
        try:
            proc.wait(timeout=max(follow.deadline - time.monotonic(), 0.1))
        except subprocess.TimeoutExpired:
            _kill_tree(proc.pid)
            raise _Stop from None
    except _Stop:
        return follow.stop(follow.timed_out())
    return follow.stop(follow.died(proc.returncode))


def _run_child(workdir: Path, call: dict, start: int, follow: _Follow) -> int | None:
    """One child, evaluating the claims from index ``start``."""
    (workdir / "call.json").write_text(json.dumps({**call, "start": start}))
    follow.restart()
    with open(workdir / "stderr.txt", "ab") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", _CHILD, str(workdir)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=err,
            env=_child_env(),
            start_new_session=True,
        )
    try:
        return _follow_child(proc, follow)
    finally:
        _kill_tree(proc.pid)  # and whatever its checks left running
        proc.stdout.close()
        proc.wait()


def _report(claims: list[dict[str, Any]], report: str | None) -> list[str]:
    """The table's lines (and the report, when asked) from the claims' JSON."""
    from theorycheck.claims import ClaimResult, table_lines, write_report

    results = [ClaimResult.from_json(c) for c in claims]
    if report is not None:
        try:
            write_report(results, report)
        except OSError as err:
            raise BadInput(
                f"--report {report!r}: cannot write the report: {err}"
            ) from None
    return table_lines(results)


def run_claim_files(
    paths: Sequence[str],
    *,
    only: Sequence[str] = (),
    quick: bool = False,
    remeasure: bool = False,
    report: str | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> ClaimRun:
    """Discovers and evaluates the claims under ``paths`` in child processes.

    Args:
        paths: ``.py`` files and folders (checked by :func:`check_claim_paths`).
        only: claim ids to run (all when empty).
        quick: passed to every check that takes ``quick``.
        remeasure: run inside ``theorycheck.claims.remeasuring()`` (redo the
            committed measurements and rewrite their files).
        report: a folder for ``proofs.md`` and ``proofs.json``, or None.
        timeout_s: each claim's deadline (the import gets ``DEADLINE_BASE_S`` more).

    Returns:
        The claims' JSON (a claim stopped by its deadline or a crash is ``unknown``
        with its ``reason``), their checks' errors, the table, the captured output
        and the stopped claims.

    Raises:
        BadInput: a claim file does not import (it raised, called ``sys.exit``,
        exited, was killed or passed the import deadline), no claims were found, a
        duplicate id, an unknown ``only`` id (message ``only 'ID': ...``), an
        unwritable report.
    """
    check_timeout(timeout_s)
    call = {
        "paths": [str(p) for p in paths],
        "only": list(only),
        "quick": bool(quick),
        "remeasure": bool(remeasure),
    }
    workdir = Path(tempfile.mkdtemp(prefix="theorycheck-prove-"))
    try:
        follow = _Follow(timeout_s)
        start: int | None = 0
        while start is not None:
            start = _run_child(workdir, call, start, follow)
        claims = follow.results()
        table = _report(claims, report)
        return ClaimRun(
            claims, follow.errors, table, _captured(workdir), follow.stopped
        )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


# ------------------------------------------------------------------------ child


class _Channel:
    """The child's line to the parent: its original stdout, kept off fd 1."""

    #: the channel of this process, once opened.
    current: _Channel | None = None

    def __init__(self, workdir: Path) -> None:
        sys.stdout.flush()
        self.fd = os.dup(1)  # not inherited by the user's subprocesses
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND  # a restarted child appends
        out = os.open(workdir / "stdout.txt", flags)
        os.dup2(out, 1)
        os.close(out)
        _Channel.current = self

    @staticmethod
    def resend(message: str) -> None:
        """Reports theorycheck's own failure (the parent raises RuntimeError)."""
        if _Channel.current is not None:
            _Channel.current.send(ev="internal", message=message)

    def send(self, **msg: Any) -> None:
        data = (json.dumps(msg, allow_nan=False) + "\n").encode()
        while data:
            data = data[os.write(self.fd, data) :]


def _inside(file: str, roots: Sequence[Path]) -> bool:
    path = Path(file)
    return any(path == r or r in path.parents for r in roots)


def _shown(file: str | os.PathLike) -> str:
    """A path as the user would write it: relative to the working folder if inside."""
    path = Path(file).resolve()
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _where(err: BaseException, roots: Sequence[Path]) -> str:
    frames = traceback.extract_tb(err.__traceback__)
    mine = [f for f in frames if _inside(str(Path(f.filename).resolve()), roots)]
    if not mine:
        return ""
    f = mine[-1]
    return f" (in {f.name} at {_shown(f.filename)}:{f.lineno})"


def _how(err: BaseException) -> str:
    if isinstance(err, SystemExit):
        return f"called sys.exit({err.code!r})"
    if isinstance(err, KeyboardInterrupt):
        return "was interrupted (KeyboardInterrupt)"
    first = (str(err).strip().splitlines() or [""])[0][:240]
    return f"raised {type(err).__name__}" + (f": {first}" if first else "")


class _Importing:
    """An audit hook that tells the parent which claim file is being executed."""

    def __init__(self, channel: _Channel, roots: Sequence[Path]) -> None:
        self.channel, self.roots = channel, roots
        self.on, self.last = True, None

    def __call__(self, event: str, args: tuple) -> None:
        if event != "exec" or not self.on:
            return
        file = getattr(args[0], "co_filename", None) if args else None
        if file and file != self.last and _inside(file, self.roots):
            self.last = file
            self.channel.send(ev="importing", file=_shown(file))


def _discover(paths: Sequence[str], only: Sequence[str]):
    from theorycheck.claims import discover, select

    collected, seen = [], {}
    for raw in paths:  # one PATH at a time: the same claim reached twice is kept once
        for item in discover([raw]):
            key = item.claim.id
            first = seen.get(key)
            if first is not None:
                if first.claim is item.claim or first.path.resolve() == (
                    item.path.resolve()
                ):
                    continue
                raise BadInput(
                    f"claim id {key!r} is used twice: in {first.path} and in "
                    f"{item.path}"
                )
            seen[key] = item
            collected.append(item)
    if not collected:
        shown = ", ".join(repr(p) for p in paths)
        raise BadInput(
            f"PATH {shown}: no claims found (a claim is a module-level "
            "theorycheck.claims.Claim object)"
        )
    return select(collected, only)


def _subreaper() -> None:
    """Linux: an orphan of a check (a double fork, a daemon) becomes our child, so
    that it stays below us where :func:`_kill_tree` finds it."""
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # CHILD_SUBREAPER


def _evaluate_one(item, call: dict, roots: Sequence[Path]):
    """One claim's result; ``sys.exit`` or ``KeyboardInterrupt`` in a check makes it
    ``unknown`` with the reason."""
    from theorycheck.claims import ClaimResult, Status, evaluate, remeasuring

    start = time.perf_counter()
    try:
        with remeasuring(call.get("remeasure", False)):
            return evaluate(item.claim, quick=call["quick"])
    except BaseException as err:  # the user's checks: every way out is named
        reason = f"a check {_how(err)}{_where(err, roots)}"
        seconds = time.perf_counter() - start
        return ClaimResult(item.claim, Status.UNKNOWN, (), None, seconds, reason)


def _evaluate(channel: _Channel, chosen, call: dict, roots: Sequence[Path]) -> None:
    for i in range(call["start"], len(chosen)):
        channel.send(ev="start", i=i)
        r = _evaluate_one(chosen[i], call, roots)
        _kill_tree_below(os.getpid())  # what the claim's checks left running
        errors = [[m.name, m.error] for m in r.errors]
        channel.send(ev="done", i=i, json=r.to_json(), errors=errors)


def _kill_tree_below(pid: int) -> None:
    for child in _descendants(pid):
        _kill_tree(child)


def _stub(claim) -> dict[str, Any]:
    from theorycheck.claims import ClaimResult, Status

    return ClaimResult(claim, Status.UNKNOWN, (), None, 0.0).to_json()


def _child(workdir: Path) -> None:
    _subreaper()
    channel = _Channel(workdir)
    call = json.loads((workdir / "call.json").read_text())
    roots = [Path(p).resolve() for p in call["paths"]]
    hook = _Importing(channel, roots)
    sys.addaudithook(hook)
    try:
        chosen = _discover(call["paths"], call["only"])
    except BadInput as err:
        return channel.send(ev="bad", message=str(err))
    except BaseException as err:  # sys.exit / KeyboardInterrupt at import
        file = hook.last and _shown(hook.last)
        head = f"{file}: " if file else ""
        return channel.send(ev="bad", message=f"{head}{_how(err)} while being imported")
    hook.on = False
    claims = [[c.claim.id, _shown(c.path), _stub(c.claim)] for c in chosen]
    channel.send(ev="claims", claims=claims)
    _evaluate(channel, chosen, call, roots)
    sys.stdout.flush()  # the user's buffered prints reach their file before "end"
    sys.stderr.flush()
    return channel.send(ev="end")


def _main(workdir: Path) -> None:
    guard_child(os.getppid(), subreaper=True)  # dies with prove, orphans included
    try:
        _child(workdir)
    except Exception as err:  # noqa: BLE001 -- theorycheck's own failure (a bug)
        sys.stderr.write(traceback.format_exc())
        with contextlib.suppress(Exception):
            _Channel.resend(f"{type(err).__name__}: {err}")
    finally:
        _kill_tree_below(os.getpid())
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(0)  # no atexit hooks of the user's code


if __name__ == "__main__":
    _main(Path(sys.argv[1]))

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
  ``S`` (``--timeout S``), the closing table and report ``DEADLINE_BASE_S``. At a
  deadline the child's process group is killed and the run ends with one line naming
  the file and the claim that was running;
* **every way out is one line**: ``sys.exit`` at import or in a check, ``os._exit``,
  a signal (the kernel's out-of-memory kill included) become
  :class:`~theorycheck._errors.BadInput` naming the file (and the claim); a check that
  *raises* stays what :func:`theorycheck.claims.evaluate` makes of it (``unknown``);
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
from theorycheck._isolation import guard_child, kill_tree
from theorycheck.commands._isolate import (
    DEADLINE_BASE_S,
    MAX_TIMEOUT_S,
    _child_env,
    _kill_group,
)

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


class _Follow:
    """The parent's view of the child: which phase it is in, and its deadline."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self.importing: str | None = None
        self.items: list[tuple[str, str]] = []  # (claim id, file)
        self.current: int | None = None
        self.claims: list[dict[str, Any]] = []
        self.errors: list[tuple[str, str, str]] = []
        self.table: list[str] | None = None
        self.bar: Iterator[int] | None = None
        self._until(DEADLINE_BASE_S + timeout_s)

    def _until(self, seconds: float) -> None:
        self.budget = seconds
        self.deadline = time.monotonic() + seconds

    def where(self) -> str:
        if self.current is not None:
            cid, file = self.items[self.current]
            return f"{file}: claim {cid!r}"
        if self.items:
            return "the claims' table and report"
        if self.importing:
            return f"{self.importing}: importing it"
        return "starting the claims' process"

    def timed_out(self) -> str:
        if self.current is not None:
            text = f"{self.budget:g} s (--timeout {self.timeout_s:g})"
        elif self.items:
            text = f"{self.budget:g} s"
        else:
            text = f"{self.budget:g} s (= {DEADLINE_BASE_S:g} + --timeout "
            text += f"{self.timeout_s:g})"
        return f"{self.where()}: stopped at the deadline of {text} (still running)"

    def died(self, returncode: int | None) -> str:
        if returncode is not None and returncode < 0:
            how = f"was killed by {signal.Signals(-returncode).name}"
            if -returncode == signal.SIGKILL:
                how += " (out of memory?)"
        else:
            how = f"exited with status {returncode}"
            how += " (os._exit?)" if self.current is not None or self.importing else ""
        return f"{self.where()}: the process running it {how} before it finished"

    def feed(self, msg: dict[str, Any]) -> bool:
        """Takes one message; True at the end."""
        ev = msg.get("ev")
        if ev == "importing":
            self.importing = msg["file"]
        elif ev == "claims":
            self.items = [tuple(x) for x in msg["claims"]]
            self.bar = iter(
                _progress.bar(range(len(self.items)), desc="prove", unit="claim")
            )
            self._until(DEADLINE_BASE_S)
        elif ev == "start":
            self.current = msg["i"]
            next(self.bar, None)
            _progress.stage(f"claim {self.items[self.current][0]}")
            self._until(self.timeout_s)
        elif ev == "done":
            self.current = None
            self.claims.append(msg["json"])
            self.errors += [(msg["json"]["id"], n, e) for n, e in msg["errors"]]
            self._until(DEADLINE_BASE_S)
        elif ev == "bad":
            raise BadInput(msg["message"])
        elif ev == "internal":
            raise RuntimeError(f"prove: the claims' process failed: {msg['message']}")
        elif ev == "end":
            for _ in self.bar or ():
                pass
            self.table = msg["table"]
            return True
        else:
            raise RuntimeError(f"prove: the claims' process sent {msg!r}")
        return False


def _messages(proc: subprocess.Popen, follow: _Follow) -> Iterator[dict[str, Any]]:
    """The child's messages, until it closes its channel or exits; BadInput at a
    deadline."""
    fd = proc.stdout.fileno()
    pending = b""
    while True:
        left = follow.deadline - time.monotonic()
        if left <= 0:
            _kill_group(proc)
            raise BadInput(follow.timed_out())
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


def run_claim_files(
    paths: Sequence[str],
    *,
    only: Sequence[str] = (),
    quick: bool = False,
    remeasure: bool = False,
    report: str | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> ClaimRun:
    """Discovers and evaluates the claims under ``paths`` in a child process.

    Args:
        paths: ``.py`` files and folders (checked by :func:`check_claim_paths`).
        only: claim ids to run (all when empty).
        quick: passed to every check that takes ``quick``.
        remeasure: run inside ``theorycheck.claims.remeasuring()`` (redo the
            committed measurements and rewrite their files).
        report: a folder for ``proofs.md`` and ``proofs.json`` (written by the
            child), or None.
        timeout_s: each claim's deadline (the import gets ``DEADLINE_BASE_S`` more).

    Returns:
        The claims' JSON, their checks' errors, the table and the captured output.

    Raises:
        BadInput: a deadline passed, the child exited or was killed, a claim file
        does not import or calls ``sys.exit``, no claims were found, an unknown
        ``only`` id (message ``only 'ID': ...``).
    """
    check_timeout(timeout_s)
    call = {
        "paths": [str(p) for p in paths],
        "only": list(only),
        "quick": bool(quick),
        "remeasure": bool(remeasure),
        "report": report,
    }
    workdir = Path(tempfile.mkdtemp(prefix="theorycheck-prove-"))
    try:
        (workdir / "call.json").write_text(json.dumps(call))
        env = {**_child_env(), "THEORYCHECK_PROGRESS": "0"}
        with open(workdir / "stderr.txt", "wb") as err:
            proc = subprocess.Popen(
                [sys.executable, "-m", _CHILD, str(workdir)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=err,
                env=env,
                start_new_session=True,
            )
        follow = _Follow(timeout_s)
        try:
            for msg in _messages(proc, follow):
                if follow.feed(msg):
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        proc.wait(timeout=DEADLINE_BASE_S)  # it exits on its own
                    break
            else:
                try:
                    proc.wait(timeout=max(follow.deadline - time.monotonic(), 0.1))
                except subprocess.TimeoutExpired:
                    _kill_group(proc)
                    raise BadInput(follow.timed_out()) from None
                raise BadInput(follow.died(proc.returncode))
        finally:
            if proc.returncode is None:  # not reaped: its pid is still the child's
                kill_tree(proc.pid)  # and what it started in sessions of its own
            _kill_group(proc)  # and whatever it started in its session
            proc.stdout.close()
            proc.wait()
        return ClaimRun(follow.claims, follow.errors, follow.table, _captured(workdir))
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
        out = os.open(workdir / "stdout.txt", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
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


def _evaluate(channel: _Channel, chosen, call: dict, roots: Sequence[Path]) -> list:
    from theorycheck.claims import evaluate, remeasuring

    results = []
    for i, item in enumerate(chosen):
        channel.send(ev="start", i=i)
        try:
            with remeasuring(call.get("remeasure", False)):
                r = evaluate(item.claim, quick=call["quick"])
        except BaseException as err:  # the user's checks: every way out is named
            where = f"{_shown(item.path)}: claim {item.claim.id!r}"
            channel.send(ev="bad", message=f"{where}: {_how(err)}{_where(err, roots)}")
            return None
        results.append(r)
        errors = [[m.name, m.error] for m in r.errors]
        channel.send(ev="done", i=i, json=r.to_json(), errors=errors)
    return results


def _child(workdir: Path) -> None:
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
    claims = [[c.claim.id, _shown(c.path)] for c in chosen]
    channel.send(ev="claims", claims=claims)
    results = _evaluate(channel, chosen, call, roots)
    if results is None:
        return None
    from theorycheck.claims import table_lines, write_report

    if call["report"] is not None:
        try:
            write_report(results, call["report"])
        except OSError as err:
            message = f"--report {call['report']!r}: cannot write the report: {err}"
            return channel.send(ev="bad", message=message)
    table = table_lines(results)
    sys.stdout.flush()  # the user's buffered prints reach their file before "end"
    sys.stderr.flush()
    return channel.send(ev="end", table=table)


def _main(workdir: Path) -> None:
    guard_child(os.getppid(), subreaper=True)  # dies with prove, orphans included
    try:
        _child(workdir)
    except Exception as err:  # noqa: BLE001 -- theorycheck's own failure (a bug)
        sys.stderr.write(traceback.format_exc())
        with contextlib.suppress(Exception):
            _Channel.resend(f"{type(err).__name__}: {err}")
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(0)  # no atexit hooks of the user's code


if __name__ == "__main__":
    _main(Path(sys.argv[1]))

"""Children that never outlive their parent: the one base of every harness that runs
user code or long work in another process (isolated losses, the convexity budget's
workers).

The parent side:

* :func:`kill_tree` ends a child and everything below it: its process group (a child
  started with ``start_new_session=True`` leads one) and every descendant found in
  ``/proc``, grandchildren that started sessions of their own included;
* ``theorycheck.cli`` turns SIGINT and SIGTERM into :class:`Interrupted` (a
  ``KeyboardInterrupt``), so the ``finally`` blocks of the harnesses run and kill
  their children before the process exits with 130 or 143.

The child side, :func:`guard_child`, called first thing in a child:

* a watchdog thread notices the parent's death (the child is re-parented: a SIGKILL,
  a crash, ``os._exit``) within :data:`WATCH_PERIOD_S` and kills the child's own
  descendants, then the child;
* ``subreaper=True`` (Linux) keeps orphans of a double fork below the child, so that
  they are found and killed with it;
* SIGINT is ignored: a Ctrl-C at the terminal reaches every process of the
  foreground group, and only the parent answers it (no traceback from a worker).

Linux is the platform these guarantees are made for (``/proc``, ``prctl``); elsewhere
the process-group kill and the watchdog still hold.

Examples:
    >>> import subprocess, sys
    >>> proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
    ...                         start_new_session=True)
    >>> kill_tree(proc.pid); proc.wait() < 0
    True
"""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

__all__ = [
    "WATCH_PERIOD_S",
    "Interrupted",
    "descendants",
    "guard_child",
    "kill_descendants",
    "kill_group",
    "kill_tree",
]

#: how often a child checks that its parent is alive (seconds).
WATCH_PERIOD_S = 0.2

_PR_SET_CHILD_SUBREAPER = 36


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM reached the parent: unwinds like Ctrl-C (every ``finally``
    runs) and carries the signal for the exit status (128 + its number)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (Linux ``/proc``; empty elsewhere)."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = entry.read_text()
        except OSError:
            continue
        fields = text.rsplit(")", 1)[-1].split()
        parents.setdefault(int(fields[1]), []).append(int(entry.parent.name))
    out, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def kill_descendants(pid: int) -> None:
    """SIGKILL every process below ``pid``, sessions of their own included."""
    for child in descendants(pid):
        try:
            os.kill(child, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def kill_group(pgid: int) -> None:
    """SIGKILL the process group ``pgid`` (what is left of it; nothing if empty)."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def kill_tree(pid: int) -> None:
    """SIGKILL ``pid``'s descendants, then its process group when it leads one, then
    ``pid`` itself. Call it before ``pid`` is reaped (``wait``): after that the pid
    may name another process."""
    kill_descendants(pid)
    try:
        if os.getpgid(pid) == pid:
            kill_group(pid)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _subreaper() -> None:
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _watch(parent: int) -> None:
    stop = threading.Event()
    while not stop.wait(WATCH_PERIOD_S):
        if os.getppid() != parent:  # re-parented: the parent is gone
            kill_descendants(os.getpid())
            os._exit(1)


def guard_child(parent: int, *, subreaper: bool = False) -> None:
    """Makes this process (a child of ``parent``) die with it; see the module doc.

    Args:
        parent: the pid of the parent, as the parent saw itself (``os.getpid()``
            there): a parent that died before this call is noticed at once.
        subreaper: keep orphans of this process's descendants below it (for a
            child that runs the user's code, which may double-fork).
    """
    if subreaper:
        _subreaper()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if os.getppid() != parent:
        os._exit(1)
    threading.Thread(
        target=_watch, args=(parent,), name="theorycheck-parent-watch", daemon=True
    ).start()

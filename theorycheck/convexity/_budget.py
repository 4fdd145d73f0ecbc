"""Wall-clock budget for the symbolic stages (SymPy can run without end on
transcendental expressions, e.g. SAPO's e^{tau (r - 1)} margin).

:func:`run_in_process` (the structure stage) runs the work in a spawned worker process
and kills it when the budget is spent: a hard limit. The worker is kept between calls
(spawning one and importing SymPy and JAX into it costs seconds per verdict); a worker
that ran past its budget is killed and the next call spawns a fresh one. Every worker
is guarded (:func:`theorycheck._isolation.guard_child`): it dies with this process
(a SIGKILL or a crash included) and leaves Ctrl-C to it.
:func:`run_within` (the formal stage) runs it in a daemon worker thread and interrupts
it with an asynchronous exception, raised at its next Python bytecode; that is best
effort, because a C call that holds the GIL (SymPy's heuristic gcd inside
``math.gcd``) delays both the interrupt and the caller's return.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from theorycheck._isolation import guard_child

__all__ = [
    "Deadline",
    "Pending",
    "StageTimeout",
    "run_in_process",
    "run_within",
    "submit_in_process",
]


class StageTimeout(Exception):
    """The symbolic budget ran out before the stage finished."""


class _Abandoned(BaseException):
    """Raised inside an abandoned worker (a BaseException: ``except Exception``
    blocks in SymPy do not swallow it)."""


def _quiet_hook(previous):
    def hook(unraisable):
        # An interrupt that lands in a gc callback (e.g. XLA's) is swallowed there and
        # reported as "unraisable": it is ours and expected, so stay quiet.
        if not isinstance(unraisable.exc_value, _Abandoned):
            previous(unraisable)

    hook.theorycheck_quiet = True
    return hook


def _interrupt(thread: threading.Thread, tries: int = 50) -> None:
    """Raises :class:`_Abandoned` in ``thread`` until it ends (an exception delivered
    while a gc callback runs is swallowed, so it is sent again)."""
    if not getattr(sys.unraisablehook, "theorycheck_quiet", False):
        sys.unraisablehook = _quiet_hook(sys.unraisablehook)
    for _ in range(tries):
        if thread.ident is None or not thread.is_alive():
            return
        ctypes.pythonapi.PyThreadState_SetAsyncExc(
            ctypes.c_ulong(thread.ident), ctypes.py_object(_Abandoned)
        )
        thread.join(0.1)


def run_within(seconds: float, fn: Callable[..., Any], *args, **kwargs) -> Any:
    """``fn(*args, **kwargs)`` if it returns within ``seconds``.

    Raises:
        StageTimeout: the budget was spent (the worker is interrupted).
        Exception: whatever ``fn`` raised.
    """
    if seconds <= 0:
        raise StageTimeout("no time left")
    box: dict[str, Any] = {}

    def target():
        try:
            box["value"] = fn(*args, **kwargs)
        except _Abandoned:
            pass
        except BaseException as err:  # re-raised in the caller
            box["error"] = err

    worker = threading.Thread(target=target, name="theorycheck-symbolic", daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        _interrupt(worker)
        raise StageTimeout(f"ran past {seconds:.3g} s")
    if "error" in box:
        raise box["error"]
    return box["value"]


def _child(conn, parent, fn, args, kwargs):
    guard_child(parent)  # dies with the parent; Ctrl-C is the parent's to answer
    try:
        conn.send((True, fn(*args, **kwargs)))
    except BaseException as err:  # re-raised in the parent
        conn.send((False, err))
    finally:
        conn.close()


def _serve(conn, parent) -> None:
    """The kept worker's loop: ``(fn, args, kwargs)`` in, ``(ok, value)`` out."""
    guard_child(parent)  # dies with the parent; Ctrl-C is the parent's to answer
    while True:
        try:
            fn, args, kwargs = conn.recv()
        except (EOFError, OSError):
            return
        try:
            reply = (True, fn(*args, **kwargs))
        except BaseException as err:  # re-raised in the parent
            reply = (False, err)
        try:
            conn.send(reply)
        except Exception as err:  # an unpicklable result or error
            conn.send((False, RuntimeError(f"unpicklable result: {err!r}")))


class _Worker:
    """One spawned process that serves :func:`run_in_process` calls in turn."""

    def __init__(self) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.conn, child = ctx.Pipe(duplex=True)
        self.proc = ctx.Process(target=_serve, args=(child, os.getpid()), daemon=True)
        self.proc.start()
        child.close()

    def call(self, seconds: float, fn, args, kwargs):
        self.conn.send((fn, args, kwargs))
        if not self.conn.poll(seconds):
            raise StageTimeout(f"ran past {seconds:.3g} s")
        try:
            return self.conn.recv()
        except EOFError:
            raise RuntimeError(
                f"the symbolic worker died (exit code {self.proc.exitcode})"
            ) from None

    def close(self) -> None:
        self.conn.close()
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join()


_worker: _Worker | None = None
_worker_lock = threading.Lock()


def run_in_process(seconds: float, fn: Callable[..., Any], *args, **kwargs) -> Any:
    """``fn(*args, **kwargs)`` in a spawned worker process, killed after ``seconds``.

    A thread cannot be stopped while a C call holds the GIL (SymPy's heuristic gcd on
    huge integers runs minutes inside ``math.gcd``); a process can. ``fn`` must be a
    module-level function and its arguments and result picklable. The worker is kept
    for the next call unless it ran out of time or died; a call made while another
    thread uses the kept worker gets a fresh process of its own.

    Raises:
        StageTimeout: the budget was spent (the process is killed).
        Exception: whatever ``fn`` raised.
    """
    global _worker
    if seconds <= 0:
        raise StageTimeout("no time left")
    if not _worker_lock.acquire(blocking=False):
        return _run_fresh(seconds, fn, args, kwargs)
    try:
        if _worker is None or not _worker.proc.is_alive():
            _worker = _Worker()
        try:
            ok, value = _worker.call(seconds, fn, args, kwargs)
        except BaseException:
            _worker.close()  # ran out of time, died, or the call was interrupted
            _worker = None
            raise
    finally:
        _worker_lock.release()
    if not ok:
        raise value
    return value


def _run_fresh(seconds: float, fn, args, kwargs) -> Any:
    """:func:`run_in_process` in a process of its own, ended after the call."""
    ctx = multiprocessing.get_context("spawn")
    receiver, sender = ctx.Pipe(duplex=False)
    proc = ctx.Process(
        target=_child, args=(sender, os.getpid(), fn, args, kwargs), daemon=True
    )
    proc.start()
    sender.close()
    try:
        if not receiver.poll(seconds):
            raise StageTimeout(f"ran past {seconds:.3g} s")
        try:
            ok, value = receiver.recv()
        except EOFError:
            raise RuntimeError(
                f"the symbolic worker died (exit code {proc.exitcode})"
            ) from None
    finally:
        receiver.close()
        if proc.is_alive():
            proc.kill()
        proc.join()
    if not ok:
        raise value
    return value


def _timed(fn, args, kwargs):
    """``(fn(*args, **kwargs), seconds it took)``, measured where it runs."""
    start = time.monotonic()
    return fn(*args, **kwargs), time.monotonic() - start


class Pending:
    """A :func:`submit_in_process` call under way; :meth:`result` collects it.

    It runs in the kept worker, or (when another thread uses that one) in a fresh
    process of its own, ended when the call is collected.
    """

    def __init__(self, seconds: float, fn, args, kwargs):
        global _worker
        self._end = time.monotonic() + seconds
        call = (_timed, (fn, args, kwargs), {})
        self._kept = _worker_lock.acquire(blocking=False)
        self._open = True
        if not self._kept:  # another thread uses the kept worker
            ctx = multiprocessing.get_context("spawn")
            self._conn, sender = ctx.Pipe(duplex=False)
            self._proc = ctx.Process(
                target=_child, args=(sender, os.getpid(), *call), daemon=True
            )
            self._proc.start()
            sender.close()
            return
        try:
            if _worker is None or not _worker.proc.is_alive():
                _worker = _Worker()
            self._conn, self._proc = _worker.conn, _worker.proc
            self._conn.send(call)
        except BaseException:
            self._close(kill=True)
            raise

    def extend(self, seconds: float) -> None:
        """Moves the hard limit ``seconds`` later (the caller's own work ran beside
        the call for that long and took CPU from it)."""
        self._end += max(0.0, seconds)

    def _close(self, kill: bool) -> None:
        global _worker
        if not self._open:
            return
        self._open = False
        if self._kept:
            if kill and _worker is not None:
                _worker.close()
                _worker = None
            _worker_lock.release()
        else:
            self._conn.close()
            if self._proc.is_alive():
                self._proc.kill()
            self._proc.join()

    def cancel(self) -> None:
        """Abandons the call (the caller failed while it ran): its process is
        killed."""
        self._close(kill=True)

    def result(self) -> tuple[Any, float]:
        """``(value, seconds the call took in the worker)``.

        Raises:
            StageTimeout: the limit ran out (the process is killed).
            Exception: whatever the call raised.
        """
        try:
            left = self._end - time.monotonic()
            if left <= 0 or not self._conn.poll(left):
                raise StageTimeout("ran past the budget")
            try:
                ok, value = self._conn.recv()
            except EOFError:
                raise RuntimeError(
                    f"the symbolic worker died (exit code {self._proc.exitcode})"
                ) from None
        except BaseException:
            self._close(kill=True)
            raise
        self._close(kill=False)
        if not ok:
            raise value
        return value


def submit_in_process(seconds: float, fn: Callable[..., Any], *args, **kwargs):
    """Starts ``fn(*args, **kwargs)`` in the worker process of
    :func:`run_in_process` and returns at once (a :class:`Pending`), so that the
    caller can work while it runs; the same hard limit of ``seconds`` from now.

    Raises:
        StageTimeout: ``seconds <= 0``.
    """
    if seconds <= 0:
        raise StageTimeout("no time left")
    return Pending(seconds, fn, args, kwargs)


class Deadline:
    """One budget shared by consecutive stages."""

    def __init__(self, seconds: float):
        self.seconds = float(seconds)
        self._end = time.monotonic() + self.seconds

    @classmethod
    def after(cls, seconds: float, used: float) -> Deadline:
        """A budget of ``seconds`` of which ``used`` is spent (``seconds`` stays
        the named size, for the messages)."""
        out = cls(seconds)
        out._end -= used
        return out

    def left(self) -> float:
        return self._end - time.monotonic()

    def run(self, fn: Callable[..., Any], *args, **kwargs) -> Any:
        """``fn`` in a worker thread within the time left (:class:`StageTimeout`
        otherwise; best effort: a C call holding the GIL delays the return)."""
        return run_within(self.left(), fn, *args, **kwargs)

    def run_in_process(self, fn: Callable[..., Any], *args, **kwargs) -> Any:
        """``fn`` in a spawned process within the time left (hard limit)."""
        return run_in_process(self.left(), fn, *args, **kwargs)

    def submit_in_process(self, fn: Callable[..., Any], *args, **kwargs) -> Pending:
        """``fn`` started in a spawned process within the time left (hard limit);
        collect it with :meth:`Pending.result`."""
        return submit_in_process(self.left(), fn, *args, **kwargs)

"""Wall-clock budget for the symbolic stages (SymPy can run without end on
transcendental expressions, e.g. SAPO's e^{tau (r - 1)} margin).

:func:`run_in_process` (the structure stage) runs the work in a spawned worker process
and kills it when the budget is spent: a hard limit. The worker is kept between calls
(spawning one and importing SymPy and JAX into it costs seconds per verdict); a worker
that ran past its budget is killed and the next call spawns a fresh one.
:func:`submit_in_process` can run a second, independent piece of the same stage (an
*aside*) in a kept helper process at the same time, on the second core; the call
collects its outcome with :func:`aside_result` when it needs it (the structure stage
derives V = 4 there while the worker derives V = 3). The helper is a child of this
process like the worker, under the same hard limit: it is killed with the worker. When
the call ends without having used its aside, the helper finishes it (the reply is
dropped; spawning a fresh helper would cost more) and takes no new aside until then;
one still at it past that call's limit is killed.
:func:`run_within` (the formal stage) runs it in a daemon worker thread and interrupts
it with an asynchronous exception, raised at its next Python bytecode; that is best
effort, because a C call that holds the GIL (SymPy's heuristic gcd inside
``math.gcd``) delays both the interrupt and the caller's return.
"""

from __future__ import annotations

import ctypes
import math
import multiprocessing
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

__all__ = [
    "Deadline",
    "Pending",
    "StageTimeout",
    "aside_result",
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


def _child(conn, fn, args, kwargs):
    try:
        conn.send((True, fn(*args, **kwargs)))
    except BaseException as err:  # re-raised in the parent
        conn.send((False, err))
    finally:
        conn.close()


#: In a kept worker: its connection to the parent, and the id of the current call's
#: aside (None when it has none, or it was collected).
_parent_conn = None
_aside_id: int | None = None


def aside_result():
    """In a call made by :func:`submit_in_process` with an aside: ``(ok, value)`` of
    the aside, which the helper process ran at the same time (``ok`` False: ``value``
    is the exception it raised); it waits for the helper when it is still at work.
    None when the call has no aside, it was collected already, or the helper could not
    deliver it (it died or was not there): the caller then does the work itself.

    The parent relays the helper's reply as ``("aside", id)`` followed by the reply's
    pickled bytes; an aside of an earlier call that was never collected is skipped.
    """
    global _aside_id
    want, _aside_id = _aside_id, None
    if want is None or _parent_conn is None:
        return None
    while True:
        head = _parent_conn.recv()
        if head != ("aside", want):
            _parent_conn.recv_bytes()  # an earlier call's: skipped unread
            continue
        payload = _parent_conn.recv()
        return payload if payload[0] is not None else None


def _serve(conn) -> None:
    """The kept worker's loop: ``("call", fn, args, kwargs, aside id)`` in, ``(ok,
    value)`` out; a relayed aside no call collected (``("aside", id)`` and its reply)
    is skipped."""
    global _parent_conn, _aside_id
    _parent_conn = conn
    while True:
        try:
            msg = conn.recv()
            if msg[0] == "aside":
                conn.recv_bytes()
                continue
        except (EOFError, OSError):
            return
        _, fn, args, kwargs, _aside_id = msg
        try:
            reply = (True, fn(*args, **kwargs))
        except BaseException as err:  # re-raised in the parent
            reply = (False, err)
        _aside_id = None
        try:
            conn.send(reply)
        except Exception as err:  # an unpicklable result or error
            conn.send((False, RuntimeError(f"unpicklable result: {err!r}")))


class _Worker:
    """One spawned process that serves :func:`run_in_process` calls in turn."""

    def __init__(self) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.conn, child = ctx.Pipe(duplex=True)
        self.proc = ctx.Process(target=_serve, args=(child,), daemon=True)
        self.proc.start()
        child.close()

    def call(self, seconds: float, fn, args, kwargs):
        self.conn.send(("call", fn, args, kwargs, None))
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
#: The kept helper that runs asides (used only under ``_worker_lock``).
_helper: _Worker | None = None
_worker_lock = threading.Lock()
_calls = 0  # ids of asides


#: The relay of an ended call whose aside the helper is still at (its reply will be
#: dropped); the helper takes no new aside until it is done.
_draining = None


def _close_helper() -> None:
    global _helper, _draining
    if _helper is not None:
        _helper.proc.kill()  # first: a relay waiting on it gets EOF
        if _draining is not None:
            _draining.join(10.0)
        _helper.close()
        _helper = None
    _draining = None


def _kept_helper() -> _Worker | None:
    """The kept helper (spawned when missing), or None: on a machine with one core
    (an aside would only take time from the call), or while it is still at an
    earlier call's aside that call did not collect, before that call's limit (past
    it, the helper is killed and a fresh one spawned)."""
    global _helper, _draining
    if (os.cpu_count() or 1) < 2:
        return None
    if _draining is not None:
        if not _draining.is_alive():
            _draining = None
        elif time.monotonic() < _draining.deadline:
            return None
        else:
            _close_helper()
    if _helper is None or not _helper.proc.is_alive():
        _close_helper()
        _helper = _Worker()
    return _helper


class _Relay(threading.Thread):
    """Waits for the helper's reply to one aside and forwards it to the worker as
    ``("aside", id)`` and the reply's bytes (not unpickled here: no SymPy object is
    built in this process); a helper that dies is forwarded as ``(None, reason)``."""

    def __init__(self, helper: _Worker, worker: _Worker, aside_id: int):
        super().__init__(name="theorycheck-aside", daemon=True)
        self.helper, self.worker, self.aside_id = helper, worker, aside_id
        self.replied = threading.Event()
        self.lock = threading.Lock()
        self.discard = False  # the call ended: drop the reply, forward nothing
        self.deadline = math.inf  # then: the ended call's hard limit

    def run(self) -> None:
        try:
            raw = self.helper.conn.recv_bytes()
        except Exception:  # EOF: the helper died or was killed
            raw = None
        self.replied.set()
        if raw is None:
            import pickle

            raw = pickle.dumps((None, "the helper process died"))
        with self.lock:
            if self.discard:
                return
            try:
                self.worker.conn.send(("aside", self.aside_id))
                self.worker.conn.send_bytes(raw)
            except Exception:  # the worker was killed meanwhile
                pass

    def drop(self, deadline: float) -> bool:
        """The call ended: True when the reply had not come (it will be dropped;
        ``deadline``: when the helper, still at it then, is killed), False when it
        was forwarded already."""
        with self.lock:
            if self.replied.is_set():
                return False
            self.discard, self.deadline = True, deadline
            return True


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
    proc = ctx.Process(target=_child, args=(sender, fn, args, kwargs), daemon=True)
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
    process of its own, ended when the call is collected. Its aside, if any, runs in
    the kept helper; a :class:`_Relay` thread hands the helper's reply to the worker.
    """

    def __init__(self, seconds: float, fn, args, kwargs, aside=None):
        global _worker
        self._end = time.monotonic() + seconds
        call = (_timed, (fn, args, kwargs), {})
        self._kept = _worker_lock.acquire(blocking=False)
        self._open = True
        self._relay: _Relay | None = None
        self._aside_sent = False
        if not self._kept:  # another thread uses the kept worker: no aside
            ctx = multiprocessing.get_context("spawn")
            self._conn, sender = ctx.Pipe(duplex=False)
            self._proc = ctx.Process(target=_child, args=(sender, *call), daemon=True)
            self._proc.start()
            sender.close()
            return
        try:
            if _worker is None or not _worker.proc.is_alive():
                _worker = _Worker()
            self._conn, self._proc = _worker.conn, _worker.proc
            helper = self._start_aside(aside) if aside is not None else None
            aside_id = _calls if helper is not None else None
            self._conn.send(("call", *call, aside_id))
            if helper is not None:
                self._relay = _Relay(helper, _worker, aside_id)
                self._relay.start()
        except BaseException:
            self._close(kill=True)
            raise

    def _start_aside(self, aside) -> _Worker | None:
        """Sends the aside to the kept helper; None (the call does the work itself)
        where there is none or it cannot take it (it died, or could not start)."""
        global _calls
        try:
            helper = _kept_helper()
            if helper is None:
                return None
            _calls += 1
            afn, aargs = aside
            self._aside_sent = True
            helper.conn.send(("call", afn, aargs, {}, None))
        except Exception:
            _close_helper()
            self._aside_sent = False
            return None
        return helper

    def extend(self, seconds: float) -> None:
        """Moves the hard limit ``seconds`` later (the caller's own work ran beside
        the call for that long and took CPU from it)."""
        self._end += max(0.0, seconds)

    def _close(self, kill: bool) -> None:
        global _worker, _draining
        if not self._open:
            return
        self._open = False
        if self._kept:
            relay = self._relay
            # the helper is ended with the worker; one still at an aside the call did
            # not collect finishes it (its reply dropped) and takes no new aside until
            # then, and is killed when it is still at it past this call's limit
            stop = self._aside_sent and (kill or relay is None)
            if not stop and relay is not None and relay.drop(self._end):
                _draining, relay = relay, None
            for proc, end in ((_worker, kill), (_helper, stop)):
                if end and proc is not None and proc.proc.is_alive():
                    proc.proc.kill()  # first: a relay waiting on it gets EOF
            if relay is not None:
                relay.join(10.0)  # its forward precedes the worker's next call
            if kill and _worker is not None:
                _worker.close()
                _worker = None
            if stop:
                _close_helper()
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


def submit_in_process(
    seconds: float, fn: Callable[..., Any], *args, aside=None, **kwargs
):
    """Starts ``fn(*args, **kwargs)`` in the worker process of
    :func:`run_in_process` and returns at once (a :class:`Pending`), so that the
    caller can work while it runs; the same hard limit of ``seconds`` from now.

    ``aside=(afn, aargs)``: ``afn(*aargs)`` runs at the same time in the kept helper
    process (both module-level, picklable), where the machine has a second core and
    the kept worker is free; ``fn`` collects it with :func:`aside_result` (None
    there otherwise: ``fn`` must then do that work itself). The helper is killed
    with the worker when the limit runs out or the call is cancelled; an aside ``fn``
    did not collect is finished and its reply dropped (the helper takes no other
    aside meanwhile, and is killed when still at it past this call's limit).

    Raises:
        StageTimeout: ``seconds <= 0``.
    """
    if seconds <= 0:
        raise StageTimeout("no time left")
    return Pending(seconds, fn, args, kwargs, aside)


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

    def submit_in_process(
        self, fn: Callable[..., Any], *args, aside=None, **kwargs
    ) -> Pending:
        """``fn`` started in a spawned process within the time left (hard limit);
        collect it with :meth:`Pending.result` (``aside``: see
        :func:`submit_in_process`)."""
        return submit_in_process(self.left(), fn, *args, aside=aside, **kwargs)

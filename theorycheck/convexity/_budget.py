"""Wall-clock budget for the symbolic stages (SymPy can run without end on
transcendental expressions, e.g. SAPO's e^{tau (r - 1)} margin).

The work runs in a daemon worker thread; when the budget is spent the caller gets
:class:`StageTimeout` at once and the worker is interrupted by an asynchronous exception
(raised at its next Python bytecode: SymPy is pure Python, z3 calls carry their own
timeouts), so it stops using the CPU and the interpreter.
"""

from __future__ import annotations

import ctypes
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

__all__ = ["Deadline", "StageTimeout", "run_within"]


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


class Deadline:
    """One budget shared by consecutive stages."""

    def __init__(self, seconds: float):
        self.seconds = float(seconds)
        self._end = time.monotonic() + self.seconds

    def left(self) -> float:
        return self._end - time.monotonic()

    def run(self, fn: Callable[..., Any], *args, **kwargs) -> Any:
        """``fn`` within the time left (:class:`StageTimeout` otherwise)."""
        return run_within(self.left(), fn, *args, **kwargs)

"""The child side of :mod:`theorycheck.commands._isolate`: ``python -m`` this module
with a work directory runs the pickled call in ``DIR/call.pkl`` and writes
``DIR/result.pkl``: ``("ok", value)`` or ``("bad", one-line message)`` for every way the
call can end (an exception, ``sys.exit``), ``("internal", message)`` when the call or
its result cannot be (un)pickled. The user's code never travels back: a function or
class of the user's files inside the result is sent as a marker that the parent reads
as ``None`` (a result may carry the resolved loss; the parent must not run it). The
child then leaves with ``os._exit`` (no atexit hooks of the user's code). It is
guarded by :func:`theorycheck._isolation.guard_child`: it dies with the parent, and
orphans of the user's code stay below it to be killed.
"""

from __future__ import annotations

import functools
import io
import os
import pickle
import sys
import traceback
import types
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from theorycheck._errors import BadInput
from theorycheck._isolation import descendants, guard_child, kill_descendants

__all__ = ["USER_CODE", "descendants", "kill_descendants"]


def _where(err: BaseException, user_files: Sequence[str]) -> str:
    frames = traceback.extract_tb(err.__traceback__)
    mine = [f for f in frames if str(Path(f.filename).resolve()) in set(user_files)]
    frame = (mine or frames or [None])[-1]
    if frame is None:
        return ""
    return f" (in {frame.name} at {Path(frame.filename).name}:{frame.lineno})"


def _describe(err: BaseException, label: str, user_files: Sequence[str]):
    if isinstance(err, BadInput):
        return "bad", str(err)
    if isinstance(err, SystemExit):
        return "bad", f"{label}: called sys.exit({err.code!r})"
    if isinstance(err, KeyboardInterrupt):
        return "bad", f"{label}: interrupted"
    text = str(err).strip().splitlines()
    first = text[0] if text else ""
    if len(first) > 240:
        first = first[:237] + "..."
    return "bad", (
        f"{label} raised {type(err).__name__}"
        + (f": {first}" if first else "")
        + _where(err, user_files)
    )


#: the persistent id that stands for a piece of user code in a result.
USER_CODE = "user code"


class _Pickler(pickle.Pickler):
    """Pickles a result with the user's code left out: a function or class defined
    in one of ``user_files`` (or in a module this process cannot import by name)
    becomes a persistent id that the parent reads back as ``None``."""

    def __init__(self, file, user_files: Sequence[str]) -> None:
        super().__init__(file)
        self.user_files = frozenset(user_files)

    def persistent_id(self, obj: Any) -> str | None:
        if isinstance(obj, functools.partial):  # a partial of the user's function
            return self.persistent_id(obj.func)
        if isinstance(obj, types.ModuleType):
            return USER_CODE if obj.__name__ not in sys.modules else None
        if isinstance(obj, types.FunctionType):
            if str(Path(obj.__code__.co_filename).resolve()) in self.user_files:
                return USER_CODE
        if isinstance(obj, (types.FunctionType, type)):
            if sys.modules.get(getattr(obj, "__module__", "") or "") is None:
                return USER_CODE
        return None


def _dumps(value: Any, user_files: Sequence[str]) -> bytes:
    buffer = io.BytesIO()
    _Pickler(buffer, user_files).dump(value)
    return buffer.getvalue()


def _call(workdir: Path) -> bytes:
    try:
        call = pickle.loads((workdir / "call.pkl").read_bytes())
    except Exception as err:
        return pickle.dumps(("internal", f"the isolated call cannot be read: {err!r}"))
    if call["jax"]:
        import jax

        for key, value in call["jax"].items():
            jax.config.update(key, value)
    try:
        value = ("ok", call["fn"](*call["args"], **call["kwargs"]))
    except BaseException as err:  # the user's code: every way out is reported
        value = _describe(err, call["label"], call["user_files"])
    try:
        return _dumps(value, call["user_files"])
    except Exception as err:
        message = f"{call['label']}: the result cannot be sent back: {err}"
        return pickle.dumps(("internal", message))


def _child(workdir: Path, parent: int) -> None:
    guard_child(parent, subreaper=True)
    blob = _call(workdir)
    kill_descendants(os.getpid())
    tmp = workdir / "result.tmp"
    tmp.write_bytes(blob)
    tmp.replace(workdir / "result.pkl")
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # no atexit hooks of the user's code


if __name__ == "__main__":
    _child(Path(sys.argv[1]), int(sys.argv[2]))

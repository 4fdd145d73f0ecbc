"""The child side of :mod:`theorycheck.commands._isolate`: ``python -m`` this module
with a work directory runs the pickled call in ``DIR/call.pkl`` and writes
``DIR/result.pkl``: ``("ok", value)`` or ``("bad", one-line message)`` for every way the
call can end (an exception, ``sys.exit``), ``("internal", message)`` when the call or
its result cannot be (un)pickled. It then leaves with ``os._exit`` (no atexit hooks
of the user's code).
"""

from __future__ import annotations

import os
import pickle
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from theorycheck._errors import BadInput


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


def _call(workdir: Path) -> tuple[str, Any]:
    try:
        call = pickle.loads((workdir / "call.pkl").read_bytes())
    except Exception as err:
        return "internal", f"the isolated call cannot be read: {err!r}"
    if call["jax"]:
        import jax

        for key, value in call["jax"].items():
            jax.config.update(key, value)
    try:
        value = ("ok", call["fn"](*call["args"], **call["kwargs"]))
    except BaseException as err:  # the user's code: every way out is reported
        value = _describe(err, call["label"], call["user_files"])
    try:
        pickle.dumps(value)
    except Exception as err:
        return "internal", f"{call['label']}: the result cannot be sent back: {err}"
    return value


def _child(workdir: Path) -> None:
    blob = pickle.dumps(_call(workdir))
    tmp = workdir / "result.tmp"
    tmp.write_bytes(blob)
    tmp.replace(workdir / "result.pkl")
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # no atexit hooks of the user's code


if __name__ == "__main__":
    _child(Path(sys.argv[1]))

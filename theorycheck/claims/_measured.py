"""Committed measurements: an expensive real-checkpoint measurement, made once by an
explicit command and read back by every later ``prove``.

A claim whose check measures a real model (SmolLM2 rollouts, a probe with JVPs over a
batch) would otherwise repeat minutes of work on every ``theorycheck prove``. Such a
check calls :func:`measured` with a committed JSON file, the measurement's settings
and the function that measures:

* ``theorycheck prove --remeasure`` (:func:`remeasuring`) runs the function and writes
  the file, with its provenance: the command, the commit, the date, the seconds it
  took, the settings and the SHA-256 of the measuring function's source;
* a plain ``prove`` reads the file when its settings and source hash equal the
  current ones; otherwise (no file, other settings, edited code) it measures now and
  says why, leaving the file as it is;
* a ``--quick`` run always measures now (its settings are the cheap ones).

The check's verdict is computed from the data by the same code either way, and its
detail line names the source (:attr:`Measured.source`): the committed file, or a
measurement made now. The file holds what was measured, never a verdict.

Examples:
    >>> import tempfile, pathlib
    >>> store = pathlib.Path(tempfile.mkdtemp()) / "m.json"
    >>> def total():
    ...     return {"sum": 6}
    >>> with remeasuring():
    ...     first = measured(store, {"n": 3}, total)
    >>> first.fresh, measured(store, {"n": 3}, total).fresh
    (True, False)
    >>> measured(store, {"n": 4}, total).source
    'measured now (m.json holds other settings)'
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import datetime
import functools
import hashlib
import inspect
import json
import os
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

#: True inside :func:`remeasuring` (``theorycheck prove --remeasure``).
_REMEASURE: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "theorycheck_remeasure", default=False
)

#: The command that regenerates every committed measurement.
REMEASURE_COMMAND = "theorycheck prove --remeasure"


@contextlib.contextmanager
def remeasuring(on: bool = True) -> Iterator[None]:
    """Inside the block, :func:`measured` measures again and rewrites its files."""
    token = _REMEASURE.set(bool(on))
    try:
        yield
    finally:
        _REMEASURE.reset(token)


@dataclasses.dataclass(frozen=True)
class Measured:
    """A measurement's data and where it came from.

    Attributes:
        data: what the measuring function returned (JSON-able).
        source: one line for the check's detail: the committed file with its date,
            commit and cost, or "measured now (why)".
        fresh: True when it was measured in this process.
        provenance: the file's provenance block (committed or just written), or {}.
    """

    data: Mapping[str, Any]
    source: str
    fresh: bool
    provenance: Mapping[str, Any] = dataclasses.field(default_factory=dict)


def code_hash(fn: Callable[..., Any]) -> str:
    """SHA-256 (first 16 hex digits) of the source of ``fn`` (a partial's function)."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    try:
        text = inspect.getsource(fn)
    except (OSError, TypeError):
        text = getattr(fn, "__qualname__", repr(fn))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _normal(obj: Any) -> Any:
    """``obj`` as JSON would give it back (tuples as lists, keys as strings)."""
    return json.loads(json.dumps(obj, sort_keys=True))


def _shown(path: Path) -> str:
    """The file relative to the working directory (never an absolute path)."""
    try:
        return path.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return path.name


def _provenance(path: Path, settings: Any, code: str, seconds: float) -> dict:
    from theorycheck import _git

    return {
        "command": REMEASURE_COMMAND,
        "commit": _git.git("rev-parse", "HEAD") or "unknown",
        "dirty": bool(_git.git("status", "--porcelain", "--untracked-files=no")),
        "date_utc": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "seconds": round(seconds, 1),
        "cpu_seconds": None,
        "settings": settings,
        "code_sha256": code,
    }


def measured(
    path: str | os.PathLike,
    settings: Mapping[str, Any],
    compute: Callable[[], Mapping[str, Any]],
    *,
    quick: bool = False,
) -> Measured:
    """The measurement ``compute()`` at ``settings``: from the committed ``path`` or
    made now (module docstring).

    Args:
        path: the committed JSON file of this measurement.
        settings: what identifies the measurement (model, sizes, seeds, ...).
        compute: measures; returns JSON-able data.
        quick: a quick run: measure now, never read or write the file.
    """
    path = Path(path)
    settings = _normal(dict(settings))
    code = code_hash(compute)
    name = _shown(path)

    def now(why: str, write: bool) -> Measured:
        start, cpu = time.perf_counter(), time.process_time()
        data = _normal(dict(compute()))
        prov = _provenance(path, settings, code, time.perf_counter() - start)
        prov["cpu_seconds"] = round(time.process_time() - cpu, 1)
        if write:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(
                json.dumps({"provenance": prov, "data": data}, indent=1) + "\n"
            )
            why = f"{why}; written to {name}"
        return Measured(data, f"measured now ({why})", True, prov)

    if quick:
        return now("a quick run", write=False)
    if _REMEASURE.get():
        return now(REMEASURE_COMMAND, write=True)
    if not path.is_file():
        return now(f"no committed {name}", write=False)
    try:
        stored = json.loads(path.read_text())
        prov, data = stored["provenance"], stored["data"]
    except (ValueError, KeyError, TypeError):
        return now(f"{name} is not a measurement file", write=False)
    if prov.get("settings") != settings:
        return now(f"{name} holds other settings", write=False)
    if prov.get("code_sha256") != code:
        return now(f"{name} was measured by other code", write=False)
    source = (
        f"the committed measurement {name} ({prov.get('date_utc')}, commit "
        f"{str(prov.get('commit'))[:10]}, {prov.get('seconds')} s; regenerate: "
        f"{REMEASURE_COMMAND})"
    )
    return Measured(data, source, False, prov)

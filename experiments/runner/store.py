"""The results file of a run: JSON written atomically, and the resumable store.

``results.json`` = ``{"config", "provenance", "units", "summary"}``, rewritten
atomically after every finished unit, so a killed run restarted with the same config
skips the finished units and ends with the same JSON. Wall-clock times go to a
separate ``timings.json``.
"""

from __future__ import annotations

import dataclasses
import json
import os

import numpy as np

from experiments.runner.provenance import commit
from theorycheck._errors import BadInput
from theorycheck._progress import stage as log


def jsonable(obj):
    """Numpy scalars/arrays and tuples turned into JSON types (recursively)."""
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return jsonable(obj.tolist())
    if isinstance(obj, np.integer | np.bool_):
        return obj.item()
    if isinstance(obj, float | np.floating):
        x = float(obj)
        return x if np.isfinite(x) else None
    return obj


def _write_bytes(path: str, data: bytes) -> None:
    """Atomic write of ``data`` (temporary file, then rename)."""
    tmp = path + ".tmp"
    with open(tmp, "wb") as fh:
        fh.write(data)
    os.replace(tmp, path)


def write_json(path: str, data) -> None:
    """Atomic write (temporary file, then rename): a kill never leaves half a file.

    Sorted keys, no whitespace: the committed results live under a size budget
    (``report.md`` is the file people read)."""
    text = json.dumps(jsonable(data), sort_keys=True, separators=(",", ":"))
    _write_bytes(path, (text + "\n").encode())


def recorded_config(data: dict, fields=None) -> dict:
    """A results file's ``config`` with the settings it predates filled in as they
    were then: ``anchor_arithmetic = "xla"`` (the anchor was XLA's engine-dtype
    pass before the exactly rounded one existed) and ``trunk_dtype = "float32"``
    (the model's own dtype, before the choice existed); with ``fields`` (the
    experiment's config fields) only those it has."""
    then = {"anchor_arithmetic": "xla", "trunk_dtype": "float32"}
    if fields is not None:
        then = {k: v for k, v in then.items() if k in fields}
    return {**then, **data.get("config", {})}


def make_out(out_dir: str) -> None:
    """Creates the output folder ``out_dir`` (bad input: one that cannot be)."""
    if not out_dir:
        raise BadInput("--out '': an empty path")
    try:
        os.makedirs(out_dir, exist_ok=True)
    except OSError as err:
        why = err.strerror or type(err).__name__
        raise BadInput(f"--out {out_dir!r}: cannot create the folder ({why})") from None


def _read_json(path: str) -> dict:
    """A JSON object the run wrote earlier (bad input: unreadable, not an object)."""
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError, RecursionError) as err:
        why = " ".join(str(err).split())[:120]
        raise BadInput(
            f"{path}: not a readable results file ({why}); pass --fresh or another "
            "--out"
        ) from None
    if not isinstance(data, dict) or not isinstance(data.get("units", {}), dict):
        raise BadInput(f"{path}: not a results file; pass --fresh or another --out")
    return data


#: config fields a restart may change: the finished units they affect are recomputed
#: from the recorded rollouts (the anchor's arithmetic: the units that read the
#: anchor; the trunk's dtype: every unit)
_RECOMPUTABLE = {"anchor_arithmetic", "trunk_dtype"}


class ResultStore:
    """Resumable results: finished units survive a kill.

    Args:
        out_dir: output folder (created).
        config: the run's config (a restart with a different config is refused;
            the output folder itself may move).
        fresh: start over, discarding finished units.
        recompute: finished unit ids to compute again (:meth:`forget`).
        reads_anchor: ``reads_anchor(result) -> bool``, whether a finished unit
            read the anchor (the experiment's knowledge; None: every unit does).
    """

    def __init__(
        self,
        out_dir: str,
        config,
        *,
        fresh: bool = False,
        recompute=(),
        reads_anchor=None,
    ):
        self.reads_anchor = reads_anchor or (lambda result: True)
        make_out(out_dir)
        self.out_dir = out_dir
        self.path = os.path.join(out_dir, "results.json")
        self.timings_path = os.path.join(out_dir, "timings.json")
        want = jsonable(dataclasses.asdict(config))
        # a unit's numbers do not depend on the output folder or on how many seeds
        # the run has: a run may be extended (or reported) with more or fewer seeds
        loose = ("out", "seeds", "first_seed")
        same = lambda a: {k: v for k, v in a.items() if k not in loose}  # noqa: E731
        self.data = {"config": want, "units": {}}
        self.timings: dict = {}
        if fresh:
            prune_replay(out_dir)  # every unit is recomputed
        if not fresh and os.path.exists(self.path):
            old = _read_json(self.path)
            before, after = same(recorded_config(old, want)), same(want)
            changed = {
                k for k in before.keys() | after.keys() if before.get(k) != after.get(k)
            }
            if changed - _RECOMPUTABLE:
                raise BadInput(
                    f"{self.path} holds a run with another config; pass --fresh or "
                    "another --out"
                )
            self.data = {**old, "config": want}
            if os.path.exists(self.timings_path):
                self.timings = _read_json(self.timings_path)
            if "trunk_dtype" in changed:
                self._drop_all(
                    f"trunk {before['trunk_dtype']} -> {want['trunk_dtype']}"
                )
            elif changed:
                self._drop_anchored(before["anchor_arithmetic"], want)
        if recompute:
            self.forget(list(recompute))
            log(f"{len(recompute)} finished unit(s) will be recomputed")

    def forget(self, ids: list[str]) -> None:
        """Drops finished units (numbers, timing, computing commit, replay entries)
        so that the run computes them again; an id that is not a finished unit is
        bad input."""
        units = self.data["units"]
        unknown = [u for u in ids if u not in units]
        if unknown:
            raise BadInput(
                f"--recompute {', '.join(unknown)}: not a finished unit of {self.path}"
            )
        for u in ids:
            units.pop(u)
            self.data.get("unit_commits", {}).pop(u, None)
            self.timings.pop(u, None)
        prune_replay(self.out_dir, ids)

    def _drop_all(self, why: str) -> None:
        """A restart that changes the trunk's dtype recomputes every unit (each
        reads the trunk) from the recorded rollouts."""
        n = len(self.data["units"])
        self.forget(list(self.data["units"]))
        log(f"{why}: every finished unit ({n}) will be recomputed")

    def _drop_anchored(self, was: str, want: dict) -> None:
        """A restart that changes only ``anchor_arithmetic`` recomputes the units
        that read the anchor (``reads_anchor``) and keeps the others."""
        units = self.data["units"]
        drop = [u for u, r in units.items() if self.reads_anchor(r)]
        self.forget(drop)
        log(
            f"anchor arithmetic {was} -> {want['anchor_arithmetic']}: "
            f"{len(drop)} unit(s) that read the anchor will be recomputed, "
            f"{len(units)} unit(s) that do not read it kept"
        )

    def done(self, unit: str) -> bool:
        """Whether ``unit`` finished in this or an earlier run."""
        return unit in self.data["units"]

    def save(self, unit: str, result, *, seconds: float | None = None) -> None:
        """Records a finished unit (and the commit that computed it) and writes the
        file."""
        self.data["units"][unit] = jsonable(result)
        state = commit(self.out_dir)
        sha = state["commit"]
        self.data.setdefault("unit_commits", {})[unit] = (
            f"{sha}+dirty" if sha and state["dirty"] else sha
        )
        write_json(self.path, self.data)
        if seconds is not None:
            self.timings[unit] = seconds
            write_json(self.timings_path, self.timings)

    def finish(self, **extra) -> dict:
        """Adds ``extra`` top-level entries (provenance, summary), writes, returns."""
        self.data.update(jsonable(extra))
        write_json(self.path, self.data)
        return self.data


def prune_replay(out_dir: str, drop=None) -> int:
    """Removes the units ``drop`` (None: every unit) from
    ``out_dir``/replay/replay.json (their numbers are being recomputed, so no
    replay has checked them); returns how many entries went."""
    path = os.path.join(out_dir, "replay", "replay.json")
    if not os.path.exists(path):
        return 0
    with open(path) as fh:
        record = json.load(fh)
    held = record.get("units", {})
    gone = list(held) if drop is None else [u for u in drop if u in held]
    for u in gone:
        record["units"].pop(u)
    if gone:
        write_json(path, record)
    return len(gone)

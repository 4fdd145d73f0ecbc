"""The LCO section: NTK-linearization residuals and gradient-norm bounds.

Runs ``python -m experiments.linearization`` and ``experiments.gradient_bounds`` in
subprocesses (their progress and stdout stay out of the report's streams): ``quick``
= the tiny random model built in code (one seed), otherwise one seed on SmolLM2-135M
with the last two blocks trainable. The full runs and what they found:
``docs/linearization.md``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from theorycheck.reproduce._core import SectionResult
from theorycheck.reproduce._subprocess import run_experiment

#: (experiment, arguments of the short run) for (full, quick).
RUNS = {
    False: (
        ("linearization", ["--seeds", "1"]),
        ("gradient_bounds", ["--seeds", "1", "--fixed-losses", "lco_mse"]),
    ),
    True: (
        ("linearization", ["--tiny", "--seeds", "1", "--subsets", "1,all"]),
        ("gradient_bounds", ["--tiny", "--seeds", "1"]),
    ),
}


def linearization_section(out: Path, quick: bool) -> SectionResult:
    """Short runs of both experiments; their reports' tables, figures and summaries."""
    out = Path(out)
    parts, data, figures = [], {}, []
    for name, args in RUNS[quick]:
        run_dir = run_experiment(name, args, out)
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

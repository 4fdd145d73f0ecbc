"""The LCO section: NTK-linearization residuals and gradient-norm bounds.

Runs ``python -m experiments.linearization`` and ``experiments.gradient_bounds`` in
subprocesses: ``quick`` = the tiny random model built in code (one seed), otherwise
one seed on SmolLM2-135M with the last two blocks trainable. The tables are each
experiment's ``section`` of its results JSON. The full runs and what they found:
``docs/linearization.md``.
"""

from __future__ import annotations

from pathlib import Path

from theorycheck.reproduce._core import SectionResult
from theorycheck.reproduce._subprocess import figures, render, run_experiment

#: (experiment, arguments of the short run) for (full, quick).
RUNS = {
    False: (
        ("linearization", ["--seeds", "1"]),
        (
            "gradient_bounds",
            ["--seeds", "1", "--fixed-losses", "lco_mse"],
        ),
    ),
    True: (
        (
            "linearization",
            ["--tiny", "--seeds", "1", "--subsets", "1,all"],
        ),
        ("gradient_bounds", ["--tiny", "--seeds", "1"]),
    ),
}


def linearization_section(out: Path, quick: bool) -> SectionResult:
    """Short runs of both experiments; their tables, figures and summaries."""
    out = Path(out)
    parts, data, figs = [], {}, []
    for name, args in RUNS[quick]:
        run_dir = run_experiment(name, args, out)
        text, results = render(name, run_dir)
        parts += [f"### `experiments.{name}`", "", text, ""]
        parts.append(f"Full report: [{name}/report.md]({name}/report.md).")
        parts.append("")
        data[name] = results["summary"]
        figs += figures(run_dir, name)
    config = {
        "commands": [
            " ".join([f"python -m experiments.{n}", *a]) for n, a in RUNS[quick]
        ]
    }
    return SectionResult("\n".join(parts), data, tuple(figs), config)

"""The probe section: sign agreement of ΔD predictions on real multi-step updates.

Runs ``python -m experiments.sign_agreement`` in a subprocess (its progress and stdout
stay out of the report's streams): ``quick`` = the tiny random model built in code,
otherwise one seed of the base variant on SmolLM2-135M. The full default grid is
``python -m experiments.sign_agreement`` (``docs/probes.md``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from theorycheck.reproduce._core import SectionResult
from theorycheck.reproduce._subprocess import run_experiment

#: Arguments of the short run (full, quick).
PROBE_ARGS = {
    False: ["--seeds", "1", "--grid", "base", "--masks", "base"],
    True: ["--tiny", "--seeds", "2", "--grid", "base", "--masks", "base"],
}
_SHOWN = ("always_rise", "ratio", "ddot_full", "ddot_topk_aggregated", "ntk1", "ntk2")


def _cell(stat) -> str:
    if not stat or stat.get("mean") is None:
        return "–"
    se = "" if stat.get("se") is None else f" ± {stat['se']:.2f}"
    return f"{stat['mean']:.2f}{se}"


def probe_section(out: Path, quick: bool) -> SectionResult:
    """The short sign-agreement run; its one-step table for the base variant."""
    run_dir = run_experiment("sign_agreement", PROBE_ARGS[quick], out)
    data = json.loads((run_dir / "results.json").read_text())
    base = data["summary"]["base"]
    lines = [
        "Per token, the predicted sign of ΔD(μ‖π) against the realized change after "
        "each real optimizer step under a fixed anchor (AdamW, M = 4 minibatches): the "
        "ratio criterion, the tabular Ḋ (exact and top-K), and the NTK-coupled first "
        "and second order from one JVP of the real update. Mean ± standard error over "
        'seeds; the base rate is the agreement of "D always rises". Full report: '
        "[sign_agreement/report.md](sign_agreement/report.md).",
        "",
        "| predictor | base rate | agreement | balanced accuracy |",
        "|---|---|---|---|",
    ]
    for name in _SHOWN:
        k = f"metrics/step/{name}/"
        lines.append(
            f"| {name} | {_cell(base.get(k + 'base_rate'))} | "
            f"{_cell(base.get(k + 'agreement'))} | "
            f"{_cell(base.get(k + 'balanced_accuracy'))} |"
        )
    figures = tuple(
        f"sign_agreement/{f}" for f in sorted(os.listdir(run_dir)) if f.endswith(".png")
    )
    config = {
        "command": " ".join(
            ["python -m experiments.sign_agreement", *PROBE_ARGS[quick]]
        )
    }
    summary = {k: v for k, v in base.items() if k.startswith("metrics/step/")}
    return SectionResult("\n".join(lines), {"base": summary}, figures, config)

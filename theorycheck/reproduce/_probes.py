"""The probe section: sign agreement of ΔD predictions on real multi-step updates.

Runs ``python -m experiments.sign_agreement`` in a subprocess (its progress and stdout
stay out of the report's streams): ``quick`` = the tiny random model built in code,
otherwise two seeds of the base variant on SmolLM2-135M. The full default grid is
``python -m experiments.sign_agreement`` (``docs/probes.md``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from theorycheck import _progress
from theorycheck.reproduce._core import SectionResult

#: Arguments of the short run (full, quick).
PROBE_ARGS = {
    False: ["--seeds", "2", "--grid", "base", "--masks", "base"],
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
    run_dir = Path(out) / "sign_agreement"
    argv = [sys.executable, "-m", "experiments.sign_agreement", "--out", str(run_dir)]
    argv += PROBE_ARGS[quick]
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
            f"the sign-agreement run exited {proc.returncode}: "
            f"{(proc.stderr or '')[-400:]}"
        )
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

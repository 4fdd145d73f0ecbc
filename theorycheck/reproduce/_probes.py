"""The probe section: sign agreement of ΔD predictions on real multi-step updates.

Runs ``python -m experiments.sign_agreement`` in a subprocess: ``quick`` = the tiny
random model built in code, otherwise two seeds of both regimes (``base``:
``bf16_engine``; ``on_policy``) at the experiment's batch size on SmolLM2-135M. The
tables are the experiment's ``section`` of its results JSON. The full default run is
``python -m experiments.sign_agreement`` (``docs/probes.md``).
"""

from __future__ import annotations

from pathlib import Path

from theorycheck.reproduce._core import SectionResult
from theorycheck.reproduce._subprocess import figures, render, run_experiment

#: Arguments of the short run (full, quick).
PROBE_ARGS = {
    False: ["--seeds", "2", "--prompts", "4", "--new-tokens", "16", "--min-mixed", "1"],
    True: ["--tiny", "--seeds", "2", "--grid", "base,on_policy"],
}


def probe_section(out: Path, quick: bool) -> SectionResult:
    """The short sign-agreement run, both regimes; tables from its results JSON."""
    run_dir = run_experiment("sign_agreement", PROBE_ARGS[quick], out)
    text, data = render("sign_agreement", run_dir)
    lines = [
        "Per token, the predicted sign of ΔD(μ‖π) against the realized change after "
        "each real optimizer step under a fixed anchor: the ratio criterion, the "
        "tabular Ḋ (exact and top-K) and the NTK-coupled first and second order from "
        "one JVP of the real update; the masks with matched controls (each rule "
        "re-thresholded to the coupled mask's share, and a random mask). Full report: "
        "[sign_agreement/report.md](sign_agreement/report.md).",
        "",
        text,
    ]
    config = {
        "command": " ".join(
            ["python -m experiments.sign_agreement", *PROBE_ARGS[quick]]
        )
    }
    summary = {
        name: {"regime": v["regime"], "seeds": v["seeds"]}
        | {k: x for k, x in v["stats"].items() if k.startswith(("signal/", "masks/"))}
        for name, v in data["summary"].items()
    }
    return SectionResult(
        "\n".join(lines), summary, figures(run_dir, "sign_agreement"), config
    )

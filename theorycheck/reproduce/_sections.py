"""The report's sections: the papers' claims, the convexity table, the rollout analysis.

Each is ``(out_dir, quick) -> SectionResult``. Figures are matplotlib PNGs under
``out_dir``; every number in the markdown comes from the run itself.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from theorycheck import _progress
from theorycheck._atomic import save_figure_atomic
from theorycheck.reproduce._core import SectionResult

#: The registry rules of the quick convexity table.
QUICK_RULES = ("pg", "dppo_binary_tv")
#: Seeds and sizes of the rollout analysis (full, quick).
ROLLOUT_ARGS = {
    False: ["--samples", "4", "--new-tokens", "16", "--topk", "20", "--seeds", "1"],
    True: ["--samples", "2", "--new-tokens", "6", "--topk", "20", "--seeds", "1"],
}
_STATUS_COLOR = {
    "holds": "#2e7d32",
    "holds_with_correction": "#f9a825",
    "fails": "#c62828",
    "unknown": "#757575",
}


def proofs_dir() -> Path:
    """``$THEORYCHECK_PROOFS`` when set, else ``./proofs`` when it exists, else the
    ``proofs/`` beside the package."""
    if os.environ.get("THEORYCHECK_PROOFS"):
        return Path(os.environ["THEORYCHECK_PROOFS"])
    here = Path.cwd() / "proofs"
    return here if here.is_dir() else Path(__file__).resolve().parents[2] / "proofs"


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def prove_section(out: Path, quick: bool) -> SectionResult:
    """``theorycheck prove`` over ``proofs/``: statuses, failures, a timing figure."""
    from theorycheck.claims import counts, run_claims, write_report

    path = proofs_dir()
    results = run_claims([path], quick=quick)
    write_report(results, out)
    tally = counts(results)
    lines = [
        f"{len(results)} claims from `{path.name}/`: "
        + ", ".join(f"{n} {s}" for s, n in sorted(tally.items()))
        + ". Every check, detail and counterexample: [proofs.md](proofs.md) "
        "([proofs.json](proofs.json)).",
        "",
        "| claim | status | methods | seconds |",
        "|---|---|---|---|",
    ]
    for r in results:
        kinds = ", ".join(f"{m.method}: {m.outcome}" for m in r.methods)
        lines.append(f"| `{r.id}` | **{r.status}** | {kinds} | {r.seconds:.1f} |")
    broken = [r for r in results if str(r.status) in ("fails", "holds_with_correction")]
    if broken:
        lines += ["", "Statements that fail as written:", ""]
        for r in broken:
            cx = next(m for m in r.methods if m.result.counterexample)
            lines.append(f"- `{r.id}` ({r.status}): {cx.result.detail}")
            if r.correction is not None and r.correction.status == "holds":
                lines.append(f"  Correction that holds: {r.correction.statement}")
    plt = _plt()
    fig, ax = plt.subplots(figsize=(9, 0.3 * len(results) + 1.2))
    ax.barh(
        [r.id for r in results],
        [r.seconds for r in results],
        color=[_STATUS_COLOR[str(r.status)] for r in results],
    )
    # the status is written beside each bar, not carried by its colour alone
    for i, r in enumerate(results):
        ax.text(r.seconds, i, f" {r.status}", va="center", fontsize=8)
    handles = [
        plt.Rectangle((0, 0), 1, 1, color=color, label=status)
        for status, color in _STATUS_COLOR.items()
    ]
    ax.legend(handles=handles, fontsize=8, loc="lower right")
    ax.invert_yaxis()
    ax.set_xlabel("seconds per claim (bar), status (text and colour)")
    fig.tight_layout()
    save_figure_atomic(fig, out / "proofs.png", dpi=100)
    plt.close(fig)
    data = {"counts": tally, "claims": [r.to_json() for r in results]}
    config = {"proofs": str(path), "quick": quick, "claims": len(results)}
    return SectionResult("\n".join(lines), data, ("proofs.png",), config)


def convexity_section(out: Path, quick: bool) -> SectionResult:
    """``check_convexity`` for every registry rule at adv = +1 and -1 (q = 1/2)."""
    from theorycheck.convexity import check_convexity
    from theorycheck.losses import LOSSES

    names = list(QUICK_RULES) if quick else sorted(LOSSES)
    rows, cells = [], {}
    jobs = [(n, a) for n in names for a in (1.0, -1.0)]
    for name, adv in _progress.bar(jobs, desc="convexity", unit="verdict"):
        start = time.perf_counter()
        try:
            # a rule that takes no advantage (sft) refuses --set adv: checked as is
            params = {"adv": adv} if "adv" in LOSSES[name].inputs else {}
            res = check_convexity(name, params=params)
            cell = {
                "verdict": res.verdict,
                "scope": res.scope,
                "condition": res.condition,
                "params": res.params,
            }
        except Exception as exc:  # noqa: BLE001 -- a rule the checker refuses
            cell = {"verdict": "error", "error": f"{type(exc).__name__}: {exc}"}
        cell["seconds"] = round(time.perf_counter() - start, 1)
        cells[f"{name}|{adv:+g}"] = cell

    def text(c):
        if c["verdict"] == "error":
            return f"error: {c['error'][:80]}"
        cond = f"; {c['condition']}" if c.get("condition") else ""
        return f"{c['verdict']} ({c['scope']}){cond} [{c['seconds']:g} s]"

    lines = ["| loss | Â = +1 | Â = −1 |", "|---|---|---|"]
    for name in names:
        pos, neg = cells[f"{name}|+1"], cells[f"{name}|-1"]
        lines.append(f"| {name} | {text(pos)} | {text(neg)} |")
        rows.append((name, pos["verdict"], neg["verdict"]))
    total = sum(c["seconds"] for c in cells.values())
    head = (
        f"{len(cells)} verdicts (q = 1/2, registry defaults, V = 3, 512 starts), "
        f"{total:.0f} s in all."
    )
    plt = _plt()
    colors = {"convex": 2, "unknown": 1, "not_convex": 0, "error": 1}
    grid = [[colors.get(v, 1) for v in (p, n)] for _, p, n in rows]
    fig, ax = plt.subplots(figsize=(4.5, 0.28 * len(rows) + 1.2))
    ax.imshow(grid, cmap="RdYlGn", vmin=0, vmax=2, aspect="auto")
    ax.set_yticks(range(len(rows)), [r[0] for r in rows])
    ax.set_xticks([0, 1], ["Â = +1", "Â = −1"])
    for i, (_, pos, neg) in enumerate(rows):
        for j, verdict in enumerate((pos, neg)):
            ink = "white" if colors.get(verdict, 1) == 0 else "black"
            label = verdict.replace("_", " ")
            ax.text(j, i, label, ha="center", va="center", fontsize=8, color=ink)
    ax.set_title("verdict per rule and advantage sign", fontsize=9)
    fig.tight_layout()
    save_figure_atomic(fig, out / "convexity.png", dpi=100)
    plt.close(fig)
    config = {"rules": len(names), "q": "1/2", "vocab": 3, "num_starts": 512, "seed": 0}
    return SectionResult(
        head + "\n\n" + "\n".join(lines), cells, ("convexity.png",), config
    )


def rollout_section(out: Path, quick: bool) -> SectionResult:
    """The rollout analysis (``python -m experiments.rollout_analysis``) in a
    subprocess; its tables rendered from its results JSON."""
    from theorycheck.reproduce._subprocess import figures, render, run_experiment

    run_dir = run_experiment("rollout_analysis", ROLLOUT_ARGS[quick], out)
    text, data = render("rollout_analysis", run_dir)
    lines = [
        "The embedded checkpoint samples in bfloat16 (the rollout engine) and "
        "recomputes in float32 (the trainer); per token: divergences, exact Ḋ and its "
        "top-K estimates, masks. Full report: "
        "[rollout_analysis/report.md](rollout_analysis/report.md).",
        "",
        text,
    ]
    config = {
        "command": " ".join(
            ["python -m experiments.rollout_analysis", *ROLLOUT_ARGS[quick]]
        )
    }
    summary = {k: v for k, v in data["summary"]["stats"].items()}
    return SectionResult(
        "\n".join(lines), summary, figures(run_dir, "rollout_analysis"), config
    )

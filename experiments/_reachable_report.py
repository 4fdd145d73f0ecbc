"""Summary, report section and figure of the ``reach/*`` units (``_reachable``)."""

from __future__ import annotations

import numpy as np

from experiments._linearization_report import cell
from experiments._reachable import LOSS
from experiments.runner import stat


def summarize(units: dict) -> dict | None:
    """Per s: ``runner.stat`` over seeds (mean, se, n, ci95: the 95% percentile
    bootstrap interval of the mean); per seed: the first failing s."""
    runs = {
        int(k.rsplit("seed", 1)[1]): v
        for k, v in units.items()
        if k.startswith(f"reach/{LOSS}/")
    }
    if not runs:
        return None
    recs = [r["scales"] for r in runs.values()]
    rows = []
    for i, s in enumerate(x["scale"] for x in recs[0]):
        at = [r[i] for r in recs]
        mids = [x["mid"] for x in at if "mid" in x]
        rows.append(
            {
                "scale": s,
                "ratio": stat([x["start"]["ratio"] for x in at]),
                "ratio_mid": stat([m["ratio"] for m in mids]),
                "ratio_dev": stat(
                    [abs(x["start"]["ratio"] - 1) for x in at if x["start"]["ratio"]]
                ),
                "residual": stat([x["residual"] for x in at]),
                "loss0": stat([x["loss0"] for x in at]),
                "fails": sum(not x["start"]["holds"] for x in at),
                "fails_mid": sum(not m["holds"] for m in mids),
                "midpoints": len(mids),
            }
        )
    flat = [x for r in recs for x in r]
    first = [r["first_fail_scale"] for r in runs.values() if r["first_fail_scale"]]
    return {
        "loss": LOSS,
        "seeds": len(runs),
        "scales": rows,
        "per_seed": {
            f"seed{seed}": {
                "first_fail_scale": r["first_fail_scale"],
                "residual_at_first_fail": r["residual_at_first_fail"],
                "ratio": [x["start"]["ratio"] for x in r["scales"]],
            }
            for seed, r in sorted(runs.items())
        },
        "holds_on_whole_grid": sum(
            r["first_fail_scale"] is None for r in runs.values()
        ),
        "smallest_fail_scale": min(first) if first else None,
        "residual_at_first_fail": stat(
            [r["residual_at_first_fail"] for r in runs.values()]
        ),
        # |ratio − 1| ≤ ρ (Cauchy-Schwarz, module docstring): a violation is a bug
        "ratio_bound_violations": sum(
            abs(x["start"]["ratio"] - 1) > x["residual"] * (1 + 1e-9) + 1e-12
            for x in flat
            if x["start"]["ratio"] is not None
        ),
        "loss_star_over_loss0_max": max(abs(x["loss_star"]) / x["loss0"] for x in flat),
    }


def markdown_rows(r: dict | None, cfg: dict) -> list[str]:
    """The report's section (empty without ``reach`` units)."""
    if r is None:
        return []
    n = r["seeds"]
    rows = [
        f"## Prop. 4.4 with a reachable target θ* = θ_0 + s·d (LCO-MSE, first "
        f"{cfg['gd_sequences']} sequences)",
        "",
        "d: a Gaussian direction with ‖d‖ = ‖θ_0‖ per parameter tensor; z* = z(θ*) "
        "is reached exactly, so L(θ*) = 0 and the ε-slack is 0 (largest L(θ*)/L(θ_0) "
        f"measured: {r['loss_star_over_loss0_max']:.1e}). ratio = ⟨∇_θL, θ−θ*⟩ / "
        "⟨∇_zL, z−z*⟩ (= ⟨∇_θL, θ−θ*⟩ / 2L); the needed inequality "
        "⟨∇_θL, θ−θ*⟩ ≥ L(θ) − L(θ*) is ratio ≥ 1/2. ρ = ‖z* − z_0 − J(θ*−θ_0)‖ / "
        "‖z* − z_0‖ (one jvp), and abs(ratio − 1) ≤ ρ at θ_0 "
        f"({r['ratio_bound_violations']} violations).",
        "",
        "| s | ratio at θ_0 | ratio at θ_0 + (s/2)d | abs(ratio − 1) at θ_0 | ρ | "
        "L(θ_0) | needed ineq. fails (θ_0 / midpoint) |",
        "|---|---|---|---|---|---|---|",
    ]
    for x in r["scales"]:
        mid = f"{x['fails_mid']}/{x['midpoints']}" if x["midpoints"] else "n/a"
        rows.append(
            f"| {x['scale']:g} | {cell(x['ratio'], 4)} | {cell(x['ratio_mid'], 4)} | "
            f"{cell(x['ratio_dev'])} | {cell(x['residual'])} | "
            f"{cell(x['loss0'])} | {x['fails']}/{n} / {mid} |"
        )
    seeds = []
    for seed, p in r["per_seed"].items():
        if p["first_fail_scale"] is None:
            seeds.append(f"{seed}: holds on the whole grid")
        else:
            seeds.append(
                f"{seed}: first fails at s = {p['first_fail_scale']:g} "
                f"(ρ = {p['residual_at_first_fail']:.3g})"
            )
    rows += ["", "Smallest s at which the inequality fails at θ_0: " + "; ".join(seeds)]
    return [*rows, ""]


def figure(r: dict | None, path: str) -> None:
    """reach.png: the ratio vs s (log x) with the 1/2 line, and ρ vs s."""
    if r is None:
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from experiments import runner

    s = np.array([x["scale"] for x in r["scales"]])

    def series(key):
        m = np.array(
            [np.nan if x[key]["mean"] is None else x[key]["mean"] for x in r["scales"]]
        )
        e = np.array([x[key]["se"] or 0.0 for x in r["scales"]])
        return m, e

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
    for key, label, style in (
        ("ratio", "at θ_0", "o-"),
        ("ratio_mid", "at midpoint", "s--"),
    ):
        m, e = series(key)
        if np.any(np.isfinite(m)):
            axes[0].errorbar(s, m, yerr=e, fmt=style, ms=3, capsize=2, label=label)
    axes[0].axhline(0.5, color="r", lw=0.8, label="1/2: below, Prop. 4.4 fails")
    axes[0].axhline(1.0, color="k", lw=0.5, ls=":")
    axes[0].set_xscale("log")
    axes[0].set_xlabel("s (θ* = θ_0 + s·d, ‖d‖ = ‖θ_0‖ per tensor)")
    axes[0].set_title("⟨∇θL, θ−θ*⟩ / ⟨∇zL, z−z*⟩", fontsize=9)
    axes[0].legend(fontsize=8)
    m, e = series("residual")
    axes[1].errorbar(s, m, yerr=e, fmt="o-", ms=3, capsize=2, label="ρ")
    m, e = series("ratio_dev")
    axes[1].errorbar(s, m, yerr=e, fmt="s--", ms=3, capsize=2, label="|ratio − 1| ≤ ρ")
    axes[1].legend(fontsize=8)
    axes[1].axhline(0.5, color="r", lw=0.8)
    axes[1].set_xscale("log")
    axes[1].set_yscale("log")
    axes[1].set_xlabel("s")
    axes[1].set_title("linearization residual ρ at θ*", fontsize=9)
    runner.savefig(fig, path)

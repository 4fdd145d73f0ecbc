"""Summary, markdown report and figures of ``experiments.linearization``.

Every over-seed number is ``experiments.runner.stat`` of the per-seed values: mean,
standard error, n and ``ci95``, the 95% percentile bootstrap interval of the mean over
seeds. A table cell reads ``mean [lo, hi]`` (the mean alone where fewer than 2 seeds
have a value). With the 2-5 seeds of the committed runs that interval is rough: a
percentile bootstrap undercovers at small n.
"""

from __future__ import annotations

import os

import numpy as np

from experiments import runner

#: the per-α statistics reported at α = 1 (the real update).
AT_ONE = (
    "residual_median",
    "residual_aggregate",
    "logp_relerr_median",
    "logp_sign_agreement",
    "logp_lin_relerr_median",
    "div_relerr_median",
    "div_sign_agreement",
    "div_lin_relerr_median",
    "loss_relerr",
    "loss_lin_relerr",
)


def _at_one(step: dict, stat: str):
    if stat not in step:
        return None
    a = np.asarray(step["alphas"])
    i = int(np.argmin(np.abs(np.log(a))))
    return step[stat][i]


def _threshold(steps: list[dict], stat: str, level: str) -> dict:
    """The α at which ``stat`` reaches ``level``, over the seeds that crossed it
    inside the grid: ``log10_alpha`` = ``stat`` of log10 α; ``alpha_geomean`` =
    :math:`10^{\\overline{\\log_{10}\\alpha}}` (the geometric mean) and
    ``alpha_ci95`` = :math:`10^{\\mathrm{ci}}` of the interval of log10 α."""
    found = [s["thresholds"][stat][level] for s in steps]
    logs = [np.log10(f["alpha"]) for f in found if f["kind"] == "interpolated"]
    out = {
        "log10_alpha": runner.stat(logs),
        "below_grid": sum(f["kind"] == "below_grid" for f in found),
        "not_reached": sum(f["kind"] == "not_reached" for f in found),
    }
    lg = out["log10_alpha"]
    out["alpha_geomean"] = None if lg["mean"] is None else 10 ** lg["mean"]
    out["alpha_ci95"] = None if lg["ci95"] is None else [10**x for x in lg["ci95"]]
    return out


def slope(alphas, residual) -> float | None:
    """Least-squares slope of :math:`\\log\\rho` against :math:`\\log\\alpha`
    over the grid points with :math:`\\alpha \\le 1` and :math:`\\rho > 0` (None
    with fewer than 2): 1 when the residual is the second-order term, ρ ∝ α.

    Examples:
        >>> round(slope([0.01, 0.1, 1.0, 10.0], [2e-4, 2e-3, 2e-2, 0.9]), 12)
        1.0
    """
    a = np.asarray(alphas, float)
    c = np.array([np.nan if v is None else v for v in residual], float)
    keep = (a <= 1 + 1e-12) & np.isfinite(c) & (c > 0)
    if keep.sum() < 2:
        return None
    return float(np.polyfit(np.log(a[keep]), np.log(c[keep]), 1)[0])


def _curve(steps: list[dict], stat: str) -> list:
    x = np.array([[np.nan if v is None else v for v in s[stat]] for s in steps], float)
    with np.errstate(all="ignore"):
        return [None if np.all(np.isnan(c)) else float(np.nanmean(c)) for c in x.T]


def _names(text: str) -> list[str]:
    return [n.strip() for n in text.split(",") if n.strip()]


def summarize(data: dict) -> dict:
    """``runner.stat`` over seeds (mean, se, n, ci95, mde) of every number, per
    (loss, subset, steps m) of the run's config."""
    cfg = data["config"]
    return _summarize(data["units"], _names(cfg["losses"]), _names(cfg["subsets"]))


def _summarize(units: dict, losses: list[str], subsets: list[str]) -> dict:
    out = {}
    for loss in losses:
        for sub in subsets:
            runs = [
                u for u in units.values() if u["loss"] == loss and u["subset"] == sub
            ]
            if not runs:
                continue
            for m in sorted({m for u in runs for m in u["steps"]}, key=int):
                steps = [u["steps"][m] for u in runs if m in u["steps"]]
                row = {
                    "seeds": len(steps),
                    "trainable_params": runs[0]["trainable_params"],
                    "update_norm": runner.stat([s["update_norm"] for s in steps]),
                    "at_alpha_1": {
                        stat: runner.stat([_at_one(s, stat) for s in steps])
                        for stat in AT_ONE
                    },
                    "residual_slope": runner.stat(
                        [slope(s["alphas"], s["residual_median"]) for s in steps]
                    ),
                    "thresholds": {
                        stat: {
                            lv: _threshold(steps, stat, lv)
                            for lv in steps[0]["thresholds"][stat]
                        }
                        for stat in steps[0]["thresholds"]
                    },
                    "alphas": steps[0]["alphas"],
                    "residual_median_curve": _curve(steps, "residual_median"),
                    "logp_relerr_curve": _curve(steps, "logp_relerr_median"),
                    "loss_relerr_curve": _curve(steps, "loss_relerr"),
                }
                out[f"{loss}/{sub}/m{m}"] = row
    return out


def interval(mean, ci, fmt) -> str:
    """``mean [lo, hi]`` with ``fmt(x, extra)`` (``extra``: digits added to the
    format's own); ``mean`` alone when ``ci`` is None. ``extra`` grows (up to 8) until
    each end of the interval reads apart from the mean (where it differs from it), so
    a narrow interval around a rate of 0.999997 does not print as ``1 [1, 1]``.

    Examples:
        >>> g = lambda x, extra: f"{x:.{2 + extra}g}"
        >>> interval(0.5, [0.25, 0.75], g), interval(0.5, None, g)
        ('0.5 [0.25, 0.75]', '0.5')
        >>> interval(0.9999973, [0.9999944, 0.9999998], g)
        '0.999997 [0.999994, 1]'
        >>> interval(1.0, [1.0, 1.0], g)
        '1 [1, 1]'
    """
    if mean is None:
        return "n/a"
    if not ci:
        return fmt(mean, 0)
    for extra in range(9):
        m, lo, hi = fmt(mean, extra), fmt(ci[0], extra), fmt(ci[1], extra)
        if (lo != m or ci[0] == mean) and (hi != m or ci[1] == mean):
            break
    return f"{m} [{lo}, {hi}]"


def cell(ms: dict | None, digits: int = 3) -> str:
    """A table cell of a ``runner.stat``: ``mean [lo, hi]`` (95% bootstrap interval
    over seeds) where it has one (n ≥ 2), the mean alone otherwise, ``n/a`` without
    a value."""
    if ms is None:
        return "n/a"
    return interval(
        ms.get("mean"), ms.get("ci95"), lambda x, extra: f"{x:.{digits + extra}g}"
    )


def alpha_cell(th: dict, digits: int = 3) -> str:
    """The geometric mean of a threshold α with the interval ``10**ci`` of log10 α."""
    return interval(
        th["alpha_geomean"],
        th.get("alpha_ci95"),
        lambda x, extra: f"{x:.{digits + extra}g}",
    )


def _alpha(th: dict) -> str:
    parts = []
    if th["alpha_geomean"] is not None:
        parts.append(alpha_cell(th))
    if th["below_grid"]:
        parts.append(f"{th['below_grid']}× below grid")
    if th["not_reached"]:
        parts.append(f"{th['not_reached']}× not reached")
    return "; ".join(parts) or "n/a"


def seeds_sentence(ns) -> str:
    """The header sentence of a report: what a cell is, with n = the seeds per
    setting (``ns``: their counts)."""
    ns = sorted(set(ns))
    n = "?" if not ns else str(ns[0]) if len(ns) == 1 else f"{ns[0]}–{ns[-1]}"
    return (
        f"Each cell: mean [95% percentile bootstrap interval] over the n = {n} seeds "
        "(the mean alone where fewer than 2 seeds have a value); with so few seeds "
        "the interval is rough: a percentile bootstrap undercovers at small n."
    )


def markdown(data: dict, timings: dict) -> str:
    """The report: thresholds and first-order errors at α = 1, per setting."""
    cfg = data["provenance"]["config"]
    rows = [
        "# NTK-linearization residuals of real RL updates",
        "",
        f"Model `{cfg['model']}`, task `{cfg['task']}`, {cfg['prompts']} prompts × "
        f"{cfg['samples']} samples × {cfg['new_tokens']} tokens, optimizer "
        f"{cfg['optimizer']} lr {cfg['lr']}, M = {cfg['minibatches']} minibatches × "
        f"{cfg['epochs']} epoch(s), seeds {data['provenance']['seeds']}, α grid "
        f"[{cfg['alpha_min']}, {cfg['alpha_max']}] × {cfg['alpha_count']}; residuals "
        f"in float64 on the first {cfg['eval_sequences']} sequences. Commit "
        f"`{data['provenance']['commit']}`. "
        + seeds_sentence(r["seeds"] for r in data["summary"].values()),
        "",
        *runner.unfinished_line(data),
        "α at which the median per-token residual reaches 10% / 50% (geometric "
        "mean [10^interval of log10 α] over the seeds that crossed the level inside "
        "the grid):",
        "",
        "| setting | params | ‖Δθ‖ | α (10%) | α (50%) | residual at α=1 | "
        "Δlog π_k err. 1st / lin | sign agree | ΔD err. 1st / lin | "
        "Δloss err. 1st / lin |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for key, r in data["summary"].items():
        th = r["thresholds"]["residual_median"]
        a1 = r["at_alpha_1"]
        rows.append(
            f"| {key} | {r['trainable_params']:,} | {cell(r['update_norm'])} | "
            f"{_alpha(th['0.1'])} | {_alpha(th['0.5'])} | "
            f"{cell(a1['residual_median'])} | {cell(a1['logp_relerr_median'])} / "
            f"{cell(a1['logp_lin_relerr_median'])} | "
            f"{cell(a1['logp_sign_agreement'])} | {cell(a1['div_relerr_median'])} / "
            f"{cell(a1['div_lin_relerr_median'])} | {cell(a1['loss_relerr'])} / "
            f"{cell(a1['loss_lin_relerr'])} |"
        )
    total = sum(timings.values()) if timings else 0.0
    rows += [
        "",
        "Relative errors are medians over tokens at α = 1 (the real update): "
        "'1st' = the first-order prediction ⟨∇_z f, αJΔθ⟩; 'lin' = f evaluated at "
        "the linearized logits z(θ) + αJΔθ (isolates Assumption 4.2 from the "
        "curvature of f in z).",
        "",
        # a report of a run has its units' timings; a docs section has none
        *([f"Wall time of the finished units: {total:.0f} s.", ""] if timings else []),
    ]
    rows += ["![residual vs alpha](residual_vs_alpha.png)", ""]
    return "\n".join(rows)


def figure(data: dict, path: str) -> None:
    """Median residual and first-order relative errors vs α, one line per setting."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
    for key, r in data["summary"].items():
        a = np.asarray(r["alphas"])
        ls = "-" if key.endswith("m1") else "--"
        axes[0].loglog(a, r["residual_median_curve"], ls, label=key)
        axes[1].loglog(a, r["logp_relerr_curve"], ls, label=key)
    for ax, title in zip(axes, ("median ρ_t(α)", "median rel. err. of Δlog π_k")):
        ax.axhline(0.1, color="grey", lw=0.5)
        ax.axhline(0.5, color="grey", lw=0.5)
        ax.set_xlabel("α (scale of the real update)")
        ax.set_title(title, fontsize=9)
    axes[0].legend(fontsize=8)
    runner.savefig(fig, path)


def figures(out_dir: str, data: dict) -> None:
    """residual_vs_alpha.png."""
    figure(data, os.path.join(out_dir, "residual_vs_alpha.png"))


def section(data: dict) -> str:
    """The markdown ``theorycheck reproduce`` shows: the report's tables, rendered
    from the results JSON (no figures, no title)."""
    body = markdown(data, {}).split("\n")[1:]
    return "\n".join(ln for ln in body if not ln.startswith("!["))

"""Summary, markdown report and figures of ``experiments.linearization``."""

from __future__ import annotations

import os

import numpy as np

from experiments import _common
from theorycheck.probes import mean_se

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
    found = [s["thresholds"][stat][level] for s in steps]
    logs = [np.log10(f["alpha"]) for f in found if f["kind"] == "interpolated"]
    out = {
        "log10_alpha": mean_se(logs),
        "below_grid": sum(f["kind"] == "below_grid" for f in found),
        "not_reached": sum(f["kind"] == "not_reached" for f in found),
    }
    out["alpha_geomean"] = (
        None if out["log10_alpha"]["mean"] is None else 10 ** out["log10_alpha"]["mean"]
    )
    return out


def _curve(steps: list[dict], stat: str) -> list:
    x = np.array([[np.nan if v is None else v for v in s[stat]] for s in steps], float)
    with np.errstate(all="ignore"):
        return [None if np.all(np.isnan(c)) else float(np.nanmean(c)) for c in x.T]


def _names(text: str) -> list[str]:
    return [n.strip() for n in text.split(",") if n.strip()]


def summarize(data: dict) -> dict:
    """Mean ± standard error over seeds per (loss, subset, steps m) of the run's
    config."""
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
                    "update_norm": mean_se([s["update_norm"] for s in steps]),
                    "at_alpha_1": {
                        stat: mean_se([_at_one(s, stat) for s in steps])
                        for stat in AT_ONE
                    },
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


def _fmt(ms: dict, digits: int = 3) -> str:
    if ms is None or ms.get("mean") is None:
        return "n/a"
    se = "" if ms["se"] is None else f" ± {ms['se']:.{digits}g}"
    return f"{ms['mean']:.{digits}g}{se}"


def _alpha(th: dict) -> str:
    parts = []
    if th["alpha_geomean"] is not None:
        lg = th["log10_alpha"]
        se = "" if lg["se"] is None else f" (log10 ± {lg['se']:.2f})"
        parts.append(f"{th['alpha_geomean']:.3g}{se}")
    if th["below_grid"]:
        parts.append(f"{th['below_grid']}× below grid")
    if th["not_reached"]:
        parts.append(f"{th['not_reached']}× not reached")
    return "; ".join(parts) or "n/a"


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
        f"`{data['provenance']['commit']}`. Mean ± standard error over seeds.",
        "",
        *_common.unfinished_line(data),
        "α at which the median per-token residual reaches 10% / 50% (geometric "
        "mean over seeds):",
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
            f"| {key} | {r['trainable_params']:,} | {_fmt(r['update_norm'])} | "
            f"{_alpha(th['0.1'])} | {_alpha(th['0.5'])} | "
            f"{_fmt(a1['residual_median'])} | {_fmt(a1['logp_relerr_median'])} / "
            f"{_fmt(a1['logp_lin_relerr_median'])} | "
            f"{_fmt(a1['logp_sign_agreement'])} | {_fmt(a1['div_relerr_median'])} / "
            f"{_fmt(a1['div_lin_relerr_median'])} | {_fmt(a1['loss_relerr'])} / "
            f"{_fmt(a1['loss_lin_relerr'])} |"
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
    _common.savefig(fig, path)


def figures(out_dir: str, data: dict) -> None:
    """residual_vs_alpha.png."""
    figure(data, os.path.join(out_dir, "residual_vs_alpha.png"))


def section(data: dict) -> str:
    """The markdown ``theorycheck reproduce`` shows: the report's tables, rendered
    from the results JSON (no figures, no title)."""
    body = markdown(data, {}).split("\n")[1:]
    return "\n".join(ln for ln in body if not ln.startswith("!["))

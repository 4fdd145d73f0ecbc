"""Summary, markdown report and figures of ``experiments.gradient_bounds``.

Every over-seed number is ``experiments.runner.stat`` of the per-seed values (mean,
standard error, n, ``ci95``: the 95% percentile bootstrap interval of the mean over
seeds); a table cell reads ``mean [lo, hi]`` (``_linearization_report.cell``), the
mean alone where fewer than 2 seeds have a value. With 2-5 seeds the interval is
rough: a percentile bootstrap undercovers at small n.
"""

from __future__ import annotations

import os

import numpy as np

from experiments import _reachable_report, runner
from experiments._linearization_report import cell, seeds_sentence


def _units(units: dict, kind: str, loss: str) -> list[dict]:
    return [v for k, v in units.items() if k.startswith(f"{kind}/{loss}/")]


def _series(runs: list[dict], key: str) -> list:
    length = min(len(r["steps"]) for r in runs)
    x = np.array(
        [
            [np.nan if s.get(key) is None else s[key] for s in r["steps"][:length]]
            for r in runs
        ],
        float,
    )
    with np.errstate(all="ignore"):
        return [None if np.all(np.isnan(c)) else float(np.nanmean(c)) for c in x.T]


def summarize(data: dict) -> dict:
    """``runner.stat`` over seeds (mean, se, n, ci95, mde), per loss (bounds) and
    per fixed-target loss of the run's config; ``reach`` (the reachable-target scan)
    is None when the run has no such units."""
    names = lambda t: [n.strip() for n in t.split(",") if n.strip()]  # noqa: E731
    cfg = data["config"]
    return _summarize(data["units"], names(cfg["losses"]), names(cfg["fixed_losses"]))


def _summarize(units: dict, losses: list[str], fixed: list[str]) -> dict:
    out: dict = {"bounds": {}, "fixed": {}, "reach": _reachable_report.summarize(units)}
    for loss in losses:
        runs = _units(units, "bounds", loss)
        if not runs:
            continue
        steps = [s for r in runs for s in r["steps"]]
        out["bounds"][loss] = {
            "seeds": len(runs),
            "tightness": runner.stat([r["tightness_mean"] for r in runs]),
            "tightness_min": float(min(s["tightness"] or np.inf for s in steps)),
            "tightness_max": float(max(s["tightness"] or 0.0 for s in steps)),
            "sigma_max": runner.stat(
                [np.mean([s["sigma_max"] for s in r["steps"]]) for r in runs]
            ),
            "sigma_growth": runner.stat([r["sigma_growth"] for r in runs]),
            "grad_norm": runner.stat(
                [np.mean([s["grad_norm"] for s in r["steps"]]) for r in runs]
            ),
            "logit_grad_norm_max_over_min": runner.stat(
                [
                    max(s["logit_grad_norm"] for s in r["steps"])
                    / max(min(s["logit_grad_norm"] for s in r["steps"]), 1e-300)
                    for r in runs
                ]
            ),
            "loss_bound_over_bound": runner.stat(
                [
                    np.mean([s["loss_bound"] / s["bound"] for s in r["steps"]])
                    for r in runs
                    if "loss_bound" in r["steps"][0]
                ]
            ),
            "spikes": sum(len(r["spikes"]) for r in runs),
            "bound_violations": sum(r["bound_violations"] for r in runs),
            "loss_bound_violations": sum(r["loss_bound_violations"] for r in runs),
            "power_rel_change_max": float(
                max(abs(s["sigma_rel_change"] or 0.0) for s in steps)
            ),
            "curves": {
                key: _series(runs, key)
                for key in (
                    "grad_norm",
                    "bound",
                    "loss_bound",
                    "sigma_max",
                    "logit_grad_norm",
                    "tightness",
                )
            },
        }
    for loss in fixed:
        runs = _units(units, "fixed", loss)
        if not runs:
            continue
        out["fixed"][loss] = {
            "seeds": len(runs),
            "real_rate": runner.stat([r["real_rate"] for r in runs]),
            "linearized_rate": runner.stat([r["linearized_rate"] for r in runs]),
            "final_ratio_real": runner.stat(
                [r["real_losses"][-1] / r["real_losses"][0] for r in runs]
            ),
            "final_ratio_linearized": runner.stat(
                [r["linearized_losses"][-1] / r["linearized_losses"][0] for r in runs]
            ),
            "lambda_min_zero": all(r["lambda_min_zero"] for r in runs),
            "outputs": runs[0]["outputs"],
            "params": runs[0]["params"],
            "steps": len(runs[0]["inner"]),
            "param_inner_negative": sum(r["param_inner_negative"] for r in runs),
            "logit_inner_negative": sum(r["logit_inner_negative"] for r in runs),
            "needed_inequality_fails": sum(r["needed_inequality_fails"] for r in runs),
            "within_epsilon_slack": sum(r["within_epsilon_slack"] for r in runs),
            "assumption_error_rel": runner.stat(
                [r["assumption_error_rel"] for r in runs]
            ),
            "epsilon_over_initial": runner.stat(
                [r["epsilon"] / r["real_losses"][0] for r in runs]
            ),
            "real_curve": np.mean(
                [np.asarray(r["real_losses"]) / r["real_losses"][0] for r in runs], 0
            ).tolist(),
            "linearized_curve": np.mean(
                [
                    np.asarray(r["linearized_losses"]) / r["linearized_losses"][0]
                    for r in runs
                ],
                0,
            ).tolist(),
        }
    return out


def _bounds_rows(s: dict, cfg: dict) -> list[str]:
    rows = [
        f"## Prop. 4.7 along {cfg['optimizer']} runs (lr {cfg['lr']}, "
        f"{cfg['minibatches']} minibatches × {cfg['epochs']} epochs, same rollouts)",
        "",
        "| loss | ‖∇_θL‖ | σ_max(J) | σ_max growth | tightness ‖∇_θL‖/(σ‖∇_zL‖) "
        "(min-max) | loss bound / chain bound | ‖∇_zL‖ max/min | spikes | "
        "violations |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for loss, r in s["bounds"].items():
        rows.append(
            f"| {loss} | {cell(r['grad_norm'])} | {cell(r['sigma_max'])} | "
            f"{cell(r['sigma_growth'])} | {cell(r['tightness'])} "
            f"({r['tightness_min']:.3g}-{r['tightness_max']:.3g}) | "
            f"{cell(r['loss_bound_over_bound'])} | "
            f"{cell(r['logit_grad_norm_max_over_min'])} | {r['spikes']} | "
            f"{r['bound_violations']} / {r['loss_bound_violations']} |"
        )
    rows += [
        "",
        "Violations: steps where ‖∇_θL‖ exceeded the chain-rule bound / the "
        "loss-based bound (the power-iteration σ is a lower bound on σ_max, so a "
        "violation would mean it had not converged). Largest relative change of σ "
        "in the last power iteration: "
        + ", ".join(
            f"{k} {v['power_rel_change_max']:.1e}" for k, v in s["bounds"].items()
        )
        + ".",
        "",
    ]
    return rows


def _fixed_rows(s: dict, cfg: dict) -> list[str]:
    rows = [
        f"## Props. 4.4, 4.8, 4.9: gradient descent on a fixed target "
        f"({cfg['gd_steps']} steps, η = {cfg['gd_scale']}/λ_max, first "
        f"{cfg['gd_sequences']} sequences)",
        "",
        "| loss | loss ratio / step, real | linearized | L_K/L_0 real | linearized | "
        "logit outputs vs params | ⟨∇_θL,θ−θ*⟩ < 0 | ⟨∇_zL,z−z*⟩ < 0 | "
        "needed ineq. fails | in ε-slack | Assumption 4.2 rel. err. |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for loss, r in s["fixed"].items():
        n = r["steps"] * r["seeds"]
        rows.append(
            f"| {loss} | {cell(r['real_rate'])} | {cell(r['linearized_rate'])} | "
            f"{cell(r['final_ratio_real'])} | {cell(r['final_ratio_linearized'])} | "
            f"{r['outputs']:,} vs {r['params']:,} | {r['param_inner_negative']}/{n} | "
            f"{r['logit_inner_negative']}/{n} | {r['needed_inequality_fails']}/{n} | "
            f"{r['within_epsilon_slack']}/{n} | {cell(r['assumption_error_rel'])} |"
        )
    rows += [
        "",
        "Worst-case rate of the linearized analysis: 1 − ηλ_min(JJᵀ·h), and λ_min = 0 "
        "whenever the logit outputs outnumber the trainable parameters (then no "
        "linear rate is guaranteed). 'needed ineq.' = ⟨∇_θL, θ−θ*⟩ ≥ L(θ) − L(θ*); "
        "'in ε-slack' = ⟨∇_θL, θ−θ*⟩ ∈ [−ε, 0) with ε = L(θ*) (L* = 0).",
        "",
    ]
    return rows


def _seed_counts(s: dict) -> list[int]:
    """The seeds of each loss (bounds, fixed) and of the reachable-target scan."""
    rows = [*s["bounds"].values(), *s["fixed"].values()]
    return [r["seeds"] for r in rows] + (
        [s["reach"]["seeds"]] if s.get("reach") else []
    )


def _train_dtype(data: dict) -> str:
    """The units' trainer precision (float64 where a unit predates the record)."""
    found = {u.get("train_dtype", "float64") for u in data["units"].values()}
    return ", ".join(sorted(found)) or "float64"


def markdown(data: dict, timings: dict) -> str:
    """The report: the bound's tightness per loss; rates and inner products."""
    cfg = data["provenance"]["config"]
    s = data["summary"]
    rows = [
        "# Gradient-norm bounds, directionality and linear convergence",
        "",
        f"Model `{cfg['model']}`, last {cfg['trainable_blocks']} block(s) trainable "
        f"(trainer in {_train_dtype(data)}), "
        f"task `{cfg['task']}`, {cfg['prompts']} prompts × {cfg['samples']} samples "
        f"× {cfg['new_tokens']} tokens, seeds {data['provenance']['seeds']}, commit "
        f"`{data['provenance']['commit']}`. " + seeds_sentence(_seed_counts(s)),
        "",
        *runner.unfinished_line(data),
    ]
    if s["bounds"]:
        rows += _bounds_rows(s, cfg)
    if s["fixed"]:
        rows += _fixed_rows(s, cfg)
    rows += [
        *_reachable_report.markdown_rows(s.get("reach"), cfg),
        # a report of a run has its units' timings; a docs section has none
        *(
            [f"Wall time of the finished units: {sum(timings.values()):.0f} s.", ""]
            if timings
            else []
        ),
        *(["![bounds](bounds.png)", ""] if s["bounds"] else []),
        *(["![fixed target](fixed_target.png)", ""] if s["fixed"] else []),
        *(["![reachable target](reach.png)", ""] if s.get("reach") else []),
    ]
    return "\n".join(rows)


def figures(out_dir: str, data: dict) -> None:
    """bounds.png (norms and bounds per step), fixed_target.png (loss curves) and
    reach.png; a figure whose units the run does not have is not drawn."""
    import matplotlib

    matplotlib.use("Agg")

    s = data["summary"]
    if s["bounds"]:
        _bounds_figure(s["bounds"], os.path.join(out_dir, "bounds.png"))
    if s["fixed"]:
        _fixed_figure(s["fixed"], os.path.join(out_dir, "fixed_target.png"))
    _reachable_report.figure(s.get("reach"), os.path.join(out_dir, "reach.png"))


def _bounds_figure(bounds: dict, path: str) -> None:
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
    for loss, r in bounds.items():
        c = r["curves"]
        (line,) = axes[0].semilogy(c["grad_norm"], label=f"{loss} ‖∇θL‖")
        axes[0].semilogy(c["bound"], "--", color=line.get_color(), label="σ‖∇zL‖")
        if any(v is not None for v in c["loss_bound"]):
            axes[0].semilogy(
                c["loss_bound"], ":", color=line.get_color(), label="loss bound"
            )
        axes[1].plot(c["tightness"], color=line.get_color(), label=loss)
    axes[0].set_xlabel("optimizer step")
    axes[0].legend(fontsize=8)
    axes[1].set_xlabel("optimizer step")
    axes[1].set_title("tightness ‖∇θL‖/(σ_max‖∇zL‖)", fontsize=9)
    axes[1].legend(fontsize=8)
    runner.savefig(fig, path)


def _fixed_figure(fixed: dict, path: str) -> None:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(4.5, 3.4))
    for loss, r in fixed.items():
        (line,) = ax.semilogy(r["real_curve"], label=f"{loss} real")
        ax.semilogy(
            r["linearized_curve"],
            "--",
            color=line.get_color(),
            label=f"{loss} linearized",
        )
    ax.set_xlabel("gradient-descent step")
    ax.set_ylabel("L_k / L_0")
    ax.legend(fontsize=8)
    runner.savefig(fig, path)


def section(data: dict) -> str:
    """The markdown ``theorycheck reproduce`` shows: the report's tables, rendered
    from the results JSON (no figures, no title)."""
    body = markdown(data, {}).split("\n")[1:]
    return "\n".join(ln for ln in body if not ln.startswith("!["))

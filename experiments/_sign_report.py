"""The sign-agreement experiment's report: ``summarize`` (mean, standard error, 95%
bootstrap interval over seeds, paired differences with their smallest detectable
size), ``markdown``, ``figures`` and ``section`` (what ``theorycheck reproduce`` and
the docs show), all from the results JSON. Every table names its regime."""

from __future__ import annotations

import os

import numpy as np

from experiments import runner

_BY_STEP_KEYS = ("agreement", "balanced_accuracy", "base_rate")
MAIN = ("always_rise", "ratio", "ddot_full", "ddot_topk_aggregated", "ntk1", "ntk2")
#: the masks and their matched controls, in table order.
MASK_NAMES = (
    "none",
    "ratio",
    "predictive",
    "coupled",
    "random_matched",
    "ratio_matched",
    "predictive_matched",
)
#: paired differences over seeds (a - b) the summary carries, per variant.
COMPARISONS = (
    *(
        (f"masks/coupled/{m}", f"masks/{c}/{m}")
        for m in ("unsafe_keep", "kept_mean_change")
        for c in ("ratio", "predictive", *MASK_NAMES[4:])
    ),
    *(
        (f"signal/ntk1/{m}", f"signal/{p}/{m}")
        for m in ("balanced_accuracy", "agreement")
        for p in ("ratio", "ddot_full", "always_rise")
    ),
    *(
        (f"paper_4_2/{h}/ddot/unsafe_keep", f"paper_4_2/{h}/ratio/unsafe_keep")
        for h in ("step", "run")
    ),
)
#: the paper's §4.2 unsafe-keep rates (ratio, Ḋ), over 61 seeds.
PAPER_UNSAFE_KEEP = {"ratio": 0.369, "ddot": 0.342}


def _keep(key: str) -> bool:
    return not key.startswith(("by_step/", "update_norms/")) or (
        key.startswith("by_step/") and key.rsplit("/", 1)[1] in _BY_STEP_KEYS
    )


def summarize(data: dict) -> dict:
    """Per variant: ``{"regime", "seeds", "stats": {flat key: stat}, "diffs":
    {"a - b": stat of the paired per-seed difference}, "per_seed": [...]}`` over the
    finished seeds (``stat``: mean, se, n, ci95 by bootstrap over seeds, mde)."""
    units = data["units"]
    by_variant: dict = {}
    for uid in sorted(units, key=lambda u: (u.split("/")[0], units[u]["seed"])):
        by_variant.setdefault(units[uid]["variant"], []).append(units[uid])
    summary = {}
    for name, rows in by_variant.items():
        flat = [runner.flatten(r) for r in rows]
        keys = sorted({k for f in flat for k in f if _keep(k)})
        diffs = {}
        for a, b in COMPARISONS:
            vals = [
                None if f.get(a) is None or f.get(b) is None else f[a] - f[b]
                for f in flat
            ]
            if any(v is not None for v in vals):
                diffs[f"{a} - {b}"] = runner.stat(vals)
        summary[name] = {
            "regime": rows[0]["regime"],
            "seeds": [r["seed"] for r in rows],
            "stats": {k: runner.stat([f.get(k) for f in flat]) for k in keys},
            "diffs": diffs,
            "per_seed": [
                {
                    "seed": r["seed"],
                    "updated_tokens": r["updated_tokens"],
                    "signal_tokens": r.get("signal_tokens"),
                    "ntk1_balanced_accuracy": r["signal"]["ntk1"]["balanced_accuracy"],
                    "ratio_balanced_accuracy": r["signal"]["ratio"][
                        "balanced_accuracy"
                    ],
                    "base_rate": r["signal"]["always_rise"]["agreement"],
                }
                for r in rows
            ],
        }
    return summary


def cell(stat, digits: int = 2) -> str:
    """``mean [lo, hi]`` (95% bootstrap interval over seeds) or ``mean`` alone."""
    if not stat or stat.get("mean") is None:
        return "–"
    ci = stat.get("ci95")
    f = f"{{:.{digits}f}}"
    if not ci:
        return f.format(stat["mean"])
    return f"{f.format(stat['mean'])} [{f.format(ci[0])}, {f.format(ci[1])}]"


def sci(stat) -> str:
    """``mean [lo, hi]`` in scientific notation."""
    if not stat or stat.get("mean") is None:
        return "–"
    ci = stat.get("ci95")
    return f"{stat['mean']:.1e}" + (f" [{ci[0]:.1e}, {ci[1]:.1e}]" if ci else "")


def _table(header, rows) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return lines + [""]


def _title(name: str, v: dict) -> str:
    return f"`{name}` (regime `{v['regime']}`, {len(v['seeds'])} seeds)"


def predictor_table(v: dict, prefix: str = "signal") -> list[str]:
    """One-step sign metrics of every predictor (``prefix``: ``signal`` tokens or
    ``predictors/step`` = every updated token)."""
    s = v["stats"]
    rows = []
    for p in (*MAIN, "ddot_topk_uniform", "ddot_topk_proportional"):
        k = f"{prefix}/{p}/"
        rows.append(
            [
                p,
                cell(s.get(k + "coverage")),
                cell(s.get(k + "agreement")),
                cell(s.get(k + "balanced_accuracy")),
                cell(s.get(k + "precision_decrease")),
            ]
        )
    return _table(
        [
            "predictor",
            "coverage",
            "agreement",
            "balanced acc.",
            "precision of predicted decrease",
        ],
        rows,
    )


def mask_table(v: dict) -> list[str]:
    """Each mask's own update and the matched controls."""
    s = v["stats"]
    rows = []
    for m in MASK_NAMES:
        k = f"masks/{m}/"
        if k + "masked_share" not in s:
            continue
        rows.append(
            [
                m,
                cell(s.get(k + "masked_share")),
                sci(s.get(k + "kept_mean_change")),
                cell(s.get(k + "unsafe_keep")),
            ]
        )
    if not rows:
        return []
    return _table(["mask", "masked share", "kept mean ΔD", "unsafe keep"], rows)


def diff_table(v: dict, keys) -> list[str]:
    """Paired differences over seeds: mean [95% interval], smallest detectable."""
    rows = []
    for a, b in keys:
        d = v["diffs"].get(f"{a} - {b}")
        if d is None:
            continue
        mde = "–" if d.get("mde") is None else f"{d['mde']:.3f}"
        rows.append([f"`{a}` − `{b}`", cell(d, 3), mde])
    if not rows:
        return []
    return _table(["difference (paired over seeds)", "mean [95%]", "detectable"], rows)


def paper_table(v: dict) -> list[str]:
    """The §4.2 metric: unsafe keep on ratio/Ḋ disagreement tokens outside δ."""
    s = v["stats"]
    rows = []
    for h, label in (("step", "own step"), ("run", "whole schedule")):
        k = f"paper_4_2/{h}/"
        rows.append(
            [
                label,
                cell(s.get(k + "disagreement"), 0),
                *(
                    cell(s.get(k + c + "/unsafe_keep"))
                    for c in ("ratio", "ddot", "ntk1", "ntk2")
                ),
            ]
        )
    rows.append(
        ["paper (61 seeds, ~1,435 tokens out each)", "–", "0.369", "0.342", "–", "–"]
    )
    return _table(
        [
            "realized ΔD after",
            "disagreement tokens",
            "ratio",
            "Ḋ (paper's)",
            "NTK-1",
            "NTK-1+2",
        ],
        rows,
    )


def probed_line(cfg: dict) -> str:
    """Which rows each step predicted (``Config.probe_rows``; a results file written
    before the setting existed probed every row)."""
    rows, others = cfg.get("probe_rows", "all"), cfg.get("others_rows", 0)
    if rows == "all":
        return (
            "Probed rows `all`: every row predicted at every step (the off-minibatch "
            "metrics `others` over every off-minibatch token)."
        )
    tail = (
        f"plus {others} off-minibatch rows per step (a seeded draw: the `others` "
        "metrics are over that sample)"
        if others
        else "only (the off-minibatch metrics `others` are not measured)"
    )
    return (
        f"Probed rows `minibatch`: each step predicts its own minibatch's rows {tail}; "
        "median D is over the probed tokens."
    )


def _head(data: dict) -> list[str]:
    prov, cfg = data["provenance"], data["config"]
    wall = prov.get("wall_s")
    load = prov.get("load_average_end") or prov.get("load_average_start")
    return [
        f"Model `{cfg['model']}`, task `{cfg['task']}`, {cfg['prompts']} prompts × "
        f"{cfg['samples']} samples × {cfg['new_tokens']} new tokens per seed, loss "
        f"`{cfg['loss']}`, reduction `{cfg['reduction']}`, `{cfg['optimizer']}` lr "
        f"{cfg['lr']} (β1 {cfg['beta1']}, β2 {cfg['beta2']}, ε {cfg['eps']}, weight "
        f"decay {cfg['weight_decay']}, clip {cfg['grad_clip']}), M = "
        f"{cfg['minibatches']}, epochs {cfg['epochs']}, last "
        f"{cfg['trainable_blocks']} blocks trained, mask δ = {cfg['delta']}, K = "
        f"{cfg['topk']}. {probed_line(cfg)} "
        f"Seeds {prov['seeds'][0]}–{prov['seeds'][-1]} (independent "
        f"prompts and rollouts per seed); mean [95% bootstrap interval over seeds]. "
        f"Commit `{prov['commit']}`"
        + (" (dirty)" if prov.get("dirty") else "")
        + "."
        + (f" Wall time {wall:.0f} s, load average {load}." if wall else ""),
        "",
    ]


def markdown(data: dict, timings: dict) -> str:
    """The full report.md."""
    s = data["summary"]
    md = [
        "# Sign agreement of ΔD predictions with real multi-step updates",
        "",
        *_head(data),
        *runner.unfinished_line(data),
        "Tokens evaluated: those in the step's minibatch with Â ≠ 0. *Signal* tokens "
        "have D > 1e-12 before their step; on-policy, the first minibatch's tokens "
        "(π = μ: every predictor abstains, D can only rise) are counted apart. A "
        "predictor that outputs 0 abstains (coverage). The agreement of "
        "`always_rise` is the base rate.",
        "",
    ]
    for name, v in s.items():
        st = v["stats"]
        tokens = cell(st.get("updated_tokens"), 0)
        zero = cell(st.get("zero_signal/tokens"), 0)
        md += [
            f"## {_title(name, v)}",
            "",
            f"Updated tokens per seed {tokens}, of which zero-signal {zero}.",
            "",
            "One-step sign metrics on the signal tokens:",
            "",
            *predictor_table(v),
            "Masks applied to the same step (each mask's own update; the matched "
            "controls remove as many tokens as the coupled mask):",
            "",
            *mask_table(v),
            *diff_table(v, COMPARISONS),
            f"§4.2 metric, δ = the {data['config']['paper_quantile']:g} quantile of "
            f"D (mean δ {sci(st.get('paper_4_2/delta'))}):",
            "",
            *paper_table(v),
        ]
    md += ["## Horizons (agreement over every updated token; base rate first)", ""]
    rows = []
    for name, v in s.items():
        for h in ("step", "epoch", "run"):
            k = f"predictors/{h}/"
            rows.append(
                [f"{name} ({v['regime']})", h]
                + [cell(v["stats"].get(k + p + "/agreement")) for p in MAIN]
            )
    md += _table(["variant", "horizon", *MAIN], rows)
    md += ["## Decomposition of failures (sign agreements; median relative errors)", ""]
    dk = [
        ("coupling: tabular vs NTK-1", "coupling_tabular_vs_ntk1_sign_agreement"),
        ("NTK-1 vs realized", "linearization_ntk1_vs_step_sign_agreement"),
        ("NTK-1+2 vs realized", "linearization_ntk2_vs_step_sign_agreement"),
        ("NTK-1 rel. err.", "linearization_ntk1_median_rel_error"),
        ("NTK-1+2 rel. err.", "linearization_ntk2_median_rel_error"),
        ("drift: step vs epoch", "drift_step_vs_epoch_sign_agreement"),
    ]
    rows = [
        [f"{n} ({v['regime']})"]
        + [cell(v["stats"].get("decomposition/" + k), 3) for _, k in dk]
        for n, v in s.items()
    ]
    md += _table(["variant", *(a for a, _ in dk)], rows)
    md += ["## Scale and checks", ""]
    rows = [
        [
            f"{n} ({v['regime']})",
            sci(v["stats"].get("scale/median_d0")),
            sci(v["stats"].get("scale/median_abs_step_change")),
            sci(v["stats"].get("checks/max_abs_d0_jvp_minus_direct")),
            sci(v["stats"].get("checks/max_rel_update_norm_gap")),
            cell(v["stats"].get("rollouts/reward_mean")),
        ]
        for n, v in s.items()
    ]
    md += _table(
        [
            "variant",
            "median D",
            "median abs ΔD (step)",
            "max abs D (JVP − direct)",
            "controls' trajectory gap (two-pass controls only)",
            "reward",
        ],
        rows,
    )
    total = sum(v for v in timings.values() if isinstance(v, int | float))
    md += [f"Wall time of the units in results.json: {total:.0f} s (timings.json).", ""]
    md += ["![balanced accuracy](balanced_accuracy.png)", ""]
    return "\n".join(md)


def section(data: dict) -> str:
    """The short markdown of ``theorycheck reproduce``: per variant (regime named)
    the signal tokens' predictor table and the masks with their matched controls."""
    md = _head(data)
    for name, v in data["summary"].items():
        md += [f"#### {_title(name, v)}", "", *predictor_table(v), *mask_table(v)]
    return "\n".join(md)


def figures(out_dir: str, data: dict) -> None:
    """balanced_accuracy.png: per predictor and variant, on the signal tokens
    (``always_rise``, a constant predictor, is the dashed line at 0.5)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s = data["summary"]
    names = list(s)
    preds = MAIN[1:]
    fig, ax = plt.subplots(figsize=(max(6, 0.9 * len(names)), 3.2))
    width = 0.8 / len(preds)
    for i, p in enumerate(preds):
        stats = [s[n]["stats"].get(f"signal/{p}/balanced_accuracy", {}) for n in names]
        means = [np.nan if st.get("mean") is None else st["mean"] for st in stats]
        err = [
            [m - st["ci95"][0] if st.get("ci95") else 0 for m, st in zip(means, stats)],
            [st["ci95"][1] - m if st.get("ci95") else 0 for m, st in zip(means, stats)],
        ]
        x = np.arange(len(names)) + i * width
        ax.bar(x, means, width, yerr=err, label=p)
    # always_rise, the predictor that heads the table, is a constant: 0.5 by definition
    ax.axhline(0.5, color="k", lw=0.8, ls="--", label="always_rise (constant)")
    labels = [f"{n}\n({s[n]['regime']})" for n in names]
    ax.set_xticks(np.arange(len(names)) + 0.4 - width / 2, labels)
    ax.set_ylabel("balanced accuracy (1 step, signal tokens)")
    ax.set_ylim(0, 1.05)
    ax.legend(fontsize=8, ncol=3)
    runner.savefig(fig, os.path.join(out_dir, "balanced_accuracy.png"))

"""Summary (mean ± standard error over seeds), markdown report and figures of the
sign-agreement experiment."""

from __future__ import annotations

import os

import numpy as np

from experiments import _common

_BY_STEP_KEYS = ("agreement", "balanced_accuracy", "base_rate")
MAIN = ("always_rise", "ratio", "ddot_full", "ddot_topk_aggregated", "ntk1", "ntk2")


def _flatten(tree, prefix="") -> dict[str, float]:
    out = {}
    if isinstance(tree, dict):
        for k, v in tree.items():
            out.update(_flatten(v, f"{prefix}{k}/"))
    elif isinstance(tree, list):
        for i, v in enumerate(tree):
            out.update(_flatten(v, f"{prefix}{i}/"))
    elif isinstance(tree, int | float) and not isinstance(tree, bool):
        out[prefix[:-1]] = float(tree)
    return out


def _current(unit: dict) -> dict:
    """A unit without the entries its analysis version got wrong (see
    ``sign_agreement.ANALYSIS_VERSION``)."""
    if unit.get("analysis_version", 1) >= 2:
        return unit
    return {k: v for k, v in unit.items() if k != "by_step"}


def summarize(units: dict, variant_names: list[str], seeds: list[int]) -> dict:
    """``{variant: {flat key: {"mean", "se", "n"}}}`` over the seeds that finished."""
    from theorycheck.probes import mean_se

    summary = {}
    for name in variant_names:
        flat = [
            _flatten(_current(units[f"{name}/seed{s}"]))
            for s in seeds
            if f"{name}/seed{s}" in units
        ]
        keys = sorted({k for f in flat for k in f})
        keys = [
            k
            for k in keys
            if not k.startswith("by_step/") or k.rsplit("/", 1)[1] in _BY_STEP_KEYS
        ]
        summary[name] = {k: mean_se([f.get(k) for f in flat]) for k in keys}
    return summary


def _fmt(stat, digits=2) -> str:
    if not stat or stat.get("mean") is None:
        return "–"
    if stat.get("se") is None:
        return f"{stat['mean']:.{digits}f}"
    return f"{stat['mean']:.{digits}f} ± {stat['se']:.{digits}f}"


def _sci(stat) -> str:
    if not stat or stat.get("mean") is None:
        return "–"
    se = "" if stat.get("se") is None else f" ± {stat['se']:.1e}"
    return f"{stat['mean']:.2e}{se}"


def _table(header, rows) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return lines + [""]


def report(data: dict, timings: dict) -> str:
    """The markdown report."""
    s, prov = data["summary"], data["provenance"]
    cfg = prov["config"]
    names = list(s)
    seeds = prov["seeds"]
    md = [
        "# Sign agreement of ΔD predictions with real multi-step updates",
        "",
        f"Model `{cfg['model']}`, task `{cfg['task']}`, {cfg['prompts']} prompts × "
        f"{cfg['samples']} samples × {cfg['new_tokens']} tokens, loss `{cfg['loss']}`, "
        f"reduction `{cfg['reduction']}`, base optimizer `{cfg['optimizer']}` lr "
        f"{cfg['lr']}, M = {cfg['minibatches']}, epochs {cfg['epochs']}, last "
        f"{cfg['trainable_blocks']} blocks trained, mismatch {cfg['mismatch']}, δ = "
        f"{cfg['delta']}, K = {cfg['topk']}. Seeds {seeds} (independent prompts and "
        f"rollouts per seed); mean ± standard error over seeds. Commit "
        f"`{prov['commit']}`.",
        "",
        *_common.unfinished_line(data),
        "Tokens evaluated: those in the step's minibatch with Â ≠ 0; a predictor that "
        "outputs 0 abstains (coverage). Base rate = share of evaluated tokens whose D "
        'rises = agreement of the trivial predictor "D always rises".',
        "",
    ]
    for name in names:
        v = s[name]
        n = (v.get("metrics/step/always_rise/agreement") or {}).get("n", 0)
        md += [
            f"## `{name}` — one-step horizon",
            "",
            f"Seeds with updated tokens (a group with mixed rewards): {n} of "
            f"{len(seeds)}.",
            "",
        ]
        rows = []
        for p in MAIN + ("ddot_topk_uniform", "ddot_topk_proportional"):
            k = f"metrics/step/{p}/"
            rows.append(
                [
                    p,
                    _fmt(v.get(k + "coverage")),
                    _fmt(v.get(k + "base_rate")),
                    _fmt(v.get(k + "agreement")),
                    _fmt(v.get(k + "balanced_accuracy")),
                    _fmt(v.get(k + "precision_decrease")),
                ]
            )
        md += _table(
            [
                "predictor",
                "coverage",
                "base rate",
                "agreement",
                "balanced acc.",
                "precision of predicted decrease",
            ],
            rows,
        )
    md += ["## Horizons (agreement; base rate in brackets)", ""]
    rows = []
    for name in names:
        v = s[name]
        for h in ("step", "epoch", "run"):
            k = f"metrics/{h}/"
            rows.append(
                [f"{name}", h, f"({_fmt(v.get(k + 'always_rise/agreement'))})"]
                + [_fmt(v.get(k + p + "/agreement")) for p in MAIN[1:]]
            )
    md += _table(["variant", "horizon", "base rate", *MAIN[1:]], rows)
    md += ["## Decomposition of failures (sign agreements; median relative errors)", ""]
    dk = [
        ("coupling: tabular vs NTK-1", "coupling_tabular_vs_ntk1_sign_agreement"),
        ("NTK-1 vs realized", "linearization_ntk1_vs_step_sign_agreement"),
        ("NTK-1+2 vs realized", "linearization_ntk2_vs_step_sign_agreement"),
        ("NTK-1 rel. err.", "linearization_ntk1_median_rel_error"),
        ("NTK-1+2 rel. err.", "linearization_ntk2_median_rel_error"),
        ("drift: step vs epoch", "drift_step_vs_epoch_sign_agreement"),
        ("drift: step vs run", "drift_step_vs_run_sign_agreement"),
    ]
    rows = [
        [n] + [_fmt(s[n].get("decomposition/" + k), 3) for _, k in dk] for n in names
    ]
    md += _table(["variant", *(a for a, _ in dk)], rows)
    md += [
        "Tokens outside the step's minibatch (moved only through shared weights): "
        "agreement of the NTK-coupled prediction (base rate in brackets).",
        "",
    ]
    rows = [
        [
            n,
            f"({_fmt(s[n].get('others/always_rise/agreement'))})",
            _fmt(s[n].get("others/ntk1/agreement")),
            _fmt(s[n].get("others/ntk2/agreement")),
        ]
        for n in names
    ]
    md += _table(["variant", "base rate", "ntk1", "ntk2"], rows)
    md += [
        f"## Unsafe-keep rate on disagreement tokens (§4.2 metric, δ = {cfg['delta']}, "
        "one-step ΔD of the unmasked update)",
        "",
    ]
    rows = []
    for n in names:
        v = s[n]
        rows.append(
            [n, _fmt(v.get("unsafe_keep/disagreement"), 1)]
            + [
                _fmt(v.get(f"unsafe_keep/{c}/unsafe_keep"))
                for c in ("ratio", "ddot", "ntk1", "ntk2")
            ]
        )
    md += _table(
        ["variant", "disagreement tokens", "ratio", "Ḋ (paper)", "NTK-1", "NTK-1+2"],
        rows,
    )
    md += [
        f"## Masks applied to the same step (δ = {cfg['delta']}): each mask's own "
        "update",
        "",
        "Share masked (of Â ≠ 0 tokens), mean realized ΔD of kept tokens, share of "
        "kept tokens outside the trust region whose D rises (unsafe keep). Cost: "
        "ratio and predictive masks = 1 forward + backward (as unmasked); the coupled "
        "mask = 2 forward + backward and one nested JVP of the minibatch.",
        "",
    ]
    rows = []
    for n in names:
        for m in ("none", "ratio", "predictive", "coupled"):
            k = f"masks/{m}/"
            rows.append(
                [
                    n,
                    m,
                    _fmt(s[n].get(k + "masked_share")),
                    _sci(s[n].get(k + "kept_mean_change")),
                    _sci(s[n].get(k + "kept_mean_d_after")),
                    _fmt(s[n].get(k + "unsafe_keep")),
                ]
            )
    md += _table(
        [
            "variant",
            "mask",
            "masked",
            "kept mean ΔD",
            "kept mean D after",
            "unsafe keep",
        ],
        rows,
    )
    md += ["## Scale and checks", ""]
    rows = [
        [
            n,
            _sci(s[n].get("scale/median_d0")),
            _sci(s[n].get("scale/median_abs_step_change")),
            _sci(s[n].get("checks/max_abs_d0_jvp_minus_direct")),
            _fmt(s[n].get("rollouts/reward_mean")),
            _fmt(s[n].get("rollouts/zero_advantage_groups"), 1),
        ]
        for n in names
    ]
    md += _table(
        [
            "variant",
            "median D",
            "median abs ΔD (step)",
            "max abs D (JVP − direct)",
            "reward",
            "zero-adv. groups",
        ],
        rows,
    )
    total = sum(v for k, v in timings.items() if isinstance(v, int | float))
    md += [f"Wall time of the units in results.json: {total:.0f} s (timings.json).", ""]
    md += [
        "![balanced accuracy](balanced_accuracy.png)",
        "",
        "![by step](by_step.png)",
        "",
    ]
    return "\n".join(md)


def figures(out_dir: str, data: dict) -> None:
    """balanced_accuracy.png (per predictor and variant), by_step.png."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s = data["summary"]
    names = list(s)
    preds = MAIN[1:]
    fig, ax = plt.subplots(figsize=(max(6, 0.9 * len(names)), 3.2))
    width = 0.8 / len(preds)
    for i, p in enumerate(preds):
        means = [
            s[n].get(f"metrics/step/{p}/balanced_accuracy", {}).get("mean")
            for n in names
        ]
        ses = [
            s[n].get(f"metrics/step/{p}/balanced_accuracy", {}).get("se") for n in names
        ]
        x = np.arange(len(names)) + i * width
        ax.bar(
            x,
            [np.nan if m is None else m for m in means],
            width,
            yerr=[0 if e is None else e for e in ses],
            label=p,
        )
    ax.axhline(0.5, color="k", lw=0.8, ls="--")
    ax.set_xticks(
        np.arange(len(names)) + 0.4 - width / 2, names, rotation=30, ha="right"
    )
    ax.set_ylabel("balanced accuracy (1 step)")
    ax.set_ylim(0, 1.05)
    ax.legend(fontsize=7, ncol=3)
    _common.savefig(fig, os.path.join(out_dir, "balanced_accuracy.png"))

    fig, ax = plt.subplots(figsize=(6, 3.2))
    pick = [n for n in ("base", "epochs_2") if n in s] or names[:1]
    for n in pick:
        steps = sorted({int(k.split("/")[1]) for k in s[n] if k.startswith("by_step/")})
        for p, style in (
            ("always_rise", ":"),
            ("ddot_full", "--"),
            ("ntk1", "-."),
            ("ntk2", "-"),
        ):
            ys = [s[n].get(f"by_step/{t}/{p}/agreement", {}).get("mean") for t in steps]
            ys = [np.nan if y is None else y for y in ys]
            ax.plot(np.array(steps) + 1, ys, style, marker="o", ms=3, label=f"{n}: {p}")
    ax.set_xlabel("optimizer step under the fixed anchor")
    ax.set_ylabel("agreement with realized ΔD")
    ax.set_ylim(0, 1.05)
    ax.legend(fontsize=6, ncol=2)
    _common.savefig(fig, os.path.join(out_dir, "by_step.png"))


def write(out_dir: str, data: dict, timings: dict) -> None:
    """report.md and the figures."""
    figures(out_dir, data)
    with open(os.path.join(out_dir, "report.md"), "w") as fh:
        fh.write(report(data, timings))

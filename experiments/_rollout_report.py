"""The rollout analysis's report: ``summarize``, ``markdown``, ``figures`` and
``section``, from the results JSON (regime ``bf16_engine``, before any update)."""

from __future__ import annotations

import json
import os

from experiments import runner
from experiments._sign_report import cell


def summarize(data: dict) -> dict:
    """``{"regime", "seeds", "stats": {flat key: stat over seeds}}``."""
    rows = [data["units"][u] for u in sorted(data["units"])]
    flat = [runner.flatten({k: v for k, v in r.items() if k != "seed"}) for r in rows]
    keys = sorted({k for f in flat for k in f})
    return {
        "regime": "bf16_engine",
        "seeds": [r["seed"] for r in rows],
        "stats": {k: runner.stat([f.get(k) for f in flat]) for k in keys},
    }


def _tables(data: dict) -> list[str]:
    s = data["summary"]["stats"]
    cfg = data["config"]
    seeds = data["summary"]["seeds"]
    lines = [
        f"Model `{cfg['model']}`, {cfg['prompts']} capitals prompts × "
        f"{cfg['samples']} samples × {cfg['new_tokens']} tokens per seed, seeds "
        f"{seeds}; rollout engine in bfloat16 reporting top-{cfg['topk']} log-probs, "
        "trainer in float32 (regime `bf16_engine`, before any update). Mean [95% "
        f"bootstrap interval over seeds]. Mean reward {cell(s.get('reward_mean'))}.",
        "",
        "Sign agreement of the Ḋ estimators with the exact full-vocabulary Ḋ "
        "(`ratio_direction` = sign(r − 1), the local term alone):",
        "",
        "| divergence | estimator | agreement |",
        "|---|---|---|",
    ]
    for kind in ("kl", "tv"):
        for name in (
            "ratio_direction",
            "topk_aggregated",
            "topk_uniform",
            "topk_proportional",
        ):
            k = f"sign_agreement/{kind}/{name}/agreement"
            lines.append(f"| {kind} | {name} | {cell(s.get(k), 3)} |")
    lines += [
        "",
        "Share of nonzero-advantage tokens masked (DPPO δ: TV 0.15, KL 0.05; tight δ: "
        "the 90th percentile of D):",
        "",
        "| mask | DPPO δ | tight δ |",
        "|---|---|---|",
    ]
    names = sorted(
        {k.split("/")[2] for k in s if k.startswith("mask_rates/paper_delta/")}
    )
    for n in names:
        lines.append(
            f"| {n} | {cell(s.get(f'mask_rates/paper_delta/{n}'), 3)} | "
            f"{cell(s.get(f'mask_rates/tight_delta_p90/{n}'), 3)} |"
        )
    lines += ["", "| divergence | mean | p90 | max |", "|---|---|---|---|"]
    for kind in ("kl", "tv", "binary_kl", "binary_tv", "topk_kl", "topk_tv"):
        k = f"divergences/{kind}/"
        lines.append(
            f"| {kind} | {cell(s.get(k + 'mean'), 4)} | {cell(s.get(k + 'p90'), 4)} | "
            f"{cell(s.get(k + 'max'), 4)} |"
        )
    lines.append("")
    return lines


def markdown(data: dict, timings: dict) -> str:
    """The full report.md (tables, the audit, the responses)."""
    md = ["# Trust-region quantities on real rollouts", "", *_tables(data)]
    md += runner.unfinished_line(data)
    for uid in sorted(data["units"]):
        u = data["units"][uid]
        audit = u["audit"]
        md += [
            f"## {uid}: audit of the batch (`theorycheck audit "
            f"batch_seed{u['seed']}.npz`)",
            "",
            f"{audit['nonzero_adv_tokens']} of {audit['tokens']} tokens carry a "
            f"nonzero advantage; ratio/predictive direction disagreements: "
            f"{u['direction_disagreement']}.",
            "",
            "| rule | gated share | gated tokens |",
            "|---|---|---|",
        ]
        for row in audit["rules"]:
            share = "n/a" if row["gated_share"] is None else f"{row['gated_share']:.3f}"
            md.append(f"| {row['rule']} | {share} | {row['gated_tokens']} |")
        md += ["", "Responses:", ""]
        md += [
            f"- group {r['group']}, reward {r['reward']:.0f}: {json.dumps(r['text'])}"
            for r in u["responses_text"]
        ]
        md.append("")
    md += ["![sign agreement](sign_agreement.png)", ""]
    return "\n".join(md)


def section(data: dict) -> str:
    """The markdown ``theorycheck reproduce`` shows."""
    return "\n".join(_tables(data))


def figures(out_dir: str, data: dict) -> None:
    """sign_agreement.png: each estimator's sign agreement with the exact Ḋ."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s = data["summary"]["stats"]
    names = ("ratio_direction", "topk_aggregated", "topk_uniform", "topk_proportional")
    fig, ax = plt.subplots(figsize=(6, 3))
    for i, kind in enumerate(("kl", "tv")):
        ys = [
            (s.get(f"sign_agreement/{kind}/{n}/agreement") or {}).get("mean")
            for n in names
        ]
        ax.bar(
            [j + 0.4 * i for j in range(len(names))],
            [y or 0 for y in ys],
            0.4,
            label=kind,
        )
    ax.set_xticks([j + 0.2 for j in range(len(names))], names, fontsize=7)
    ax.set_ylabel("sign agreement with exact Ḋ")
    ax.set_ylim(0, 1.05)
    ax.legend()
    runner.savefig(fig, os.path.join(out_dir, "sign_agreement.png"))

"""The demo's outputs: ``report.json`` (machines), ``report.md`` (people), plots."""

from __future__ import annotations

import json
import os

import numpy as np

from theorycheck.demo._analysis import ESTIMATORS, mask_rates, sign_agreement

DIVERGENCES = ("kl", "tv", "binary_kl", "binary_tv", "topk_kl", "topk_tv")


def tight_deltas(stats) -> dict[str, float]:
    """A tight trust region: δ at the 90th percentile of the observed divergences."""
    return {
        "delta_kl": float(np.quantile(stats["topk_kl"], 0.9)),
        "delta_tv": float(np.quantile(stats["binary_tv"], 0.9)),
    }


def advantages(rollouts) -> np.ndarray:
    from theorycheck.losses import grpo_advantages

    num_groups = int(rollouts.group.max()) + 1
    adv = np.asarray(
        grpo_advantages(rollouts.reward, rollouts.group, num_groups=num_groups).adv
    )
    return np.repeat(adv, rollouts.tokens.shape[1])


def audit_inputs(rollouts, adv) -> dict[str, np.ndarray]:
    """The rollouts as an audit BATCH (``theorycheck audit``'s fields)."""
    shape = rollouts.tokens.shape
    return {
        "p": np.exp(rollouts_logp(rollouts)).reshape(shape),
        "q": np.exp(
            np.take_along_axis(rollouts.behavior_logp, rollouts.tokens[..., None], -1)[
                ..., 0
            ]
        ),
        "adv": np.asarray(adv).reshape(shape)[:, 0],
        "mask": np.ones(shape),
        "group_id": rollouts.group,
    }


def rollouts_logp(rollouts) -> np.ndarray:
    """Trainer log π_k of every sampled token, ``[B, N]`` float64."""
    z = rollouts.logits.astype(np.float64)
    logp = z - np.logaddexp.reduce(z, axis=-1, keepdims=True)
    return np.take_along_axis(logp, rollouts.tokens[..., None], -1)[..., 0]


def build(args, config, rollouts, adv, stats, tight_stats, timings) -> dict:
    """Collects every number of the report into one JSON-able dict."""
    from theorycheck.losses import AUDITABLE, audit_batch, validate_batch

    agreement = sign_agreement(stats)
    audit = audit_batch(validate_batch(audit_inputs(rollouts, adv)), AUDITABLE)
    ratio_dir = np.sign(adv * (stats["ratio"] - 1.0))
    pred_dir = np.sign(adv * stats["ddot_kl_full"])
    live = (adv != 0) & (pred_dir != 0)
    summary = {
        "model": args.model,
        "tokens": int(stats["ratio"].size),
        "responses": int(rollouts.tokens.shape[0]),
        "reward_mean": float(rollouts.reward.mean()),
        "D_kl_mean": float(stats["kl"].mean()),
        "D_kl_max": float(stats["kl"].max()),
        "sign_agreement_kl": {k: v["agreement"] for k, v in agreement["kl"].items()},
        "direction_disagreement": int(np.sum(live & (ratio_dir != pred_dir))),
    }
    return {
        "summary": summary,
        "settings": {
            "model": args.model,
            "architecture": config.name,
            "layers": config.num_layers,
            "vocab": config.vocab_size,
            "samples_per_prompt": args.samples,
            "new_tokens": args.new_tokens,
            "topk": args.topk,
            "seed": args.seed,
            "rollout_dtype": "bfloat16",
            "trainer_dtype": "float32",
        },
        "timings_s": timings,
        "divergences": {
            k: {
                "mean": float(stats[k].mean()),
                "p90": float(np.quantile(stats[k], 0.9)),
                "max": float(stats[k].max()),
            }
            for k in DIVERGENCES
        },
        "sign_agreement": agreement,
        "audit": audit,
        "mask_rates": {
            "paper_delta": mask_rates(stats, adv),
            "tight_delta_p90": mask_rates(tight_stats, adv),
            "tight_deltas": tight_deltas(stats),
        },
        "responses": [
            {"group": int(g), "reward": float(r), "advantage": float(a), "text": t}
            for g, r, a, t in zip(
                rollouts.group,
                rollouts.reward,
                np.asarray(adv).reshape(rollouts.tokens.shape)[:, 0],
                rollouts.text,
            )
        ],
    }


def _plots(out: str, stats) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    files = []
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.2))
    for ax, kind in zip(axes, ("kl", "tv")):
        exact = stats[f"ddot_{kind}_full"]
        for est, marker in zip(ESTIMATORS, "o^s"):
            ax.scatter(
                exact,
                stats[f"ddot_{kind}_{est}"],
                s=10,
                marker=marker,
                alpha=0.6,
                label=est,
            )
        lim = float(np.max(np.abs(exact))) * 1.1 or 1.0
        ax.plot([-lim, lim], [-lim, lim], "k--", lw=0.8)
        ax.axhline(0, color="grey", lw=0.5)
        ax.axvline(0, color="grey", lw=0.5)
        ax.set_xlabel(f"exact Ḋ ({kind.upper()}, full vocabulary)")
        ax.set_ylabel("top-K estimate")
        ax.set_title(f"{kind.upper()}: estimators vs exact")
        ax.legend(fontsize=8)
    fig.tight_layout()
    files.append("ddot_estimators.png")
    fig.savefig(os.path.join(out, files[-1]), dpi=110)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(6, 4))
    for kind in ("kl", "topk_kl", "binary_tv", "tv"):
        v = np.maximum(stats[kind], 1e-12)
        ax.hist(np.log10(v), bins=40, histtype="step", label=kind)
    ax.set_xlabel("log10 D(μ‖π)  (bfloat16 engine vs float32 trainer)")
    ax.set_ylabel("tokens")
    ax.legend()
    fig.tight_layout()
    files.append("divergences.png")
    fig.savefig(os.path.join(out, files[-1]), dpi=110)
    plt.close(fig)
    return files


def _markdown(result: dict, plots: list[str]) -> str:
    s, st = result["summary"], result["settings"]
    lines = [
        "# theorycheck demo: trust-region quantities on real rollouts",
        "",
        f"Model `{st['model']}` ({st['architecture']}, {st['layers']} layers, "
        f"V = {st['vocab']}); {s['responses']} responses × {st['new_tokens']} tokens "
        f"= {s['tokens']} tokens; rollout engine in {st['rollout_dtype']} reporting "
        f"top-{st['topk']} log-probs, trainer in {st['trainer_dtype']}. "
        f"Mean reward {s['reward_mean']:.2f}.",
        "",
        "## Sign agreement of Ḋ estimators with the exact full-vocabulary Ḋ",
        "",
        "| divergence | estimator | agreement | tokens |",
        "|---|---|---|---|",
    ]
    for kind, rows in result["sign_agreement"].items():
        for name, row in rows.items():
            lines.append(
                f"| {kind} | {name} | {row['agreement']:.3f} | {row['tokens']} |"
            )
    lines += [
        "",
        "`ratio_direction` = sign(r − 1), the local term alone (what the "
        "PPO/DPPO direction test sees).",
        "",
        f"Tokens where the ratio direction and the predicted KL direction "
        f"disagree (nonzero advantage): **{s['direction_disagreement']}**.",
        "",
        "## Divergences",
        "",
        "| kind | mean | p90 | max |",
        "|---|---|---|---|",
    ]
    for kind, row in result["divergences"].items():
        lines.append(
            f"| {kind} | {row['mean']:.3g} | {row['p90']:.3g} | {row['max']:.3g} |"
        )
    mr = result["mask_rates"]
    lines += [
        "",
        "## Share of nonzero-advantage tokens masked",
        "",
        "| mask | DPPO δ (TV 0.15, KL 0.05) | tight δ (p90 of D) |",
        "|---|---|---|",
    ]
    for name, rate in mr["paper_delta"].items():
        tight = mr["tight_delta_p90"].get(name, 0.0)
        lines.append(f"| {name} | {rate:.3f} | {tight:.3f} |")
    audit = result["audit"]
    lines += [
        "",
        "## Audit of the batch: sequence-normalised weight each rule gates",
        "",
        f"{audit['nonzero_adv_tokens']} of {audit['tokens']} tokens carry a "
        f"nonzero advantage; zero-advantage groups: "
        f"{audit['zero_adv_group_share']:.2f} of {audit['groups']}.",
        "",
        "| rule | gated share | gated tokens |",
        "|---|---|---|",
    ]
    for row in audit["rules"]:
        share = "n/a" if row["gated_share"] is None else f"{row['gated_share']:.3f}"
        lines.append(f"| {row['rule']} | {share} | {row['gated_tokens']} |")
    lines += [
        "",
        "The same batch is saved as `batch.npz`: "
        "`theorycheck audit batch.npz --rules ppo,dppo_binary_tv` re-reads it.",
    ]
    lines += ["", "## Plots", ""] + [f"![{p}]({p})" for p in plots]
    lines += ["", "## Responses", ""]
    for r in result["responses"]:
        lines.append(
            f"- group {r['group']}, reward {r['reward']:.0f}, "
            f"advantage {r['advantage']:+.2f}: "
            f"{json.dumps(r['text'])}"
        )
    return "\n".join(lines) + "\n"


def write(out: str, result: dict, rollouts, adv, stats) -> None:
    """Writes ``report.json``, ``report.md`` and the plots into ``out``."""
    plots = _plots(out, stats)
    np.savez(os.path.join(out, "batch.npz"), **audit_inputs(rollouts, adv))
    with open(os.path.join(out, "report.json"), "w") as f:
        json.dump(result, f, indent=1)
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write(_markdown(result, plots))

"""``theorycheck audit``: the share of sequence-normalised weight each rule gates."""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

NAME = "audit"
HELP = (
    "per rule, the share of nonzero-advantage sequence-normalised token weight it "
    "gates, zero-advantage groups and log-ratio clamp activations of a batch"
)
DEFAULT_RULES = "ppo,dppo_binary_tv,glm5,dapo,cispo,sapo"
# --- off-policy corrections ---
DEFAULT_CORRECTIONS = (
    "tis_token,tis_sequence,mis_sequence,icepop,geo_mask_sequence,"
    "product_mask_sequence,reject_kl"
)
# --- end off-policy corrections ---
#: file types of ``--plot`` (matplotlib writes each).
PLOT_SUFFIXES = (".png", ".pdf", ".svg")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "batch", metavar="BATCH", help=".npz or .json with p, q, adv, mask, group_id"
    )
    parser.add_argument(
        "--rules",
        default=DEFAULT_RULES,
        metavar="R1,R2,...",
        help=f"token rules to audit (default: {DEFAULT_RULES})",
    )
    parser.add_argument(
        "--set",
        dest="params",
        action="append",
        default=[],
        metavar="RULE.KEY=VALUE",
        help="override one rule's hyperparameter (repeatable)",
    )
    # --- off-policy corrections ---
    parser.add_argument(
        "--corrections",
        default=DEFAULT_CORRECTIONS,
        metavar="C1,C2,...",
        help="off-policy corrections to report, at their defaults, with x = log p - "
        f"log q ('' for none; default: {DEFAULT_CORRECTIONS})",
    )
    # --- end off-policy corrections ---
    parser.add_argument(
        "--plot",
        metavar="PNG",
        help="also save a bar chart of the gated shares (.png, .pdf or .svg)",
    )
    # --- corrections and reductions applied ---
    parser.add_argument(
        "--config",
        metavar="FILE",
        help="a trainer config (verl, TRL, SkyRL, Miles, as for conventions "
        "--config): apply its corrections and reduction to the batch and report the "
        "per-token weights",
    )
    parser.add_argument(
        "--framework",
        metavar="NAME[@VERSION]",
        help="the config's trainer and version (default: detected, newest)",
    )
    parser.add_argument(
        "--apply",
        action="append",
        default=[],
        metavar="CORRECTION[:KEY=VALUE,...]",
        help="a correction to apply with its parameters, e.g. icepop:low=0.5,high=5 "
        "(repeatable; with or instead of --config)",
    )
    parser.add_argument(
        "--reduction",
        metavar="MODE",
        help="the reduction without --config (token_mean, seq_mean_token_mean, "
        "seq_mean_token_sum, seq_mean_token_sum_norm, token_sum, prompt_mean, "
        "sample_mean, vl_norm; default token_mean)",
    )
    parser.add_argument(
        "--from",
        dest="from_trainer",
        choices=("verl", "trl"),
        help="BATCH is an .npz dump of that trainer's loss inputs under its own "
        "names (docs/losses.md), converted on reading",
    )
    parser.add_argument(
        "--num-generations",
        type=int,
        metavar="G",
        help="responses per prompt of a TRL dump (its groups are consecutive)",
    )
    parser.add_argument(
        "--weights-plot",
        metavar="PNG",
        help="save a histogram of the per-token weights (.png, .pdf or .svg)",
    )
    # --- end corrections and reductions applied ---


def _overrides(items, rules):
    from theorycheck._errors import BadInput
    from theorycheck.losses import parse_assignments, resolve_params

    per_rule: dict[str, dict[str, float]] = {}
    for item in items:
        target, dot, rest = item.partition(".")
        if not dot or target not in rules:
            raise BadInput(
                f"--set {item!r}: expected RULE.KEY=VALUE with RULE one of "
                f"{', '.join(rules)}"
            )
        try:
            assigned = parse_assignments([rest])
        except BadInput as err:  # name the whole RULE.KEY=VALUE item and the flag
            reason = str(err).partition(": ")[2]
            raise BadInput(f"--set {item!r}: {reason}") from None
        mine = per_rule.setdefault(target, {})
        for key in assigned:
            if key in mine:
                raise BadInput(f"--set {item!r}: {target}.{key} is given twice")
        mine.update(assigned)
    return {r: resolve_params(r, kv)[0] for r, kv in per_rule.items()}


def _zero_groups_line(report: dict) -> str:
    share = report["zero_adv_group_share"]
    empty = report["empty_groups"]
    if share is None:
        return "Zero-advantage groups: none to count (no group has a valid token)"
    text = f"Zero-advantage groups: {100 * share:.2f}% of the groups with valid tokens"
    if empty:
        text += f" ({empty} group(s) have no valid token)"
    return text


def render_markdown(report: dict) -> str:
    """The audit table as markdown."""
    lines = [
        f"Audit of {report['batch']}: {report['responses']} responses in "
        f"{report['groups']} groups, {report['tokens']} valid tokens "
        f"({report['nonzero_adv_tokens']} with nonzero advantage)",
        "",
        _zero_groups_line(report),
        "",
        "| rule | gated share of nonzero-advantage weight | gated tokens | "
        "log-ratio clamp active |",
        "|---|---|---|---|",
    ]
    for r in report["rules"]:
        share = "—" if r["gated_share"] is None else f"{100 * r['gated_share']:.2f}%"
        clamp = (
            "—"
            if r["clamp_tokens"] is None
            else f"{r['clamp_tokens']} ({100 * r['clamp_share']:.3f}%)"
        )
        lines.append(f"| {r['rule']} | {share} | {r['gated_tokens']} | {clamp} |")
    lines += _corrections_markdown(report)
    return "\n".join(lines)


# --- off-policy corrections ---
def _corrections_markdown(report: dict) -> list[str]:
    rows = report.get("corrections") or []
    if not rows:
        return []
    sr = report["sequence_ratio"]
    lines = ["", "Off-policy corrections (x = log p - log q, defaults):", ""]
    if sr.get("responses"):
        pr, gr = sr["product_ratio"], sr["geometric_ratio"]
        lines += [
            f"Sequence ratios over {sr['responses']} responses (mean length "
            f"{sr['mean_length']:.4g}, mean log ratio per token "
            f"{sr['mean_token_log_ratio']:.4g}): product e^X from {pr['min']:.4g} to "
            f"{pr['max']:.4g} (median {pr['median']:.4g}); geometric e^(X/L) from "
            f"{gr['min']:.4g} to {gr['max']:.4g}",
            "",
        ]
    lines += [
        "| correction | truncated tokens | rejected tokens | responses truncated | "
        "responses rejected |",
        "|---|---|---|---|---|",
    ]
    for c in rows:
        lines.append(
            f"| {c['correction']} | {c['truncated_tokens']} "
            f"({100 * c['truncated_token_share']:.2f}%) | {c['rejected_tokens']} "
            f"({100 * c['rejected_token_share']:.2f}%) | "
            f"{100 * c['truncated_sequence_share']:.2f}% | "
            f"{100 * c['rejected_sequence_share']:.2f}% |"
        )
    return lines


# --- end off-policy corrections ---


# --- corrections and reductions applied ---
def _applied(args, batch) -> dict:
    from theorycheck._errors import BadInput
    from theorycheck.commands._output import check_output_path
    from theorycheck.losses import (
        apply_to_batch,
        config_corrections,
        parse_correction,
        reduction_by_name,
    )

    if args.weights_plot is not None:
        check_output_path("--weights-plot", args.weights_plot, PLOT_SUFFIXES)
    extra = [parse_correction(a, flag="--apply") for a in args.apply]
    resolved = (
        None if args.config is None else config_corrections(args.config, args.framework)
    )
    corrections = ([] if resolved is None else resolved["corrections"]) + extra
    if args.reduction is None and resolved is not None:
        reduction, name = resolved["reduction"], resolved["reduction_name"]
    else:
        name = args.reduction or "token_mean"
        reduction = reduction_by_name(name, flag="--reduction")
    try:
        out = apply_to_batch(batch, corrections, reduction)
    except TypeError as err:  # a parameter the correction does not take
        raise BadInput(f"--apply / --config corrections: {err}") from None
    if args.weights_plot is not None:
        save_weight_figure(out, batch, args.weights_plot, Path(args.batch).name)
    out.pop("weights")
    return {
        "config": args.config,
        "framework": None if resolved is None else resolved["version"],
        "reduction": name,
        "corrections_requested": [c.get("text", c["correction"]) for c in corrections],
        "weights_plot": args.weights_plot,
        **out,
    }


def _read_batch(args, load_batch):
    """BATCH, or a trainer's dump converted (``--from``)."""
    if args.from_trainer is None:
        return load_batch(args.batch)
    from theorycheck.losses import load_dump

    return load_dump(
        args.batch, args.from_trainer, num_generations=args.num_generations
    )


def _pct(x) -> str:
    return f"{100 * x:.2f}%"


def _applied_markdown(a: dict) -> list[str]:
    q = a["weight_quantiles"]
    lines = [
        f"Applied ({a['framework'] or 'no config'}; reduction {a['reduction']}): "
        f"{'; '.join(a['corrections_requested']) or 'no correction'}",
        "",
        f"Rejected tokens {_pct(a['rejected_token_share'])}, clipped "
        f"{_pct(a['clipped_token_share'])}, effective loss scale "
        f"{a['effective_loss_scale']:.4g}; per-token weight min {q['min']:.3g}, "
        f"median {q['median']:.3g}, p99 {q['p99']:.3g}, max {q['max']:.3g}",
        "",
        "| correction | rejected tokens | clipped tokens | rejected responses | "
        "mean weight |",
        "|---|---|---|---|---|",
    ]
    lines += [
        f"| {c['correction']} | {_pct(c['rejected_token_share'])} | "
        f"{_pct(c['clipped_token_share'])} | {_pct(c['rejected_sequence_share'])} | "
        f"{c['mean_weight']:.4g} |"
        for c in a["corrections"]
    ]
    for key, label in (("by_length", "length"), ("by_mismatch", "mean abs log r")):
        lines += [
            "",
            f"| {label} | responses | rejected | clipped | weight share | "
            "uncorrected share |",
            "|---|---|---|---|---|---|",
        ]
        bin_key = "length" if key == "by_length" else "mean_abs_log_ratio"
        lines += [
            f"| {r[bin_key][0]:.3g}–{r[bin_key][1]:.3g} | {r['responses']} | "
            f"{_pct(r['rejected_token_share'])} | {_pct(r['clipped_token_share'])} "
            f"| {_pct(r['weight_share'])} | {_pct(r['uncorrected_weight_share'])} |"
            for r in a[key]
        ]
    if a["not_applied"]:
        lines += ["", f"Computed, not applied: {', '.join(a['not_applied'])}"]
    return lines


# --- end corrections and reductions applied ---


def save_plot(report: dict, path: str) -> None:
    """Bar chart of the gated shares, written atomically (no half-written file)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [r["rule"] for r in report["rules"]]
    shares = [100 * (r["gated_share"] or 0.0) for r in report["rules"]]
    fig, ax = plt.subplots(figsize=(1.2 * len(names) + 2, 3.2))
    ax.bar(names, shares, color="#4c72b0")
    ax.set_ylabel("gated share of nonzero-adv. weight (%)")
    share = report["zero_adv_group_share"]
    ax.set_title(
        f"{Path(report['batch']).name}: zero-advantage groups "
        + ("n/a" if share is None else f"{100 * share:.1f}%")
    )
    for i, v in enumerate(shares):
        ax.text(i, v, f"{v:.1f}", ha="center", va="bottom", fontsize=8)
    _write_figure(fig, path)


def _write_figure(fig, path: str) -> None:
    """``fig`` saved to ``path`` atomically (no half-written file), then closed."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    target = Path(path)
    fd, tmp = tempfile.mkstemp(suffix=target.suffix or ".png", dir=target.parent)
    os.close(fd)
    try:
        fig.savefig(tmp, dpi=120)
        os.replace(tmp, target)
    finally:
        plt.close(fig)
        if os.path.exists(tmp):
            os.remove(tmp)


def save_weight_figure(result: dict, batch: dict, path: str, title: str) -> None:
    """Histogram of the per-token weights (valid tokens, log scale), the tokens at
    weight 0 counted in the title."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    w = result["weights"][batch["mask"] > 0]
    pos = w[w > 0]
    fig, ax = plt.subplots(figsize=(6, 3.4))
    if pos.size:
        lo, hi = np.log10(pos.min()), np.log10(pos.max())
        edges = np.logspace(lo - 0.05, hi + 0.05, 40) if hi > lo else 10
        ax.hist(pos, bins=edges, color="#4c72b0")
        ax.set_xscale("log")
    ax.set_xlabel("per-token weight (correction x reduction)")
    ax.set_ylabel("tokens")
    ax.set_title(
        f"{title}: {int((w == 0).sum())} of {w.size} tokens at weight 0, "
        f"loss scale {result['effective_loss_scale']:.3g}",
        fontsize=9,
    )
    _write_figure(fig, path)


def run(args: argparse.Namespace) -> int:
    import jax

    from theorycheck._errors import BadInput
    from theorycheck.commands._output import (
        check_input_file,
        check_output_path,
        emit_json,
    )
    from theorycheck.losses import (
        audit_batch,
        audit_corrections,
        check_corrections,
        check_rules,
        load_batch,
    )

    check_input_file("BATCH", args.batch)
    names = [r.strip() for r in args.rules.split(",") if r.strip()]
    twice = sorted({r for r in names if names.count(r) > 1})
    if twice:
        raise BadInput(f"--rules {args.rules!r}: {twice[0]!r} is named twice")
    try:
        rules = check_rules(names)
    except BadInput as err:
        raise BadInput(f"--rules {args.rules!r}: {err}") from None
    params = _overrides(args.params, rules)
    # --- off-policy corrections ---
    try:
        corrections = check_corrections(
            [c.strip() for c in args.corrections.split(",")]
        )
    except BadInput as err:
        raise BadInput(f"--corrections {args.corrections!r}: {err}") from None
    # --- end off-policy corrections ---
    if args.plot is not None:
        check_output_path("--plot", args.plot, PLOT_SUFFIXES)
    batch = _read_batch(args, load_batch)
    jax.config.update("jax_enable_x64", True)
    report = {
        "batch": args.batch,
        **audit_batch(batch, rules, params),
        **audit_corrections(batch, corrections),
        "plot": args.plot,
    }
    if args.plot is not None:
        save_plot(report, args.plot)
    # --- corrections and reductions applied ---
    if args.config or args.apply or args.reduction or args.weights_plot:
        report["applied"] = _applied(args, batch)
    # --- end corrections and reductions applied ---
    if args.json:
        emit_json(report)
    else:
        print(render_markdown(report))
        if "applied" in report:
            print("\n" + "\n".join(_applied_markdown(report["applied"])))
        if args.plot:
            print(f"\nplot: {args.plot}")
    return 0

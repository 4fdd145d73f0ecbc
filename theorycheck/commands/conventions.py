"""``theorycheck conventions``: framework presets side by side on one batch shape."""

from __future__ import annotations

import argparse

NAME = "conventions"
HELP = (
    "per-token weights and clip windows of verl, SkyRL, TRL, Miles and Stable-RL "
    "presets (each with its version range), with same-name discrepancies flagged"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--batch-shape",
        metavar="B,G,T",
        help="prompts, responses per prompt, padded response length (required "
        "without --config)",
    )
    parser.add_argument(
        "--lengths",
        metavar="L1,L2,...",
        help="B*G valid-token counts (default: a spread 1..T)",
    )
    parser.add_argument(
        "--micro-batch-size",
        type=int,
        metavar="ROWS",
        help="responses per micro-batch (default: G)",
    )
    parser.add_argument(
        "--max-len",
        type=int,
        metavar="L",
        help="L_max of the Dr. GRPO reductions (default: T)",
    )
    # --- config resolver ---
    parser.add_argument(
        "--config",
        metavar="FILE",
        help="a verl (Hydra/OmegaConf YAML) or TRL GRPOConfig (YAML/JSON) config: "
        "say what that run computes",
    )
    parser.add_argument(
        "--framework",
        metavar="NAME[@VERSION]",
        help="the config's trainer: verl, trl, skyrl or miles, optionally with a "
        "version or commit (verl@v0.7.0, verl@b178a3c; default: detected from the "
        "keys, at the newest version the resolvers know)",
    )
    parser.add_argument(
        "--trainer-version",
        metavar="NAME@VERSION",
        help="the version alone (same as --framework NAME@VERSION)",
    )
    parser.add_argument(
        "overrides",
        nargs="*",
        metavar="KEY=VALUE",
        help="config overrides, as on a verl command line (with --config)",
    )
    # --- end config resolver ---


def _ints(flag: str, text: str) -> list[int]:
    from theorycheck._errors import BadInput

    try:
        return [int(x) for x in text.split(",") if x.strip() != ""]
    except ValueError:
        raise BadInput(f"{flag} {text!r}: expected comma-separated integers") from None


def _fmt(x) -> str:
    return "—" if x is None else f"{x:.4g}"


def render_markdown(report: dict) -> str:
    """The report as markdown tables."""
    b, g, t = report["batch_shape"]
    lines = [
        f"# Conventions for B={b} prompts x G={g} responses, T={t} "
        f"(micro-batch {report['micro_batch_size']} rows, L_max "
        f"{report['max_len']})",
        "",
        "## Presets",
        "",
        "| preset | framework | rule | window | log-ratio clamp | reduction | "
        "sum of weights |",
        "|---|---|---|---|---|---|---|",
    ]
    for p in report["presets"]:
        clamp = p["params"].get("log_ratio_clamp")
        lines.append(
            f"| {p['name']} | {p['framework']} | {p['rule']} | {p['window']} "
            f"| {_fmt(clamp) if clamp != float('inf') else 'none'} | "
            f"{p['reduction_name']} ({p['reduction']}"
            f"{', per micro-batch' if p['per_micro_batch'] else ''}) | "
            f"{p['total_weight']:.4g} |"
        )
    lines += [
        "",
        "## Versions and anchors",
        "",
        "| preset | version range | ratio anchor |",
        "|---|---|---|",
    ]
    lines += [
        f"| {p['name']} | {p['version']} | {p['anchor']} |" for p in report["presets"]
    ]
    lines += [
        "",
        "## Effective per-token weight of each response",
        "",
        "| prompt | response | L | "
        + " | ".join(p["name"] for p in report["presets"])
        + " |",
        "|---|---|---|" + "---|" * len(report["presets"]),
    ]
    for s, length in enumerate(report["lengths"]):
        cells = " | ".join(_fmt(p["per_token_weight"][s]) for p in report["presets"])
        lines.append(f"| {s // g} | {s % g} | {length} | {cells} |")
    lines += ["", "## Same name, different computation", ""]
    for item in report["same_name"]:
        verdict = (
            f"DIFFER (max ratio {_fmt(item['max_ratio'])})"
            if item["differ"]
            else "agree on this batch"
        )
        lines += [
            f"### {item['name']}: {verdict}",
            "",
            "| framework | per-token weight by response |",
            "|---|---|",
        ]
        for v in item["variants"]:
            lines.append(
                f"| {v['framework']} | "
                + ", ".join(_fmt(x) for x in v["per_token_weight"])
                + " |"
            )
        lines.append("")
    for item in report["rules"]:
        pts = "; ".join(
            f"p={x['p']:g}, q={x['q']:g}, A={x['adv']:g}" for x in item["points"]
        )
        verdict = "DIFFER" if item["differ"] else "agree"
        lines += [
            f"### {item['topic']} ({item['rule']}): {verdict}",
            "",
            f"coefficient c at {pts}",
            "",
            "| framework | c |",
            "|---|---|",
        ]
        for v in item["variants"]:
            lines.append(
                f"| {v['framework']} | "
                + ", ".join(
                    _fmt(c) + (" (gated)" if gt else "")
                    for c, gt in zip(v["coefficient"], v["gated"])
                )
                + " |"
            )
        lines.append("")
    lines += ["## Known differences (source reading)", ""]
    lines += [f"- {f}" for f in report["findings"]]
    return "\n".join(lines)


# --- config resolver ---
def _param_text(r) -> str:
    parts = []
    for k, v in r["params"].items():
        if r["rule"] == "cispo" and k == "low" and v == 0.0:
            parts.append("no lower clip")
        else:
            parts.append(f"{k}={v:g}")
    return ", ".join(parts) or "no parameters"


def _rule_text(r) -> str:
    if r["rule"] is None:
        return f"not modelled ({r['loss_mode']} is defined outside the trainer)"
    return f"{r['rule']} ({_param_text(r)})"


def render_config(report: dict) -> str:
    """The resolved configuration as markdown."""
    r = report
    gbs = r.get("global_batch_size")
    lines = [
        f"# What {r['config']} computes ({r['framework']}, {r['version']})",
        "",
        f"version range: {r['version_range']}",
        "",
        "| | |",
        "|---|---|",
        f"| loss mode | {r['loss_mode']} |",
        f"| registry rule | {_rule_text(r)} |",
        f"| reduction | {r['reduction_name']} ({r['reduction']}"
        f"{', per micro-batch' if r['per_micro_batch'] else ''}"
        + (
            f"; global_batch_size = ppo_mini_batch_size x rollout.n = {gbs} rows, "
            "empty ones counted"
            if gbs
            else ""
        )
        + ") |",
        f"| delta | {_fmt(r['delta'])} |",
        f"| cap | {_fmt(r['cap'])} |",
        f"| anchor | {r['anchor']} |",
        f"| advantage | {r['advantage']['estimator']}: {r['advantage']['text']} |",
        f"| corrections | {'; '.join(c['text'] for c in r['corrections']) or 'none'} |",
        f"| other loss terms | {'; '.join(r['extra_terms']) or 'none'} |",
        "",
        "## Traps",
        "",
    ]
    lines += [f"- {t}" for t in r["traps"]] or ["- none found"]
    if r.get("per_token_weight") is not None:
        lines += [
            "",
            "## Per-token weight of each response",
            "",
            ", ".join(_fmt(x) for x in r["per_token_weight"]),
        ]
    lines += ["", "## Keys read", ""]
    lines += [f"- {k}" for k in r["read"]] or ["- none (all defaults)"]
    lines += ["", "## Keys not interpreted, and why", ""]
    lines += [f"- {k}: {why}" for k, why in r["not_interpreted"].items()] or ["- none"]
    if r["unknown_keys"]:
        lines += ["", "## Keys unknown to the trainer", ""]
        lines += [f"- {k}" for k in r["unknown_keys"]]
    return "\n".join(lines)


def _run_config(args, shape) -> int:
    from theorycheck._errors import BadInput
    from theorycheck.commands._output import emit_json
    from theorycheck.losses import resolve_config

    try:
        import omegaconf  # noqa: F401
        import yaml  # noqa: F401
    except ImportError:
        raise BadInput(
            "--config needs omegaconf and PyYAML: pip install 'theorycheck[configs]'"
        ) from None
    out = resolve_config(
        args.config,
        overrides=args.overrides,
        framework=args.framework,
        version=args.trainer_version,
        batch_shape=None if shape is None else tuple(shape),
        lengths=args.lengths_list,
        micro_batch_size=args.micro_batch_size,
    )
    out["config"] = args.config
    if shape is not None:
        out["batch_shape"] = list(shape)
    if args.json:
        emit_json(out)
    else:
        print(render_config(out))
    return 0


# --- end config resolver ---


def run(args: argparse.Namespace) -> int:
    import jax

    from theorycheck._errors import BadInput
    from theorycheck.commands._output import emit_json, flag_names
    from theorycheck.losses import check_batch_shape, conventions_report

    # --- config resolver ---
    if args.config is None and args.overrides:
        raise BadInput(f"{args.overrides[0]!r}: overrides need --config FILE")
    if args.config is None and args.batch_shape is None:
        raise BadInput("--batch-shape B,G,T is required without --config")
    if args.config is not None:
        shape = None
        args.lengths_list = None
        if args.batch_shape is not None:
            shape = _ints("--batch-shape", args.batch_shape)
            with flag_names(batch_shape="--batch-shape", lengths="--lengths"):
                check_batch_shape(shape)
                if args.lengths is not None:
                    args.lengths_list = _ints("--lengths", args.lengths)
        jax.config.update("jax_enable_x64", True)
        return _run_config(args, shape)
    # --- end config resolver ---
    shape = _ints("--batch-shape", args.batch_shape)
    if len(shape) != 3:
        raise BadInput(f"--batch-shape {args.batch_shape!r}: expected B,G,T")
    names = flag_names(
        batch_shape="--batch-shape",
        lengths="--lengths",
        micro_batch_size="--micro-batch-size",
        max_len="--max-len",
    )
    with names:
        check_batch_shape(shape)  # the size check, before anything is built
    lengths = None if args.lengths is None else _ints("--lengths", args.lengths)
    jax.config.update("jax_enable_x64", True)
    with names:
        report = conventions_report(
            tuple(shape),
            lengths,
            micro_batch_size=args.micro_batch_size,
            max_len=args.max_len,
        )
    if args.json:
        emit_json(report)
    else:
        print(render_markdown(report))
    return 0

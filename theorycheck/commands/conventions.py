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
        required=True,
        metavar="B,G,T",
        help="prompts, responses per prompt, padded response length",
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


def run(args: argparse.Namespace) -> int:
    import jax

    from theorycheck._errors import BadInput
    from theorycheck.commands._output import emit_json, flag_names
    from theorycheck.losses import check_batch_shape, conventions_report

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

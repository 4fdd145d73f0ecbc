"""``theorycheck coefficient FILE.py:FN``: the coefficient of a PyTorch loss by torch
autograd, and ``--compare RULE`` against a registry rule (theorycheck.torchfront).

The user's code runs isolated (``commands._isolate``) with the deadline of
``--timeout 20``."""

from __future__ import annotations

import argparse
import math

from theorycheck._errors import BadInput


def _describe(cmp: dict) -> list[str]:
    rule = cmp["rule"]
    grid = (
        f"{cmp['grid_points']} grid points (p in [0.001, 0.99] at this q, "
        "adv = +-|adv|)"
    )
    used = ", ".join(f"{k}={v:g}" for k, v in cmp["rule_params"].items())
    mapped = ", ".join(f"{k} -> {v}" for k, v in cmp.get("mapping", {}).items())
    lines = [
        f"  {rule}: c = {cmp['coefficient']:.6g} "
        + ("(equal here)" if cmp["equal"] else "(not equal here)"),
        f"  {rule} with {used or 'no parameters'}"
        + (f" (from the loss's {mapped})" if mapped else ""),
    ]
    if not cmp["differ"]:
        return [*lines, f"  EQUAL to {rule} at all {grid}"]
    classes = ", ".join(f"{k}: {n}" for k, n in cmp["classes"].items())
    lines += [
        f"  {cmp['verdict']}: differs from {rule} at {cmp['differ']} of {grid}; "
        f"largest difference {cmp['max_abs']:.3g} absolute, "
        f"{cmp['max_rel']:.3g} relative ({classes})"
    ]
    for r in cmp["regions"]:
        ex = r["example"]
        lines.append(
            f"    adv = {r['adv']:g}: r in [{r['ratio_min']:.4g}, {r['ratio_max']:.4g}]"
            f" ({r['points']} points, {r['class']}; at p = {ex['p']:.4g}: torch c = "
            f"{ex['torch']:.10g}, {rule} c = {ex['rule']:.10g})"
        )
    return lines


def _job(path, func, p, q, adv, params, compare):
    """The isolated part: c of the user's loss (and the comparison)."""
    from theorycheck import torchfront

    out = torchfront.torch_coefficient(path, func, p, q, adv, params)
    if compare is not None:
        out["compare"] = torchfront.compare_rule(path, func, compare, p, q, adv, params)
    return out


def run(args: argparse.Namespace, params: dict) -> int:
    """The command for a loss file (``coefficient.run`` hands over to it)."""
    from theorycheck import torchfront
    from theorycheck.commands._isolate import caller_for
    from theorycheck.commands._output import emit_json

    if args.compare is not None:
        from theorycheck.losses import get_rule

        get_rule(args.compare, token=True)  # an unknown rule: before any work
    spec, inputs = torchfront.command_spec(args.name, args.signature, params)
    trainer = args.signature != "logits"
    unknown = sorted(set(inputs) - {"adv", "q"}) if trainer else []
    if unknown:
        raise BadInput(f"--set {unknown[0]}: give the advantage and q with --adv, --q")
    path_text, _, func = spec.rpartition(":") if ":" in spec else (spec, "", "loss")
    call = caller_for(spec, 20.0)
    out = call(_job, path_text, func, args.p, args.q, args.adv, inputs, args.compare)
    c = out["coefficient"]
    if not math.isfinite(c):
        raise BadInput(
            f"{out['loss']} at --p {args.p!r} --q {args.q!r} --adv {args.adv!r}: the "
            f"coefficient is {c!r} (not finite in float64)"
        )
    ratio = args.p / args.q
    result = {
        "loss": out["loss"],
        "p": args.p,
        "q": args.q,
        "ratio": ratio if math.isfinite(ratio) else None,
        "adv": args.adv,
        "params": out["params"],
        "coefficient": c,
        "gated": bool(c == 0.0 and args.adv != 0.0),
        "method": "torch autograd",
    }
    if "compare" in out:
        result["compare"] = out["compare"]
    if args.json:
        emit_json(result)
        return 0
    shown = ", ".join(f"{k}={v}" for k, v in result["params"].items())
    print(
        f"{out['loss']}  p={args.p:g}  q={args.q:g}  r={ratio:.6g}  adv={args.adv:g}"
        + (f"  ({shown})" if shown else "")
    )
    print(
        f"  c = {c:.6g}  (torch autograd)"
        + ("   gated: the loss zeroes this token" if result["gated"] else "")
    )
    if "compare" in out:
        print("\n".join(_describe(out["compare"])))
    return 0

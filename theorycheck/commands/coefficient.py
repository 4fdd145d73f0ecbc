"""``theorycheck coefficient``: one token's gradient coefficient c and its gate."""

from __future__ import annotations

import argparse
import math
import sys

NAME = "coefficient"
HELP = "gradient coefficient c (objective gradient = c grad log pi_k) of one token"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "name",
        metavar="NAME",
        help="a registered token rule, e.g. ppo, dual_clip, dppo_binary_tv, or a "
        "PyTorch loss path/to/file.py:function",
    )
    parser.add_argument(
        "--p",
        type=float,
        required=True,
        help="current (trainer) probability of the sampled token",
    )
    parser.add_argument(
        "--q",
        type=float,
        required=True,
        help="behavior (rollout) probability of the sampled token",
    )
    parser.add_argument("--adv", type=float, required=True, help="advantage")
    parser.add_argument(
        "--set",
        dest="params",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a hyperparameter (repeatable)",
    )
    # PyTorch loss files (theorycheck.torchfront; commands/_torch_coefficient.py)
    parser.add_argument(
        "--signature",
        choices=("logits", "verl", "skyrl", "miles"),
        default="logits",
        help="for a PyTorch FILE.py:FN: fn(logits, sampled, **params), or the "
        "policy-loss signature of verl, SkyRL or Miles (docs/trainers.md)",
    )
    parser.add_argument(
        "--compare",
        metavar="RULE",
        help="for a PyTorch FILE.py:FN: is c that of this registry rule, here and on "
        "a grid of p?",
    )


def check_probability(flag: str, value: float) -> None:
    """Raises BadInput unless 0 < value <= 1."""
    from theorycheck._errors import BadInput

    if not (math.isfinite(value) and 0.0 < value <= 1.0):
        raise BadInput(f"{flag} {value!r} must lie in (0, 1]")


def log_ratio(p: float, q: float) -> float:
    r""":math:`\log r = \log p - \log q`, exact to rounding wherever it is defined.

    ``log(p / q)`` while ``p / q`` is a normal float64 (no cancellation in the
    difference of logs near r = 1); ``log p - log q`` where ``p / q`` overflows or
    is subnormal (``--q 1e-320``), so ``|log r|`` stays finite.

    Examples:
        >>> round(log_ratio(1.0, 1e-320), 3)
        736.827
    """
    ratio = p / q
    if math.isfinite(ratio) and ratio >= sys.float_info.min:
        return math.log(ratio)
    return math.log(p) - math.log(q)


def run(args: argparse.Namespace) -> int:
    import jax

    from theorycheck._errors import BadInput
    from theorycheck.commands._isolate import user_file
    from theorycheck.commands._output import emit_json, flag_names
    from theorycheck.losses import get_rule, parse_assignments, resolve_params

    if user_file(args.name) is not None:  # a PyTorch loss file (torchfront)
        from theorycheck.commands import _torch_coefficient

        check_probability("--p", args.p)
        check_probability("--q", args.q)
        if not math.isfinite(args.adv):
            raise BadInput(f"--adv {args.adv!r} must be finite")
        with flag_names(assignment="--set"):
            assigned = parse_assignments(args.params)
        return _torch_coefficient.run(args, assigned)
    if args.compare is not None or args.signature != "logits":
        raise BadInput("--compare and --signature are for a PyTorch FILE.py:FN")
    spec = get_rule(args.name, token=True)
    check_probability("--p", args.p)
    check_probability("--q", args.q)
    if not math.isfinite(args.adv):
        raise BadInput(f"--adv {args.adv!r} must be finite")
    with flag_names(assignment="--set"):
        assigned = parse_assignments(args.params)
    try:
        params, inputs = resolve_params(args.name, assigned, allow_inputs=True)
    except BadInput as err:  # the library names inputs; here they are --set flags
        head, sep, wanted = str(err).partition("give the inputs ")
        if not sep:
            raise
        flags = " ".join(f"--set {w}" for w in wanted.split(", "))
        raise BadInput(f"{head}pass {flags}") from None
    jax.config.update("jax_enable_x64", True)
    c, gated = spec.coefficient(args.p, args.q, args.adv, **inputs, **params)
    c = float(c)
    if not math.isfinite(c):
        raise BadInput(
            f"{args.name} at --p {args.p!r} --q {args.q!r} --adv {args.adv!r}: the "
            f"coefficient is {c!r} (not finite in float64)"
        )
    ratio = args.p / args.q
    log_r = log_ratio(args.p, args.q)
    result = {
        "loss": args.name,
        "p": args.p,
        "q": args.q,
        "ratio": ratio if math.isfinite(ratio) else None,
        "log_ratio": log_r,
        "adv": args.adv,
        "params": {**params, **inputs},
        "coefficient": c,
        "gated": bool(gated),
    }
    if args.json:
        emit_json(result)
        return 0
    shown = ", ".join(f"{k}={v:g}" for k, v in result["params"].items())
    r_text = f"{ratio:.6g}" if math.isfinite(ratio) else f"exp({log_r:.6g})"
    print(
        f"{args.name}  p={args.p:g}  q={args.q:g}  r={r_text}  "
        f"adv={args.adv:g}  ({shown})"
    )
    print(
        f"  c = {result['coefficient']:.6g}"
        + ("   gated: the rule zeroes this token" if result["gated"] else "")
    )
    clamp = params.get("log_ratio_clamp")
    if clamp is not None and abs(log_r) > clamp:
        print(
            f"  log-ratio guard active: |log r| = {abs(log_r):.4g} > {clamp:g}; "
            "c = 0 wherever the gradient flows through r"
        )
    return 0

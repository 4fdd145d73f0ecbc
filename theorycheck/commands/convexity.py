"""``theorycheck convexity SPEC``: is a loss convex in the logits, and where?"""

from __future__ import annotations

import math
import pathlib
import re

import numpy as np

from theorycheck._errors import BadInput

NAME = "convexity"
HELP = "is a loss convex in the logits (proof, counterexample or unknown)?"


def add_arguments(parser) -> None:
    parser.add_argument("spec", help="registry name or path/to/file.py:function")
    parser.add_argument(
        "--vocab",
        type=int,
        action="append",
        default=None,
        help="vocabulary size for the formal/numeric stages (repeatable)",
    )
    parser.add_argument(
        "--set",
        dest="params",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="input or hyperparameter, e.g. adv=-1, q=0.3, eps_high=0.28 "
        "(beats the function's own default; a key the loss does not take is an "
        "error)",
    )
    parser.add_argument(
        "--at",
        metavar="LOGITS",
        help="local check at these logits: comma- or space-separated, or a 1-D .npy "
        "or a .txt file",
    )
    parser.add_argument(
        "--sampled", type=int, default=None, help="sampled token for --at"
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=20.0,
        help="z3 seconds per claim; the symbolic stages get 5x it (default 20)",
    )
    parser.add_argument(
        "--report", metavar="DIR", help="write a markdown report + plot"
    )
    parser.add_argument(  # PyTorch losses (theorycheck.torchfront)
        "--signature",
        choices=("logits", "verl", "skyrl", "miles"),
        default="logits",
        help="a PyTorch FILE.py:FN: fn(logits, sampled, **params) (default) or "
        "the policy-loss signature of verl (old_log_prob, log_prob, advantages, "
        "response_mask, loss_agg_mode, config, rollout_is_weights), SkyRL or "
        "Miles (docs/trainers.md)",
    )


def _logits(text: str) -> np.ndarray:
    """``--at``: numbers separated by commas and/or whitespace, a 1-D ``.npy``, or a
    ``.txt`` of such numbers."""
    path = pathlib.Path(text)
    if text.endswith((".npy", ".txt")) and not path.is_file():
        raise BadInput(f"--at {text!r}: file does not exist")
    if text.endswith(".npy"):
        try:
            arr = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as err:
            raise BadInput(f"--at {text!r}: not a readable .npy ({err})") from None
        if arr.ndim != 1 or not np.issubdtype(arr.dtype, np.number):
            raise BadInput(
                f"--at {text!r}: need a 1-D numeric array, got shape "
                f"{arr.shape} of {arr.dtype}"
            )
        return arr.astype(np.float64)
    if text.endswith(".txt"):
        from theorycheck._bounded import MAX_BATCH_BYTES, read_bounded_text

        text = read_bounded_text(path, f"--at {text!r}", MAX_BATCH_BYTES)
    items = [t for t in re.split(r"[,\s]+", text.strip()) if t]
    try:
        return np.asarray([float(t) for t in items], np.float64)
    except ValueError:
        raise BadInput(
            f"--at {text[:40]!r}: not a comma- or space-separated list of numbers"
        ) from None


def _report_dir(text: str) -> pathlib.Path:
    """``--report DIR``, checked (and created) before any work."""
    from theorycheck.commands._output import check_output_dir

    out = check_output_dir("--report", text)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise BadInput(
            f"--report {text!r}: cannot create it ({err.strerror})"
        ) from None
    return out


def _local(args, params, call) -> int:
    from theorycheck.commands._output import emit_json
    from theorycheck.convexity import local_check

    if args.sampled is None:
        raise BadInput("--at needs --sampled K")
    logits = _logits(args.at)
    if args.vocab and set(args.vocab) != {logits.size}:
        raise BadInput(
            f"--vocab {', '.join(map(str, args.vocab))}: --at gives {logits.size} "
            "logits, so V is their number (drop --vocab or make it match)"
        )
    out = call(local_check, args.spec, logits, args.sampled, params=params)
    if args.json:
        keys = ("loss", "params", "min_eigenvalue", "psd")
        emit_json({k: out[k] for k in keys})
        return 0
    print(
        f"{out['loss']}: min eigenvalue {out['min_eigenvalue']:.6g} "
        f"({out['method']}, residual {out['residual']:.2g}); psd = {out['psd']}"
    )
    print(f"  params: {_params_text(out['params'])}")
    return 0


def _params_text(params: dict) -> str:
    return ", ".join(f"{k} = {v}" for k, v in params.items()) or "(none)"


def _print(result) -> None:
    print(f"{result.loss}: {result.verdict} ({result.scope})")
    if result.reason:
        print(f"  why unknown: {result.reason}")
    print(f"  params: {_params_text(result.params)}")
    if result.condition:
        label = (
            "convex where" if result.verdict != "unknown" else "convex iff (undecided)"
        )
        print(f"  {label}: {result.condition}")
    for m in result.methods:
        print(f"  [{m['status']}] {m['method']}: {m['detail']}")
    if result.counterexample and result.counterexample.get("kind") == "chord":
        ce = result.counterexample
        print(
            f"  counterexample (chord, V = {ce['vocab']}, k = {ce['sampled']}): "
            f"a {np.round(ce['a'], 6).tolist()}, b {np.round(ce['b'], 6).tolist()}, "
            f"f(m) - (f(a) + f(b))/2 = {ce['gap']:.6g}"
        )
    elif result.counterexample:
        ce = result.counterexample
        print(
            f"  counterexample: logits {np.round(ce['logits'], 6).tolist()}, "
            f"direction {np.round(ce['direction'], 6).tolist()}, "
            f"curvature {ce['curvature']:.6g}"
        )


def _check_and_report(spec: str, report, **kwargs):
    """The check and its report in one call (one isolated child for a user file:
    the report evaluates the loss, and the user's code never leaves the child)."""
    from theorycheck.convexity import check_convexity, write_report

    result = check_convexity(spec, **kwargs)
    _torch_gate_record(result)
    if report is not None:
        write_report(
            result,
            report,
            resolved=result.resolved,  # the loss as the check resolved it
            settings=kwargs.get("params") or {},  # this command's --set values
            fit=result.fit,  # the structure stage's sampled-token fit
        )
    return result


def _torch_gate_record(result) -> None:
    """A PyTorch loss: the gate's record first among the methods (torchfront)."""
    import sys

    front = sys.modules.get("theorycheck.torchfront")
    if front is not None:
        front.clear_cache()  # the programs shared with the workers
    detail = front.gate_summary() if front is not None else None
    if detail is not None:
        result.methods.insert(
            0, {"method": "torch gate", "status": "confirmed", "detail": detail}
        )


def run(args) -> int:
    from theorycheck.commands._output import flag_names

    # library errors name arguments; on the command line they are these flags
    with flag_names(
        vocab="--vocab",
        timeout_s="--timeout",
        logits="--at",
        sampled="--sampled",
        params="--set",
    ):
        return _run(args)


def _run(args) -> int:
    from theorycheck.commands._isolate import caller_for
    from theorycheck.commands._output import emit_json, flag_names
    from theorycheck.losses import parse_assignments

    with flag_names(assignment="--set"):
        params = parse_assignments(args.params)
    from theorycheck import torchfront  # a PyTorch loss: its form (torchfront)

    args.spec, params = torchfront.command_spec(args.spec, args.signature, params)
    if not (math.isfinite(args.timeout) and args.timeout > 0):
        raise BadInput(f"--timeout {args.timeout}: must be a finite number > 0")
    call = caller_for(args.spec, args.timeout)  # user files: isolated, deadline
    if args.at is not None:
        return _local(args, params, call)
    if args.sampled is not None:
        raise BadInput("--sampled is only used with --at")
    report = _report_dir(args.report) if args.report else None
    vocab = tuple(args.vocab or (3,))
    result = call(
        _check_and_report,
        args.spec,
        report,
        vocab=vocab,
        params=params,
        timeout_s=args.timeout,
    )
    if args.json:
        emit_json(result.to_json())
    else:
        _print(result)
    return 0

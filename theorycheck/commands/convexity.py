"""``theorycheck convexity SPEC``: is a loss convex in the logits, and where?"""

from __future__ import annotations

import pathlib

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
        help="input or hyperparameter, e.g. adv=-1, q=0.3, eps_high=0.28",
    )
    parser.add_argument(
        "--at",
        metavar="LOGITS",
        help="local check at these logits: comma-separated, or a .npy/.txt file",
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


def _params(items) -> dict[str, float]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise BadInput(f"--set {item!r}: expected KEY=VALUE")
        try:
            out[key] = float(value)
        except ValueError:
            raise BadInput(f"--set {item!r}: {value!r} is not a number") from None
    return out


def _logits(text: str) -> np.ndarray:
    path = pathlib.Path(text)
    if text.endswith(".npy"):
        if not path.is_file():
            raise BadInput(f"--at {text!r}: file does not exist")
        return np.load(path).astype(np.float64).reshape(-1)
    if text.endswith(".txt"):
        if not path.is_file():
            raise BadInput(f"--at {text!r}: file does not exist")
        text = path.read_text().replace("\n", ",")
    try:
        return np.asarray([float(t) for t in text.split(",") if t.strip()], np.float64)
    except ValueError:
        raise BadInput(
            f"--at {text[:40]!r}: not a comma-separated list of numbers"
        ) from None


def _check_and_report(spec: str, report: str | None, **kwargs):
    """The check and its report in one call (one isolated child for a user file:
    the report evaluates the loss, and the user's code never leaves the child)."""
    from theorycheck.convexity import check_convexity

    result = check_convexity(spec, **kwargs)
    if report:
        from theorycheck.convexity._report import write_report

        write_report(result, spec, report)
    return result


def run(args) -> int:
    from theorycheck.commands._isolate import caller_for
    from theorycheck.commands._output import emit_json
    from theorycheck.convexity import local_check

    params = _params(args.params)
    if args.timeout <= 0:
        raise BadInput(f"--timeout {args.timeout}: must be > 0")
    call = caller_for(args.spec, args.timeout)  # user files: isolated, deadline
    if args.at is not None:
        if args.sampled is None:
            raise BadInput("--at needs --sampled K")
        out = call(
            local_check, args.spec, _logits(args.at), args.sampled, params=params
        )
        obj = {
            "loss": out["loss"],
            "min_eigenvalue": out["min_eigenvalue"],
            "psd": out["psd"],
        }
        if args.json:
            emit_json(obj)
        else:
            print(
                f"{out['loss']}: min eigenvalue {out['min_eigenvalue']:.6g} "
                f"({out['method']}, residual {out['residual']:.2g}); psd = {out['psd']}"
            )
        return 0
    if args.sampled is not None:
        raise BadInput("--sampled is only used with --at")
    vocab = tuple(args.vocab or (3,))
    result = call(
        _check_and_report,
        args.spec,
        args.report,
        vocab=vocab,
        params=params,
        timeout_s=args.timeout,
    )
    if args.json:
        emit_json(result.to_json())
        return 0
    print(f"{result.loss}: {result.verdict} ({result.scope})")
    if result.condition:
        print(f"  convex where: {result.condition}")
    for m in result.methods:
        print(f"  [{m['status']}] {m['method']}: {m['detail']}")
    if result.counterexample:
        ce = result.counterexample
        print(
            f"  counterexample: logits {np.round(ce['logits'], 6).tolist()}, "
            f"direction {np.round(ce['direction'], 6).tolist()}, "
            f"curvature {ce['curvature']:.6g}"
        )
    return 0

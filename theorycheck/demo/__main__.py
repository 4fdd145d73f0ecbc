"""``python -m theorycheck.demo`` (``make demo``): the main job on a real checkpoint.

1. Load the embedded SmolLM2-135M (or ``--model PATH``) and sample a small verifiable
   task in bfloat16, reporting top-K log-probs as a rollout engine does.
2. Recompute every generated token in float32 (the trainer's view): the precision gap
   is a real off-policy gap π ≠ μ.
3. Per token: divergences, exact Ḋ and its three top-K estimates, sign agreement,
   mask decisions (ratio, DPPO, predictive), GRPO advantages from the rewards.
4. Write ``report.md`` (people), ``report.json`` (machines) and plots to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from tqdm import tqdm


def _parse(argv):
    p = argparse.ArgumentParser(prog="python -m theorycheck.demo", description=__doc__)
    p.add_argument(
        "--model",
        default="smollm2",
        help="'smollm2' (embedded), an HF directory or a .gguf file",
    )
    p.add_argument("--out", default="reports/demo", help="output folder")
    p.add_argument("--samples", type=int, default=4, help="responses per prompt")
    p.add_argument("--new-tokens", type=int, default=16, help="tokens per response")
    p.add_argument("--topk", type=int, default=20, help="K reported by the engine")
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = _parse(argv)
    import jax

    jax.config.update("jax_enable_x64", True)
    from theorycheck._errors import BadInput
    from theorycheck.demo import _analysis, _report, _rollout
    from theorycheck.models import load_model

    os.makedirs(args.out, exist_ok=True)
    steps = tqdm(total=4, desc="demo", unit="step", file=sys.stderr)
    timings = {}
    try:
        t0 = time.perf_counter()
        steps.set_postfix_str(f"loading {args.model}")
        model = load_model(args.model)
        timings["load_s"] = time.perf_counter() - t0
        steps.update()
        t0 = time.perf_counter()
        steps.set_postfix_str("sampling (bfloat16 engine) + trainer recompute")
        rollouts = _rollout.collect(
            model,
            samples=args.samples,
            new_tokens=args.new_tokens,
            topk=args.topk,
            temperature=1.0,
            seed=args.seed,
        )
        timings["rollout_s"] = time.perf_counter() - t0
        steps.update()
        t0 = time.perf_counter()
        steps.set_postfix_str("divergences, Ddot, masks")
        adv = _report.advantages(rollouts)
        stats = _analysis.token_statistics(rollouts, adv, topk=args.topk)
        tight = _analysis.token_statistics(
            rollouts, adv, topk=args.topk, **_report.tight_deltas(stats)
        )
        timings["analysis_s"] = time.perf_counter() - t0
        steps.update()
        steps.set_postfix_str("writing the report")
        result = _report.build(args, model.config, rollouts, adv, stats, tight, timings)
        _report.write(args.out, result, rollouts, adv, stats)
        steps.update()
    except BadInput as err:
        print(f"theorycheck demo: error: {err}", file=sys.stderr)
        return 2
    finally:
        steps.close()
    print(json.dumps(result["summary"], indent=1))
    print(f"report: {os.path.join(args.out, 'report.md')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

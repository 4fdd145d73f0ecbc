"""A PyTorch loss's convexity verdict against the same loss written in JAX.

Runs ``theorycheck convexity`` as a separate process (as a user does) on two pairs
of example losses, alternating torch and JAX back to back ``--repeats`` times:
``examples/losses/torch/verl_dual_clip.py:loss --signature verl`` against its JAX twin
``verl_dual_clip_jax.py``, and ``clipped_ratio.py:loss`` against
``clipped_ratio_jax.py``, each with ``--set adv=-1``. Reports the median wall time of
each and the torch ÷ JAX ratio (target ≤ 2), with the 1-minute load average around
every run. Both verdicts and convex regions must agree (checked here); the scopes are
recorded: the logits form's trace fixes the sampled token, so its scope covers k = 0
where the JAX twin's covers every sampled token (docs/convexity.md, "Scope of a
translated program").

    python benchmarks/bench_torchfront.py \
        --json-out benchmarks/results/bench_torchfront.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's code

import _results  # noqa: E402

EX = "examples/losses/torch"
PAIRS = {
    "verl": (
        [f"{EX}/verl_dual_clip.py:loss", "--signature", "verl"],
        [f"{EX}/verl_dual_clip_jax.py:loss"],
    ),
    "logits": ([f"{EX}/clipped_ratio.py:loss"], [f"{EX}/clipped_ratio_jax.py:loss"]),
}


def _run(argv: list[str]) -> tuple[float, dict, float, float]:
    env = {**os.environ, "PYTHONPATH": str(_results.ROOT)}
    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "theorycheck", "convexity", *argv]
        + ["--set", "adv=-1", "--json"],
        capture_output=True,
        text=True,
        cwd=_results.ROOT,
        env=env,
        check=True,
    )
    return time.perf_counter() - t0, json.loads(proc.stdout), load0, os.getloadavg()[0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--json-out")
    args = parser.parse_args()
    doc = _results.start("bench_torchfront", args)
    quantities, ratios, loads, scopes = {}, {}, [], {}
    for form, (torch_argv, jax_argv) in PAIRS.items():
        times = {"torch": [], "jax": []}
        for _ in range(args.repeats):
            for kind, argv in (("torch", torch_argv), ("jax", jax_argv)):
                seconds, out, l0, l1 = _run(argv)
                times[kind].append(seconds)
                loads += [l0, l1]
                verdicts = times.setdefault(f"{kind}_verdict", set())
                verdicts.add((out["verdict"], out["condition"]))
                scopes[f"{form}_{kind}"] = out["scope"]
        if times["torch_verdict"] != times["jax_verdict"]:
            raise SystemExit(f"{form}: verdicts differ: {times}")
        quantities[f"{form}_torch_s"] = statistics.median(times["torch"])
        quantities[f"{form}_jax_s"] = statistics.median(times["jax"])
        ratios[f"{form}_torch_over_jax"] = (
            quantities[f"{form}_torch_s"] / quantities[f"{form}_jax_s"]
        )
        print(f"{form}: torch {times['torch']}, jax {times['jax']}", flush=True)
    quantities["load_min"], quantities["load_max"] = min(loads), max(loads)
    doc["quantities"] = quantities
    doc["scopes"] = scopes
    doc["ratios"] = ratios
    doc["targets"] = {
        name: {
            "target": _results.target("<=", 2.0),
            "met": _results.met(value, _results.target("<=", 2.0)),
        }
        for name, value in ratios.items()
    }
    doc = _results.finish(doc)
    print(json.dumps({"quantities": quantities, "ratios": ratios}, indent=2))
    if args.json_out:
        _results.write(args.json_out, doc)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

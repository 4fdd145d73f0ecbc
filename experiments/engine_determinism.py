"""Is bfloat16 rollout generation bit-reproducible? One seed compared bit for bit.

For one seed: the bfloat16 engine's generation (tokens, sampled log-probs, top-K) and
the teacher-forced rescoring of the recorded tokens (the anchor a replay recomputes,
``theorycheck.rl.rescore``; ``rescored_parent_tokens``: the first run's tokens rescored
again, so that a difference is the rescoring's and not the sampler's), each computed
twice in this process and once in a child process whose XLA CPU backend runs
single-threaded (``--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1``:
another partition of every matmul, the nearest this machine comes to another CPU).
Writes ``results.json`` with, per comparison, whether the arrays are bit-identical and
their largest absolute difference.

Run ``python -m experiments.engine_determinism`` (SmolLM2-135M) or ``--tiny``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np

from experiments import _common

SINGLE_THREAD = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"


def _arrays(model, cfg, seed: int) -> dict:
    from theorycheck.rl import collect, make_problems, rescore

    r = collect(
        model,
        make_problems(cfg["task"], cfg["prompts"], seed=seed),
        samples=cfg["samples"],
        new_tokens=cfg["new_tokens"],
        topk=cfg["topk"],
        seed=seed,
        engine_dtype="bfloat16",
        full_vocab=False,
    )
    anchor = rescore(
        model,
        r.prompt_ids,
        r.prompt_mask,
        r.tokens,
        engine_dtype="bfloat16",
        temperature=1.0,
    )
    sampled = np.take_along_axis(anchor, r.tokens[..., None], -1)[..., 0]
    return {
        "tokens": r.tokens,
        "sampled_logp": r.sampled_logp,
        "topk_logp": r.topk_logp,
        "rescored_sampled_logp": sampled,
        "prompt_ids": r.prompt_ids,
        "prompt_mask": r.prompt_mask,
    }


def _rescore_given(model, given: dict) -> np.ndarray:
    """The rescored anchor's log-prob of the sampled token, for recorded tokens."""
    from theorycheck.rl import rescore

    anchor = rescore(
        model,
        given["prompt_ids"],
        given["prompt_mask"],
        given["tokens"],
        engine_dtype="bfloat16",
        temperature=1.0,
    )
    return np.take_along_axis(anchor, given["tokens"][..., None], -1)[..., 0]


def _compare(a: dict, b: dict) -> dict:
    out = {}
    for k in a:
        same_shape = a[k].shape == b[k].shape
        diff = (
            float(np.max(np.abs(a[k].astype(np.float64) - b[k].astype(np.float64))))
            if same_shape
            else None
        )
        out[k] = {
            "bit_identical": bool(same_shape and np.array_equal(a[k], b[k])),
            "max_abs_diff": diff,
        }
    return out


def _child(cfg: dict, path: str) -> None:
    from theorycheck.models import load_model
    from theorycheck.rl import tiny_model

    model = tiny_model() if cfg["model"] == "tiny" else load_model(cfg["model"])
    out = _arrays(model, cfg, cfg["seed"])
    with np.load(path) as z:  # the parent's tokens, rescored here
        out["rescored_parent_tokens"] = _rescore_given(model, dict(z))
    np.savez(path, **out)


def main(argv=None) -> int:
    """Runs the comparison; writes ``--out``/results.json."""
    import argparse

    p = argparse.ArgumentParser(prog="python -m experiments.engine_determinism")
    p.add_argument("--tiny", action="store_true")
    p.add_argument("--out", default="reports/engine_determinism")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    cfg = {
        "model": "tiny" if args.tiny else "smollm2",
        "task": "countdown",
        "prompts": 2,
        "samples": 8,
        "new_tokens": 16,
        "topk": 20,
        "seed": args.seed,
    }
    if args.child:
        _child(cfg, args.child)
        return 0
    from theorycheck.models import load_model
    from theorycheck.rl import tiny_model

    os.makedirs(args.out, exist_ok=True)
    model = tiny_model() if args.tiny else load_model(cfg["model"])
    first = _arrays(model, cfg, args.seed)
    second = _arrays(model, cfg, args.seed)
    path = os.path.join(args.out, "child.npz")
    np.savez(path, **first)
    env = dict(os.environ, XLA_FLAGS=SINGLE_THREAD)
    argv_child = [sys.executable, "-m", "experiments.engine_determinism"]
    argv_child += ["--child", path, "--seed", str(args.seed)]
    argv_child += ["--tiny"] if args.tiny else []
    subprocess.run(argv_child, check=True, env=env)
    with np.load(path) as z:
        child = {k: z[k] for k in z.files}
    os.remove(path)
    given = {k: first[k] for k in ("prompt_ids", "prompt_mask", "tokens")}
    first["rescored_parent_tokens"] = first["rescored_sampled_logp"]
    second["rescored_parent_tokens"] = _rescore_given(model, given)
    for arrays in (first, second, child):
        arrays.pop("prompt_ids"), arrays.pop("prompt_mask")
    data = {
        "config": cfg,
        "provenance": _common.provenance(_common.RolloutConfig(), seeds=[args.seed]),
        "same_process": _compare(first, second),
        "single_threaded_child": _compare(first, child),
    }
    _common.write_json(os.path.join(args.out, "results.json"), data)
    print(json.dumps({k: data[k] for k in ("same_process", "single_threaded_child")}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

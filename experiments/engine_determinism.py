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

``--against DIR`` (a committed run of ``--experiment``, default ``sign_agreement``:
its ``results.json`` and ``rollouts.npz``) asks the question across machines: the
recorded bfloat16 batch of ``--seed`` is generated again on this CPU with the run's
config and the experiment's own sampler, and compared bit for bit with the record
(tokens, the engine's sampled log-probs, top-K ids and float16 log-probs, the prompt
draw). The recorded tokens are also rescored here (the anchor a replay recomputes);
the record holds no anchor, so that comparison is the rescored sampled log-prob
against the generating engine's (``anchor_gap``), set beside the unit's recorded
``rollouts/anchor_gap`` (the same comparison on the run's CPU). Writes
``--out``/against.json with both CPUs named.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np

from experiments import runner
from theorycheck._errors import BadInput

SINGLE_THREAD = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
#: the children: XLA flags that change how every matmul is computed on this CPU
#: (``sse42``: code generated for SSE4.2 only, as on a CPU without AVX: other vector
#: widths, other summation orders)
CHILDREN = {"single_threaded": SINGLE_THREAD, "sse42": "--xla_cpu_max_isa=SSE4_2"}


def _arrays(model, cfg, seed: int) -> dict:
    from theorycheck.rl import collect, make_problems

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
    given = {
        "prompt_ids": r.prompt_ids,
        "prompt_mask": r.prompt_mask,
        "tokens": r.tokens,
    }
    return {
        "tokens": r.tokens,
        "sampled_logp": r.sampled_logp,
        "topk_logp": r.topk_logp,
        "rescored_sampled_logp": _rescore_given(model, given, "xla"),
        "rescored_exact_sampled_logp": _rescore_given(model, given, "exact"),
        **given,
    }


def _rescore_given(model, given: dict, arithmetic: str) -> np.ndarray:
    """The rescored anchor's log-prob of the sampled token, for recorded tokens,
    with XLA's bfloat16 arithmetic or the exactly rounded one."""
    from theorycheck.rl import rescore

    anchor = rescore(
        model,
        given["prompt_ids"],
        given["prompt_mask"],
        given["tokens"],
        engine_dtype="bfloat16",
        temperature=1.0,
        arithmetic=arithmetic,
    )
    return np.take_along_axis(anchor, given["tokens"][..., None], -1)[..., 0]


def _parent_rescored(model, given: dict) -> dict:
    """The first run's tokens rescored here, both arithmetics."""
    return {
        "rescored_parent_tokens": _rescore_given(model, given, "xla"),
        "rescored_parent_tokens_exact": _rescore_given(model, given, "exact"),
    }


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
            # the share of entries that are equal (None for different shapes)
            "share_equal": float(np.mean(a[k] == b[k])) if same_shape else None,
        }
    return out


def _child(cfg: dict, path: str) -> None:
    from theorycheck.models import load_model
    from theorycheck.rl import tiny_model

    model = tiny_model() if cfg["model"] == "tiny" else load_model(cfg["model"])
    out = _arrays(model, cfg, cfg["seed"])
    with np.load(path) as z:  # the parent's tokens, rescored here
        out.update(_parent_rescored(model, dict(z)))
    np.savez(path, **out)


def against(src: str, experiment: str, seed: int, out: str) -> int:
    """This CPU's generation of ``src``'s recorded bfloat16 batch of ``seed``
    against the record; writes ``out``/against.json (see the module)."""
    import importlib

    from experiments import EXPERIMENTS
    from experiments.runner import validate

    if experiment not in EXPERIMENTS:
        raise BadInput(f"--experiment {experiment!r}: one of {', '.join(EXPERIMENTS)}")
    exp = importlib.import_module(f"experiments.{experiment}")
    _, data = validate.read_results(src, "--against")
    cfg = validate.config_of(exp, data, src, experiment, "--against")
    bank = runner.RolloutBank("", path=os.path.join(src, "rollouts.npz"))
    rec = bank.get(seed, "bfloat16")
    if rec is None:
        raise BadInput(f"--against {src}: no bfloat16 batch of seed {seed}")
    from theorycheck.rl import record

    runner.setup_jax()
    ctx = runner.Context(cfg, bank, exp.generate)
    rollouts, meta = exp.generate(ctx, seed, "bfloat16")
    here = record(rollouts)
    recorded_meta = json.loads(str(rec.pop("meta")))
    compared = _compare({k: rec[k] for k in here}, here)
    compared["meta"] = {"bit_identical": recorded_meta == jsonable_meta(meta)}
    anchor = _rescore_given(
        ctx.model,
        {k: rec[k] for k in ("prompt_ids", "prompt_mask", "tokens")},
        cfg.anchor_arithmetic,
    )
    gap = float(np.max(np.abs(anchor - rec["sampled_logp"].astype(np.float32))))
    units = [
        u
        for u in data["units"].values()
        if u.get("seed") == seed
        and u.get("rollouts", {}).get("engine_dtype") == "bfloat16"
    ]
    run_cpu = data.get("provenance", {}).get("cpu")
    result = {
        "against": src,
        "experiment": experiment,
        "seed": seed,
        "recorded_on": run_cpu,
        "provenance": runner.provenance(runner.RolloutConfig(), seeds=[seed]),
        "generation": compared,
        "anchor_arithmetic": cfg.anchor_arithmetic,
        "anchor_gap_here": gap,
        "anchor_gap_recorded": units[0]["rollouts"]["anchor_gap"][
            "max_abs_sampled_logp"
        ]
        if units
        else None,
    }
    os.makedirs(out, exist_ok=True)
    runner.write_json(os.path.join(out, "against.json"), result)
    print(
        json.dumps(
            {
                k: result[k]
                for k in ("generation", "anchor_gap_here", "anchor_gap_recorded")
            }
        )
    )
    return 0


def jsonable_meta(meta: dict) -> dict:
    """``meta`` as it reads back from a record (JSON round trip)."""
    return json.loads(json.dumps(runner.jsonable(meta)))


def main(argv=None) -> int:
    """Runs the comparison; writes ``--out``/results.json (the runner's contract:
    bad input exits 2 in one line, SIGINT 130, SIGTERM 143)."""
    own = argv is None and __name__ == "__main__"
    return runner.guarded("engine_determinism", lambda: _main(argv), hard=own)


def _main(argv) -> int:
    import argparse

    p = runner.Parser(prog="python -m experiments.engine_determinism")
    p.add_argument("--tiny", action="store_true")
    p.add_argument("--out", default="reports/engine_determinism")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    p.add_argument(
        "--against",
        default=None,
        help="a run's folder (results.json, rollouts.npz): regenerate its recorded "
        "bfloat16 batch of --seed on this CPU and compare",
    )
    p.add_argument("--experiment", default="sign_agreement")
    p.add_argument("--json", action="store_true", help="(always one JSON object)")
    args = p.parse_args(argv)
    runner.setup_jax()  # float64: the exactly rounded rescoring computes in it
    if args.against:
        return against(args.against, args.experiment, args.seed, args.out)
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

    runner.make_out(args.out)
    model = tiny_model() if args.tiny else load_model(cfg["model"])
    first = _arrays(model, cfg, args.seed)
    second = _arrays(model, cfg, args.seed)
    path = os.path.join(args.out, "child.npz")
    np.savez(path, **first)
    children = {}
    for name, flags in CHILDREN.items():
        env = dict(os.environ, XLA_FLAGS=flags)
        argv_child = [sys.executable, "-m", "experiments.engine_determinism"]
        argv_child += ["--child", path, "--seed", str(args.seed)]
        argv_child += ["--tiny"] if args.tiny else []
        subprocess.run(argv_child, check=True, env=env)
        with np.load(path) as z:
            children[name] = {k: z[k] for k in z.files}
        np.savez(path, **first)  # the parent's arrays for the next child
    os.remove(path)
    given = {k: first[k] for k in ("prompt_ids", "prompt_mask", "tokens")}
    first["rescored_parent_tokens"] = first["rescored_sampled_logp"]
    first["rescored_parent_tokens_exact"] = first["rescored_exact_sampled_logp"]
    second.update(_parent_rescored(model, given))
    for arrays in (first, second, *children.values()):
        arrays.pop("prompt_ids"), arrays.pop("prompt_mask")
    data = {
        "config": cfg,
        "provenance": runner.provenance(runner.RolloutConfig(), seeds=[args.seed]),
        "same_process": _compare(first, second),
        **{f"{name}_child": _compare(first, c) for name, c in children.items()},
    }
    runner.write_json(os.path.join(args.out, "results.json"), data)
    print(
        json.dumps({k: v for k, v in data.items() if k.endswith(("_child", "process"))})
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

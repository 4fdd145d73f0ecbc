"""Benchmark of the sign-agreement probe on the embedded SmolLM2-135M (CPU, float64).

One unit of the default sign-agreement run (``experiments/sign_agreement.py``: the
``base`` variant with its three mask branches, seed 0, the experiment's default
rollout shape: Countdown, 2 prompts x 8 samples x 64 new tokens, the batch filled with
mixed-reward groups by dynamic sampling (``theorycheck.rl.collect_filled``, up to 8
redraws); M = 4 minibatches, last 2 blocks
trainable, AdamW lr 1e-5, K = 20), probed twice in the same process on the same
trainer: by the plain per-step loop (``run_probe(fast=False)``, the baseline) and by
the fast path (``run_probe(fast=True)``). The plain loop runs its first
:data:`BASELINE_STEPS` steps (of the shared machine's CPU, the whole plain unit is
the most expensive part of the run): the first compiles, and its warm cost is the
median of the later steps times the unit's number of steps (which leaves out its
pass before the first step, in the plain loop's favour). The per-token arrays and
the metrics are compared on those steps. The fast path runs cold (compile included)
and then warm; its compile time is the difference. Every trainer shares one frozen
trunk (computed once, timed once). Measured: updated tokens probed per CPU-second
(``time.process_time``: all threads of the process) of the warm probe (probe +
analysis) and of a whole unit (plus the frozen trunk, which the trainer computes
once per rollout batch), the CPU seconds per phase of both paths (the profile of one
unit), the rollout generation of both engines (the float32 engine with the bfloat16
engine's prompt draw), the anchor's rescore, the matched controls on the fast path,
the model load, and the largest difference between the two paths' per-token numbers;
from them the default run is extrapolated (:func:`_projection`). The same unit is also
probed with ``probe_rows="minibatch"`` (the experiment's setting), cold and warm, and
once more with the matched controls in the probe's own pass (``controls_seed``, the
experiment's route), against the matched controls in a second pass.

Usage: python benchmarks/bench_probe.py [--new-tokens 64] [--prompts 2] [--samples 8]
[--redraws 8] [--min-mixed 2] [--json-out PATH] (the defaults are
``experiments.sign_agreement.Config``'s). With ``--json-out`` it writes every
measurement, the ratios, the targets and the provenance as JSON (``make bench`` writes
``benchmarks/results/bench_probe.json``).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import resource
import statistics
import time

import _results

# updated tokens probed per CPU-second of the fast probe, and the same-run speed-up
TARGETS = {
    "tokens_per_cpu_s": (">=", 10.0),
    "speedup": (">=", 10.0),
    "run_projected_cpu_s": ("<=", 3600.0),  # 30 min wall if both cores are busy
    "minibatch_tokens_per_cpu_s": (">=", 10.0),
    "minibatch_speedup": (">=", 10.0),
    "minibatch_run_projected_cpu_s": ("<=", 3600.0),
    # the experiment's own route: minibatch probing with the controls in its pass
    "route_tokens_per_cpu_s": (">=", 10.0),
}
# name: (numerator, denominator)
RATIOS = {
    "speedup": ("tokens_per_cpu_s", "baseline_tokens_per_cpu_s"),
    "unit_speedup": ("unit_tokens_per_cpu_s", "baseline_unit_tokens_per_cpu_s"),
    "minibatch_speedup": ("minibatch_tokens_per_cpu_s", "baseline_tokens_per_cpu_s"),
    "minibatch_unit_speedup": (
        "minibatch_unit_tokens_per_cpu_s",
        "baseline_unit_tokens_per_cpu_s",
    ),
    "minibatch_over_all_rows": ("minibatch_tokens_per_cpu_s", "tokens_per_cpu_s"),
    "route_speedup": ("route_tokens_per_cpu_s", "baseline_tokens_per_cpu_s"),
}
#: the phases of a probe unit, in the order of the profile table.
PHASES = (
    "grad",
    "update",
    "jvp",
    "stats",
    "realized",
    "masks",
    "controls",
    "layout",
    "analysis",
    "other",
    "trunk",
    "io",
)
#: the plain loop runs this many steps: the first compiles, the rest are warm.
BASELINE_STEPS = 2
_KEYS = ("d0", "ntk1", "ntk2", "ratio", "ddot_full", "ddot_topk_aggregated")


def _rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6


def _cpu(fn):
    c, w = time.process_time(), time.perf_counter()
    out = fn()
    return out, time.process_time() - c, time.perf_counter() - w


def _probe(trainer, fast: bool, masks: bool = True, phases=None, rows=None, **kw):
    """``(analysis, probe, cpu_s, phases)`` of one probe run of ``trainer``; ``rows``
    None probes every row, else ``(probe_rows, others_rows)``; ``kw`` to
    ``run_probe``."""
    from theorycheck.probes import analyze_probe, run_probe

    phases = {} if phases is None else phases
    if rows is not None:
        kw = {**kw, "probe_rows": rows[0], "others_rows": rows[1]}
    probe, cpu, wall = _cpu(
        lambda: run_probe(
            trainer, topk=20, masks=masks, fast=fast, timings=phases, **kw
        )
    )
    analysis, cpu_a, _ = _cpu(lambda: analyze_probe(probe))
    phases["analysis"] = cpu_a
    phases["other"] = max(
        0.0, cpu - sum(v for k, v in phases.items() if k != "analysis")
    )
    phases["_wall"] = wall
    return analysis, probe, cpu + cpu_a, phases


def _time_steps(trainer, stop: int | None = None, phases=None) -> list:
    """CPU seconds of each step of the trainer's schedule, filled as a probe runs
    (the schedule cut after ``stop`` steps when given); with ``phases`` (the probe's
    timings dict) each entry is ``(seconds, {phase: seconds of this step})``."""
    times: list = []
    schedule = trainer.schedule

    def timed():
        last, seen = time.process_time(), dict(phases or {})
        for i, item in enumerate(schedule()):
            if stop is not None and i == stop:
                return
            yield item
            now = time.process_time()
            if phases is None:
                times.append(now - last)
            else:
                delta = {k: v - seen.get(k, 0.0) for k, v in phases.items()}
                times.append((now - last, delta))
                seen = dict(phases)
            last = now

    trainer.schedule = timed
    return times


def _step_changes(probe):
    """Realized one-step ΔD of the updated tokens (the analysis's step horizon)."""
    import numpy as np

    traj, out = probe["trajectory"], []
    for t, rec in enumerate(probe["steps"]):
        sel = rec["in_minibatch"] & (rec["adv"] != 0)
        out.append((traj[t + 1] - traj[t])[sel])
    return np.concatenate(out)


def _precision(run64, run32) -> dict:
    """What float32 costs in the realized ΔD and the sign metrics (against float64)."""
    import numpy as np

    from theorycheck.probes import signs

    (a64, p64, *_), (a32, p32) = run64, run32
    r64, r32 = _step_changes(p64), _step_changes(p32)
    live = signs(r64) != 0
    flips = signs(r32[live]) != signs(r64[live])
    out = {
        "median_abs_step_change": float(np.median(np.abs(r64))),
        "float32_median_abs_err_step_change": float(np.median(np.abs(r32 - r64))),
        "float32_max_abs_err_step_change": float(np.max(np.abs(r32 - r64))),
        "float32_realized_sign_flip_share": float(np.mean(flips)),
    }
    for name in ("ratio", "ntk1", "ntk2"):
        m64 = a64["metrics"]["step"][name]["agreement"]
        m32 = a32["metrics"]["step"][name]["agreement"]
        out[f"{name}_agreement"] = m64
        out[f"float32_{name}_agreement"] = m32
    return out


def _gemm_rate(dtype, rows: int, d: int, v: int, reps: int = 3) -> float:
    """GFLOP per CPU-second of the head product ``[rows, d] x [d, v]`` (jitted, warm):
    the machine's rate on the unit's dominant operation, measured in this run."""
    import jax
    import jax.numpy as jnp

    h, w = jnp.ones((rows, d), dtype), jnp.ones((v, d), dtype)
    f = jax.jit(lambda h, w: jnp.einsum("sd,vd->sv", h, w))
    f(h, w).block_until_ready()
    t = time.process_time()
    for _ in range(reps):
        f(h, w).block_until_ready()
    return 2.0 * rows * d * v * reps / (time.process_time() - t) / 1e9


def _unit_gflop(trainer, probed=None) -> dict:
    r"""The matrix-product FLOPs one unit cannot avoid (an estimate, a lower bound).

    Per position through the trainable blocks, a forward costs
    :math:`2\,L(2DH_d + 2DK_d + 3DI)` FLOP (q and o, k and v, the gated MLP; the
    attention scores, norms and elementwise work are left out), the head
    :math:`2DV` per scored token. Per step, over the rows' positions plus each
    present prompt's padded positions: the probe pass is a second-order Taylor
    expansion of the blocks (at least 5 products per weight product: primal, two
    for the first and two for the second coefficient) and three head products
    (z, z', the pullback for g''); the minibatch gradient is a forward and a
    backward (3 blocks, 2 head); the masks' branches are one forward of the blocks,
    three backwards through them from the gradient's head-input cotangent and three
    forwards of the updated weights (1 + 6 + 3 blocks, 3 head); plus two whole-batch
    forwards (the start and the end).

    With ``probed`` (the rows of step 0 that ``probe_rows="minibatch"`` probes,
    :func:`theorycheck.probes._probe.probed_rows`) the probe pass runs over those
    rows and the realized D is one forward over them before the first step and
    after every step but an epoch's last, and one whole-batch forward at the end of
    every epoch.
    """
    import numpy as np

    b, n = trainer.batch.sampled.shape
    start = trainer.rows[0]
    group = np.asarray(trainer.batch.group)
    mb = trainer.minibatch_rows[0]
    kw = {}
    if probed is not None:
        kw = {"probed": len(probed), "probed_groups": len(np.unique(group[probed]))}
    return _gflop(
        trainer,
        b=b,
        n=n,
        prompt=start + (-start % 32),
        groups=len(np.unique(group)),
        mb=len(mb),
        mb_groups=len(np.unique(group[mb])),
        **kw,
    )


def _gflop(
    trainer, *, b, n, prompt, groups, mb, mb_groups, probed=None, probed_groups=None
) -> dict:
    """:func:`_unit_gflop` of a batch of ``b`` rows x ``n`` response tokens, ``groups``
    prompts of ``prompt`` padded positions, minibatches of ``mb`` rows holding
    ``mb_groups`` prompts (the trainer's model and training config); with
    ``probed``, each step probes that many rows holding ``probed_groups`` prompts
    (``probe_rows="minibatch"``), else every row."""
    c = trainer.model_config
    d, v = c.hidden_size, c.vocab_size
    heads = c.num_heads * c.head_dim
    kv = c.num_kv_heads * c.head_dim
    block = (
        2
        * trainer.config.trainable_blocks
        * (2 * d * heads + 2 * d * kv + 3 * d * c.intermediate_size)
    )
    head = 2 * d * v
    every = b * n + groups * prompt
    rows = mb * n + mb_groups * prompt
    epochs = trainer.config.epochs
    steps = epochs * trainer.config.minibatches
    whole = block * every + head * b * n  # one forward of every row
    if probed is None:
        probe = 5 * block * every + 3 * head * b * n
        realized = 2 * whole
    else:
        sub = probed * n + probed_groups * prompt
        probe = 5 * block * sub + 3 * head * probed * n
        realized = (1 + steps - epochs) * (block * sub + head * probed * n)
        realized += epochs * whole
    grad = 3 * block * rows + 2 * head * mb * n
    masks = 10 * block * rows + 3 * head * mb * n
    per = {"probe_pass": probe, "grad": grad, "masks": masks}
    out = {f"gflop_{k}_per_step": x / 1e9 for k, x in per.items()}
    out["gflop_unit"] = (steps * sum(per.values()) + realized) / 1e9
    return out


def _projection(q, trainer, wall, prefix: str = "") -> dict:
    """The default sign-agreement run (``experiments.sign_agreement.Config``: its
    seeds, both regimes) extrapolated from this run's rates.

    A unit of the default shape costs its matrix-product count (:func:`_gflop`, the
    padded prompt of this run) at this run's achieved GFLOP per CPU-second, times this
    run's (trunk + probe + controls) / probe; its updated tokens are at least
    ``min_mixed x samples x new_tokens`` (the mixed groups the dynamic sampling
    guarantees). Rollouts (both engines) and the rescore scale with rows x new
    tokens. Per seed: both engines' rollouts, one rescore, two units (the on-policy
    unit taken to cost the ``base`` unit); plus one compile. Wall: CPU-s over this
    run's warm-probe CPU/wall ratio (contention included), and over 2 (both cores
    busy). At the default shape itself (no extrapolation) the scale factors are 1.
    With ``prefix="minibatch_"`` the same for ``probe_rows="minibatch"`` with the
    experiment's ``others_rows`` (its product count, its achieved rate, its warm
    probe CPU-s and the matched controls in the probe's pass, as the experiment runs
    them); the keys carry the prefix.
    """
    from experiments.sign_agreement import Config

    run = Config()
    b = run.prompts * run.samples
    mb = b // trainer.config.minibatches
    start = trainer.rows[0]
    kw = {}
    if prefix:
        probed = mb + run.others_rows
        kw = {"probed": probed, "probed_groups": min(probed, run.prompts)}
    shape = _gflop(
        trainer,
        b=b,
        n=run.new_tokens,
        prompt=start + (-start % 32),
        groups=run.prompts,
        mb=mb,
        mb_groups=min(mb, run.prompts),
        **kw,
    )
    q = {**q, **{k[len(prefix) :]: v for k, v in q.items() if k.startswith(prefix)}}
    out = {"default_gflop_unit": shape["gflop_unit"]}
    probe = shape["gflop_unit"] / q["achieved_gflop_per_cpu_s"]
    out["default_probe_cpu_s"] = probe
    out["default_min_updated_tokens"] = run.min_mixed * run.samples * run.new_tokens
    out["default_tokens_per_cpu_s"] = out["default_min_updated_tokens"] / probe
    rows, n = trainer.batch.sampled.shape
    scale = b * run.new_tokens / (rows * n)
    extra = (q["trunk_cpu_s"] + q["controls_cpu_s"]) / q["probe_cpu_s"]
    unit = probe * (1.0 + extra)
    gen = q["rollouts_cpu_s"] + q["rollouts_f32_cpu_s"] + q["rescore_cpu_s"]
    out["run_seeds"] = run.seeds
    out["run_projected_cpu_s"] = (
        run.seeds * (scale * gen + 2 * unit) + q["compile_cpu_s"]
    )
    out["probe_cpu_per_wall"] = q["probe_cpu_s"] / wall
    out["run_projected_wall_s"] = out["run_projected_cpu_s"] / out["probe_cpu_per_wall"]
    out["run_projected_wall_2cores_s"] = out["run_projected_cpu_s"] / 2
    return {prefix + k: v for k, v in out.items()}


def _write_unit(analysis) -> None:
    """The unit's results written as the experiment's store writes them (I/O)."""
    import tempfile

    from experiments.runner import write_json

    with tempfile.TemporaryDirectory() as tmp:
        write_json(os.path.join(tmp, "results.json"), {"units": {"u": analysis}})


def _first_steps(probe, n: int) -> dict:
    """The probe record of the first ``n`` steps only."""
    return {
        **probe,
        "steps": probe["steps"][:n],
        "trajectory": probe["trajectory"][: n + 1],
        "update_norms": probe["update_norms"][:n],
    }


def _restricted(full, probe) -> dict:
    """The all-rows probe ``full`` with ``probe``'s probed rows and setting (the
    analysis of ``probe`` must equal its analysis)."""
    steps = [
        {**a, "probed": b["probed"]} for a, b in zip(full["steps"], probe["steps"])
    ]
    keys = ("probe_rows", "others_rows")
    return {**full, "steps": steps, **{k: probe[k] for k in keys}}


def _max_rel_diff_probed(full, probe) -> float:
    """:func:`_max_rel_diff` on the probed entries: the per-token arrays on each
    step's probed rows and the realized D where ``probe`` computed it."""
    import numpy as np

    worst = 0.0
    for ra, rb in zip(full["steps"], probe["steps"]):
        p = rb["probed"]
        for key in _KEYS:
            scale = float(np.max(np.abs(ra[key][p]))) or 1.0
            worst = max(worst, float(np.max(np.abs(ra[key][p] - rb[key][p]))) / scale)
    have = ~np.isnan(probe["trajectory"])
    a, b = full["trajectory"][have], probe["trajectory"][have]
    return max(worst, float(np.max(np.abs(a - b))) / float(np.max(np.abs(a))))


def _max_rel_diff(a, b) -> float:
    import numpy as np

    worst = 0.0
    for ra, rb in zip(a["steps"], b["steps"]):
        for key in _KEYS:
            scale = float(np.max(np.abs(ra[key]))) or 1.0
            worst = max(worst, float(np.max(np.abs(ra[key] - rb[key]))) / scale)
    scale = float(np.max(np.abs(a["trajectory"])))
    d = float(np.max(np.abs(a["trajectory"] - b["trajectory"]))) / scale
    return max(worst, d)


def _same_metrics(a, b, rel=1e-9) -> tuple[int, int]:
    """(metrics compared, metrics that differ beyond ``rel``) of two analyses."""
    flat_a, flat_b = {}, {}

    def walk(x, path, out):
        if isinstance(x, dict):
            for k, v in x.items():
                walk(v, f"{path}/{k}", out)
        elif isinstance(x, list):
            for i, v in enumerate(x):
                walk(v, f"{path}[{i}]", out)
        else:
            out[path] = x

    walk(a, "", flat_a)
    walk(b, "", flat_b)
    differ = 0
    for k, va in flat_a.items():
        if k.endswith("max_abs_d0_jvp_minus_direct"):
            continue
        vb = flat_b.get(k)
        if isinstance(va, float) and isinstance(vb, float):
            differ += abs(va - vb) > rel * max(abs(va), abs(vb), 1e-300)
        else:
            differ += va != vb
    return len(flat_a), differ


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    from experiments.sign_agreement import Config

    run = Config()  # the default sign-agreement run's shape
    p.add_argument("--prompts", type=int, default=run.prompts)
    p.add_argument("--samples", type=int, default=run.samples)
    p.add_argument("--new-tokens", type=int, default=run.new_tokens)
    p.add_argument("--redraws", type=int, default=run.redraws)
    p.add_argument("--min-mixed", type=int, default=run.min_mixed)
    p.add_argument("--task", default=run.task)
    p.add_argument("--model", default=run.model)
    p.add_argument("--json-out", default=None)
    args = p.parse_args(argv)
    doc = _results.start("bench_probe", args)

    import jax

    jax.config.update("jax_enable_x64", True)
    from experiments.sign_agreement import Config
    from theorycheck.models import load_model
    from theorycheck.probes import analyze_probe
    from theorycheck.rl import (
        TrainConfig,
        Trainer,
        collect_filled,
        from_record,
        record,
        tiny_model,
    )

    q: dict = {}
    model, q["load_cpu_s"], _ = _cpu(
        lambda: tiny_model() if args.model == "tiny" else load_model(args.model)
    )

    def draw(engine):
        return collect_filled(
            model,
            args.task,
            args.prompts,
            seed=0,
            redraws=args.redraws,
            min_mixed=args.min_mixed,
            engine_dtype=engine,
            samples=args.samples,
            new_tokens=args.new_tokens,
            topk=20,
            full_vocab=False,
        )

    (rollouts, meta), q["rollouts_cpu_s"], q["rollouts_wall_s"] = _cpu(
        lambda: draw("bfloat16")
    )
    # as the experiment: the recorded batch, its anchor rescored (full vocabulary)
    rollouts, q["rescore_cpu_s"], _ = _cpu(
        lambda: from_record(
            model,
            record(rollouts),
            engine_dtype="bfloat16",
            temperature=1.0,
            anchor=True,
        )
    )
    # the on-policy regime's rollouts (engine = trainer precision, its own fill)
    _, q["rollouts_f32_cpu_s"], q["rollouts_f32_wall_s"] = _cpu(lambda: draw("float32"))
    q["prompt_draws"] = meta["draws"]
    runs, profiles, steps = {}, {}, {}
    trunks: dict = {}
    # the experiment's trainer settings where they shape the cost (its trunk dtype)
    train = TrainConfig(trunk_dtype=Config().trunk_dtype)
    trunk_s = _cpu(lambda: Trainer(model, rollouts, train, seed=0, trunk=trunks))[1]
    # probe_rows="minibatch" at the experiment's others_rows (its default setting)
    setting = ("minibatch", Config().others_rows)
    walls = {}
    for name, fast, phase in (
        ("baseline", False, "cold"),
        ("fast", True, "cold"),
        ("fast", True, "warm"),
        ("minibatch", True, "cold"),
        ("minibatch", True, "warm"),
    ):
        trainer = Trainer(model, rollouts, train, seed=0, trunk=trunks)
        # the plain loop: its first BASELINE_STEPS steps (the first compiles)
        phases: dict = {}
        cut = None if fast else BASELINE_STEPS
        steps[(name, phase)] = _time_steps(trainer, cut, phases)
        rows = setting if name == "minibatch" else None
        analysis, probe, cpu, phases = _probe(trainer, fast, phases=phases, rows=rows)
        walls[name] = phases.pop("_wall")
        phases["trunk"] = trunk_s
        phases["io"] = _cpu(functools.partial(_write_unit, analysis))[1]
        runs[(name, phase)] = (analysis, probe, cpu, trunk_s)
        profiles[f"{name}_{phase}"] = phases
        print(f"{name} {phase}: probe {cpu:.1f} CPU-s", flush=True)
    tokens = runs[("fast", "warm")][0]["scale"]["updated_tokens"]
    q["updated_tokens"] = tokens
    q["trunk_cpu_s"] = runs[("fast", "warm")][3]
    # the plain loop, warm: its steps after the first (which compiles), per step
    per_step = [t for t, _ in steps[("baseline", "cold")]]
    warm_step = statistics.median(per_step[1:])
    n_steps = len(steps[("fast", "warm")])
    # the plain loop's warm profile: its second step's phases times the unit's steps
    profiles["baseline_warm"] = {
        k: n_steps * v for k, v in steps[("baseline", "cold")][1][1].items()
    }
    q["baseline_step_cpu_s"] = warm_step
    q["baseline_cold_cpu_s"] = runs[("baseline", "cold")][2]
    q["baseline_probe_cpu_s"] = warm_step * n_steps
    q["probe_cpu_s"] = runs[("fast", "warm")][2]
    q["step_cpu_s"] = statistics.median(t for t, _ in steps[("fast", "warm")])
    for prefix in ("baseline_", ""):
        cpu = q[f"{prefix}probe_cpu_s"]
        q[f"{prefix}tokens_per_cpu_s"] = tokens / cpu
        q[f"{prefix}unit_tokens_per_cpu_s"] = tokens / (cpu + trunk_s)
    q["compile_cpu_s"] = max(0.0, runs[("fast", "cold")][2] - runs[("fast", "warm")][2])
    q["probe_wall_s"] = walls["fast"]  # the fast path, warm
    # probe_rows="minibatch": the same updated tokens, its warm probe, its compile
    # (the probe pass and the realized passes of its row subsets; the rest is the
    # fast path's, compiled above), its numbers against the all-rows fast path's
    mb_analysis, mb_probe, mb_cpu, _ = runs[("minibatch", "warm")]
    if mb_analysis["scale"]["updated_tokens"] != tokens:
        raise SystemExit("minibatch probing changed the updated tokens")
    q["minibatch_others_rows"] = setting[1]
    q["minibatch_probe_cpu_s"] = mb_cpu
    q["minibatch_tokens_per_cpu_s"] = tokens / mb_cpu
    q["minibatch_unit_tokens_per_cpu_s"] = tokens / (mb_cpu + trunk_s)
    q["minibatch_compile_cpu_s"] = max(0.0, runs[("minibatch", "cold")][2] - mb_cpu)
    q["minibatch_step_cpu_s"] = statistics.median(
        t for t, _ in steps[("minibatch", "warm")]
    )
    q["minibatch_probe_wall_s"] = walls["minibatch"]
    full = runs[("fast", "warm")][1]
    q["minibatch_max_rel_diff"] = _max_rel_diff_probed(full, mb_probe)
    compared, differ = _same_metrics(
        analyze_probe(_restricted(full, mb_probe)), mb_analysis
    )
    q["minibatch_metrics_compared"], q["minibatch_metrics_differing"] = (
        compared,
        differ,
    )
    # the rest of an experiment unit before: the matched controls in a second pass
    # over the schedule on the fast path (the K = 4 gradient compiled here)
    from theorycheck.probes._fast import matched_controls
    from theorycheck.probes._matched import recorded_controls

    tr = Trainer(model, rollouts, train, seed=0, trunk=trunks)
    two_pass, q["controls_cpu_s"], _ = _cpu(
        functools.partial(
            matched_controls, tr, runs[("fast", "warm")][1], delta=0.0, seed=0
        )
    )
    two_pass.pop("max_rel_update_norm_gap")
    # the experiment's route now: the controls in the probe's own pass
    # (controls_seed, with minibatch probing; its programs are the masks', compiled
    # above), timed as the probe's phase "controls"
    tr = Trainer(model, rollouts, train, seed=0, trunk=trunks)
    in_pass: dict = {}
    _, probe_c, q["minibatch_with_controls_cpu_s"], _ = _probe(
        tr, True, phases=in_pass, rows=setting, controls_seed=0
    )
    q["minibatch_controls_cpu_s"] = in_pass["controls"]
    # the experiment's route as one number: what a unit of the sign-agreement
    # experiment runs after its trainer is built (minibatch probing, the controls in
    # the probe's pass, the analysis), and with the trunk; the seed's generation (both
    # engines and the anchor's rescore) is shared by its two units
    route = q["minibatch_with_controls_cpu_s"]
    q["route_tokens_per_cpu_s"] = q["updated_tokens"] / route
    q["route_unit_tokens_per_cpu_s"] = q["updated_tokens"] / (route + trunk_s)
    q["seed_generation_cpu_s"] = (
        q["rollouts_cpu_s"] + q["rollouts_f32_cpu_s"] + q["rescore_cpu_s"]
    )
    in_pass.pop("_wall", None)
    in_pass["trunk"] = trunk_s
    profiles["route_warm"] = in_pass
    compared, differ = _same_metrics(two_pass, recorded_controls(probe_c, delta=0.0))
    q["controls_metrics_compared"], q["controls_metrics_differing"] = compared, differ
    plain = runs[("baseline", "cold")][1]
    fast = _first_steps(runs[("fast", "warm")][1], len(plain["steps"]))
    q["max_rel_diff"] = _max_rel_diff(plain, fast)
    compared, differ = _same_metrics(runs[("baseline", "cold")][0], analyze_probe(fast))
    q["metrics_compared"], q["metrics_differing"] = compared, differ
    q["peak_rss_gb"] = _rss_gb()
    # what bounds the rate: the unit's unavoidable products at this machine's rate
    import jax.numpy as jnp

    q.update(_unit_gflop(trainer))
    c = trainer.model_config
    for name, dt in (("f64", jnp.float64), ("f32", jnp.float32)):
        rate = _gemm_rate(dt, 384, c.hidden_size, c.vocab_size)
        q[f"gemm_{name}_gflop_per_cpu_s"] = rate
        q[f"bound_{name}_tokens_per_cpu_s"] = tokens / (q["gflop_unit"] / rate)
    q["achieved_gflop_per_cpu_s"] = q["gflop_unit"] / q["probe_cpu_s"]
    from theorycheck.probes._probe import probed_rows

    sub = _unit_gflop(trainer, probed_rows(trainer, setting[1])[0])
    q.update({f"minibatch_{k}": v for k, v in sub.items()})
    q["minibatch_achieved_gflop_per_cpu_s"] = q["minibatch_gflop_unit"] / mb_cpu
    for name in ("f64", "f32"):
        rate = q[f"gemm_{name}_gflop_per_cpu_s"]
        q[f"minibatch_bound_{name}_tokens_per_cpu_s"] = tokens / (
            q["minibatch_gflop_unit"] / rate
        )
    q.update(_projection(q, trainer, walls["fast"]))
    q.update(_projection(q, trainer, walls["minibatch"], prefix="minibatch_"))
    _report(args, doc, q, profiles)
    # the accelerator policy: the trainable top and every probe pass in float32
    trainer32 = Trainer(model, rollouts, train, seed=0, dtype="float32")
    analysis32, probe32, _, _ = _probe(trainer32, True, masks=False)  # masks: no use
    q.update(_precision(runs[("fast", "warm")], (analysis32, probe32)))
    q["peak_rss_gb"] = _rss_gb()
    _report(args, doc, q, profiles)


def _report(args, doc, q, profiles) -> None:
    ratios = {k: q[n] / q[d] for k, (n, d) in RATIOS.items()}
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(json.dumps({"quantities": q, "ratios": ratios}, indent=1))
    print(f"load average at the end: {load}", flush=True)
    if args.json_out:
        doc.update(quantities=q, ratios=ratios, profile=profiles)
        targets = {}
        for name, (op, bound) in TARGETS.items():
            tgt = _results.target(op, bound)
            value = (q | ratios)[name]
            targets[name] = {"target": tgt, "met": _results.met(value, tgt)}
        doc["targets"] = targets
        _results.write(args.json_out, _results.finish(doc))


if __name__ == "__main__":
    main()

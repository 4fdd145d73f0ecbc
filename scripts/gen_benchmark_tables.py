"""Writes the benchmark tables of docs/benchmarks.md from ``benchmarks/results/*.json``.

Each benchmark run with ``--json-out benchmarks/results/<name>.json`` (``make bench``
does) leaves its measurements and their provenance there; this script renders one block
per results file: the provenance line (date, commit, cores, load average, versions, the
command), the quantity tables, and the ratio tables with their targets, each ✓ or ✗
recomputed here from the numbers. Before rendering it recomputes every same-run ratio
from its quantities and every target verdict from its value, and refuses a file whose
stored ratios or verdicts disagree. A benchmark without a results file renders a
one-line "not measured yet" block. No benchmark is run here.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import docgen  # noqa: E402

PAGE = "docs/benchmarks.md"
RESULTS = docgen.ROOT / "benchmarks" / "results"
SCHEMA = 1
OPS = {"<": float.__lt__, "<=": float.__le__, ">=": float.__ge__, ">": float.__gt__}
SYMBOL = {"<": "<", "<=": "≤", ">=": "≥", ">": ">"}


class Inconsistent(ValueError):
    """A results file whose stored ratios or verdicts disagree with its numbers."""


def _num(v, fmt: str = ".3g") -> str:
    return str(v) if isinstance(v, bool | int) else format(v, fmt)


def _met(value: float, target: dict) -> bool:
    return OPS[target["op"]](float(value), float(target["bound"]))


def _target(target: dict | None, vocab: int | None = None) -> str:
    if target is None:
        return ""
    where = "" if vocab is None else f" at V = {vocab}"
    return f"{SYMBOL[target['op']]} {target['bound']:g}{where}"


def _mark(met: bool | None) -> str:
    return "" if met is None else (" ✓" if met else " ✗")


def _check_ratio(where: str, stored: float, recomputed: float) -> None:
    if not math.isclose(stored, recomputed, rel_tol=1e-9, abs_tol=0.0):
        raise Inconsistent(f"{where}: stored {stored!r}, recomputed {recomputed!r}")


def _check_met(where: str, stored, value: float, target: dict | None, applies=True):
    expected = _met(value, target) if target is not None and applies else None
    if stored != expected:
        raise Inconsistent(f"{where}: stored met={stored!r}, recomputed {expected!r}")
    return expected


def command(doc: dict) -> str:
    """The command line that reproduces the run, from its recorded arguments."""
    parts = [f"python benchmarks/{doc['benchmark'].removesuffix('_scale')}.py"]
    for key, value in doc["provenance"]["args"].items():
        flag = "--" + key.replace("_", "-")
        if value is True:
            parts.append(flag)
        elif value is not False and value is not None:
            values = value if isinstance(value, list) else [value]
            parts.append(" ".join([flag, *map(str, values)]))
    return " ".join(parts)


def provenance(doc: dict) -> str:
    p = doc["provenance"]
    commit = "unknown commit" if p["commit"] is None else f"commit `{p['commit'][:10]}`"
    if p.get("dirty"):
        commit += " with uncommitted changes"
    load = [p[k] for k in ("load_1min_start", "load_1min_end")]
    load_text = (
        "load average unknown"
        if None in load
        else f"1-minute load average {load[0]:.1f} at start, {load[1]:.1f} at end"
    )
    return (
        f"Measured {p['date_utc']} at {commit} by `{command(doc)}`: "
        f"{p['cpu_count']} cores ({p.get('cpu') or p['platform']}), {load_text}; "
        f"Python {p['python']}, jax {p['jax']}, numpy {p['numpy']}."
    )


def _table(head: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    return "\n".join([*lines, *("| " + " | ".join(r) + " |" for r in rows)])


NUMERIC_LABELS = {
    "log-softmax (whole)": "log-softmax, whole-array jit",
    "log-softmax (blocked)": "log-softmax, `lax.map` {block}-row blocks",
    "numpy chunked": "numpy chunked, 16 rows, in place",
    "numpy naive": "numpy naive, scaled linearly from the rows timed",
    "numpy naive rows timed": "numpy naive: rows timed",
    "max rel err numpy vs jax": "max rel. error numpy vs jax (float32)",
    "mask disagreements": "mask disagreements numpy vs jax",
    "full-vocab KL D+Ddot": "full-vocab KL D + Ḋ",
    "top-K aggregated": "top-K aggregated, K = {topk}",
    "top-K uniform": "top-K uniform, K = {topk}",
    "peak RSS GB": "peak RSS of the process",
}


def render_numeric(doc: dict) -> str:
    shapes, units, args = doc["shapes"], doc["units"], doc["provenance"]["args"]
    head = [s["shape"] for s in shapes]
    rows = []
    for name, unit in units.items():
        label = NUMERIC_LABELS.get(name, name).format(**args)
        fmt = ".1e" if name == "max rel err numpy vs jax" else ".3g"
        label += f" ({unit})" if unit else ""
        rows.append([label, *(_num(s[name], fmt) for s in shapes)])
    ratio_rows = []
    for r in doc["ratios"]:
        cells = []
        for i, s in enumerate(shapes):
            where = f"{doc['benchmark']}: {r['name']} at {s['shape']}"
            value = s[r["numerator"]] / min(s[d] for d in r["denominators"])
            _check_ratio(where, r["values"][i], value)
            applies = r["target_vocab"] in (None, s["vocab"])
            met = _check_met(where, r["met"][i], value, r["target"], applies)
            cells.append(_num(value) + _mark(met))
        ratio_rows.append([r["name"], *cells, _target(r["target"], r["target_vocab"])])
    return "\n\n".join(
        [
            provenance(doc),
            _table(["quantity", *head], rows),
            _table(["ratio (same run)", *head, "target"], ratio_rows),
        ]
    )


def render_numeric_scale(doc: dict) -> str:
    s = doc["scale_check"]
    rows = [
        ["inputs (logits + behavior log-probs, GB)", f"{s['inputs_gb']:.1f}"],
        ["generating the inputs (s)", f"{s['generate_s']:.1f}"],
        [
            "`token_stats`, checks + all parts, first call incl. compile (s)",
            f"{s['token_stats_first_call_s']:.1f}",
        ],
        ["outputs NaN-free", str(s["nan_free"])],
        ["peak RSS of the process (GB)", f"{s['peak_rss_gb']:.1f}"],
    ]
    head = ["scale check", f"[{s['rows']}, {s['vocab']}] float32"]
    return provenance(doc) + "\n\n" + _table(head, rows)


def render_hessian(doc: dict) -> str:
    c = doc["cold_min_eigenvalue"]
    applies = c["target_vocab"] == doc["vocab"]
    where = "bench_hessian: cold"
    met = _check_met(where, c["met"], c["seconds"], c["target"], applies)
    cold = _table(
        ["cold `min_eigenvalue` (first call, compile included)", "value", "target"],
        [
            [
                "seconds",
                f"{c['seconds']:.2f}{_mark(met)}",
                _target(c["target"], c["target_vocab"]),
            ],
            ["Lanczos iterations", str(c["iters"]), ""],
            ["λ_min", f"{c['value']:.6e}", ""],
        ],
    )
    head = "point | loss | π_k | HVP ms | HVP/grad | Lanczos iters | Lanczos λ_min"
    head += " | closed form | abs diff | residual | first call s | warm s"
    head += " | closed form s | Lanczos/closed"
    rows = []
    for r in doc["rows"]:
        where = f"bench_hessian: {r['point']} {r['loss']}"
        diff = abs(r["lanczos_value"] - r["closed_form_value"])
        _check_ratio(where + " abs diff", r["abs_diff"], diff)
        over = r["min_eig_warm_s"] / r["closed_form_s"]
        _check_ratio(where + " Lanczos/closed", r["lanczos_over_closed"], over)
        rows.append(
            [
                r["point"],
                r["loss"].replace("_", " ").replace("is ", "IS "),
                f"{r['pi_k']:.2e}",
                f"{1e3 * r['hvp_s']:.2f}",
                f"{r['hvp_over_grad']:.2f}",
                str(r["lanczos_iters"]),
                f"{r['lanczos_value']:.6e}",
                f"{r['closed_form_value']:.6e}",
                f"{diff:.1e}",
                f"{r['lanczos_residual']:.1e}",
                f"{r['min_eig_first_call_s']:.2f}",
                f"{r['min_eig_warm_s']:.2f}",
                f"{r['closed_form_s']:.3f}",
                f"{over:.0f}",
            ]
        )
    point = f"V = {doc['vocab']}, k = {doc['k']}."
    return "\n\n".join(
        [provenance(doc) + " " + point, cold, _table(head.split(" | "), rows)]
    )


MODEL_LABELS = {
    "load_s": "load + sha256 + dequantise (s)",
    "parameters": "parameters",
    "rss_after_load_gb": "peak RSS after loading, float32 (GB)",
    "compile_scan_s": "compile forward, `lax.scan` (s)",
    "compile_unrolled_s": "compile forward, unrolled Python loop (baseline, s)",
    "forward_s": "forward {batch} × {seq} (s)",
    "forward_tokens_per_s": "forward tokens/s",
    "matmul_s": "baseline: one plain float32 matmul (s)",
    "matmul_gflops": "baseline: plain matmul GFLOP/s",
    "forward_gflops": "forward GFLOP/s",
    "jvp_all_s": "JVP, all parameters (s)",
    "jvp_top_s": "JVP, last 2 blocks, trunk computed once (s)",
    "small_forward_s": "forward {grad_batch} × {seq}, the VJP's baseline (s)",
    "grad_s": "VJP (grad of mean NLL), {grad_batch} × {seq} (s)",
    "peak_rss_gb": "peak RSS over the whole run (GB)",
    "compile_unrolled_over_scan": "compile: unrolled loop ÷ `lax.scan`",
    "forward_gflops_over_matmul": "forward GFLOP/s ÷ plain-matmul GFLOP/s",
    "jvp_all_over_forward": "JVP (all parameters) ÷ forward",
    "jvp_top_over_forward": "JVP (last 2 blocks, trunk computed once) ÷ forward",
    "vjp_over_forward": "VJP ÷ forward, both at {grad_batch} × {seq}",
}
MODEL_RATIOS = {  # the same-run ratios, recomputed from their quantities
    "compile_unrolled_over_scan": ("compile_unrolled_s", "compile_scan_s"),
    "forward_gflops_over_matmul": ("forward_gflops", "matmul_gflops"),
    "jvp_all_over_forward": ("jvp_all_s", "forward_s"),
    "jvp_top_over_forward": ("jvp_top_s", "forward_s"),
    "vjp_over_forward": ("grad_s", "small_forward_s"),
}


def _render_measures(bench: str, doc: dict, labels: dict, ratios: dict, fmt) -> str:
    """The two tables of a benchmark with named quantities and same-run ratios:
    every ratio recomputed from its quantities and every target's ✓/✗ re-decided
    (``fmt(name)`` is the number format of a row; labels may name ``args``)."""
    q, args, targets = doc["quantities"], doc["provenance"]["args"], doc["targets"]
    if set(doc["ratios"]) != set(ratios):
        raise Inconsistent(f"{bench}: ratios {sorted(doc['ratios'])}")
    values = dict(q)
    for name, (num, den) in ratios.items():
        values[name] = q[num] / q[den]
        _check_ratio(f"{bench}: {name}", doc["ratios"][name], values[name])

    def rows(names):
        out = []
        for name in names:
            t = targets.get(name)
            met = None
            if t is not None:
                where = f"{bench}: target on {name}"
                met = _check_met(where, t["met"], values[name], t["target"])
            cell = format(values[name], fmt(name)) + _mark(met)
            label = labels.get(name, name).format(**args)
            out.append([label, cell, _target(t and t["target"])])
        return out

    return "\n\n".join(
        [
            provenance(doc),
            _table(["measure", "value", "target"], rows(q)),
            _table(["ratio (same run)", "value", "target"], rows(ratios)),
        ]
    )


def render_models(doc: dict) -> str:
    def fmt(name):
        return ",.0f" if name in ("parameters", "forward_tokens_per_s") else ".3g"

    return _render_measures("bench_models", doc, MODEL_LABELS, MODEL_RATIOS, fmt)


TORCH_LABELS = {
    "verl_torch_s": "verl_dual_clip.py:loss --signature verl (torch), median s",
    "verl_jax_s": "verl_dual_clip_jax.py:loss (JAX twin), median s",
    "logits_torch_s": "clipped_ratio.py:loss (torch), median s",
    "logits_jax_s": "clipped_ratio_jax.py:loss (JAX twin), median s",
    "load_min": "1-minute load average, lowest around a run",
    "load_max": "1-minute load average, highest around a run",
    "verl_torch_over_jax": "verl form: torch ÷ JAX",
    "logits_torch_over_jax": "logits form: torch ÷ JAX",
}
TORCH_RATIOS = {
    "verl_torch_over_jax": ("verl_torch_s", "verl_jax_s"),
    "logits_torch_over_jax": ("logits_torch_s", "logits_jax_s"),
}


def render_torchfront(doc: dict) -> str:
    return _render_measures(
        "bench_torchfront", doc, TORCH_LABELS, TORCH_RATIOS, lambda name: ".3g"
    )


PROBE_LABELS = {
    "updated_tokens": "updated tokens of the unit",
    "tokens_per_cpu_s": "fast: updated tokens per CPU-second, probe + analysis (warm)",
    "baseline_tokens_per_cpu_s": "plain loop (baseline): updated tokens per CPU-second",
    "unit_tokens_per_cpu_s": "fast: updated tokens per CPU-second, with the trunk",
    "baseline_unit_tokens_per_cpu_s": "plain loop: updated tokens per CPU-second, with "
    "the trunk",
    "probe_cpu_s": "fast: probe + analysis, warm (CPU-s)",
    "baseline_probe_cpu_s": "plain loop: warm steps × steps (CPU-s)",
    "compile_cpu_s": "fast: compile (cold − warm, CPU-s)",
    "baseline_cold_cpu_s": "plain loop: its first two steps, cold (CPU-s)",
    "baseline_step_cpu_s": "plain loop: one step, warm (its second step, CPU-s)",
    "step_cpu_s": "fast: one step, warm (median, CPU-s)",
    "trunk_cpu_s": "frozen trunk, once per rollout batch (CPU-s)",
    "rollouts_cpu_s": "rollout generation, bfloat16 engine with the prompt-draw "
    "search, one seed (CPU-s)",
    "rollouts_wall_s": "rollout generation, bfloat16 engine (wall s)",
    "rollouts_f32_cpu_s": "rollout generation, float32 engine (on-policy), the same "
    "draw (CPU-s)",
    "rollouts_f32_wall_s": "rollout generation, float32 engine (wall s)",
    "prompt_draw": "prompt draw of the seed (dynamic sampling)",
    "prompt_draws": "draws the bfloat16 batch took (dynamic sampling, filled)",
    "rescore_cpu_s": "bfloat16 anchor rescored over the full vocabulary (CPU-s)",
    "probe_wall_s": "fast: probe + analysis, warm (wall s)",
    "controls_cpu_s": "fast: matched controls in a second pass (its K = 4 gradient "
    "compiled, CPU-s)",
    "default_gflop_unit": "default shape: matrix-product GFLOP of one unit",
    "default_probe_cpu_s": "default shape, extrapolated: probe CPU-s of one unit at "
    "this run's GFLOP per CPU-s",
    "default_min_updated_tokens": "default shape: updated tokens of a unit, at least",
    "default_tokens_per_cpu_s": "default shape, extrapolated: updated tokens per "
    "CPU-second, probe (at least)",
    "run_seeds": "default run: seeds (both regimes each)",
    "run_projected_cpu_s": "default run, extrapolated (CPU-s; see the text)",
    "probe_cpu_per_wall": "fast: CPU-s per wall second of the warm probe (this run)",
    "run_projected_wall_s": "default run, extrapolated wall at this run's CPU/wall (s)",
    "run_projected_wall_2cores_s": "default run, extrapolated wall with both cores "
    "busy (s)",
    "load_cpu_s": "model load + dequantise (CPU-s)",
    "max_rel_diff": "largest difference fast vs plain, per-token arrays of the first "
    "two steps (relative)",
    "metrics_compared": "analysis metrics of the first two steps compared",
    "metrics_differing": "analysis metrics differing (rel. > 1e-9)",
    "peak_rss_gb": "peak RSS (GB)",
    "median_abs_step_change": "median realized one-step ΔD, float64 (updated tokens)",
    "float32_median_abs_err_step_change": "float32 policy: median error of that ΔD",
    "float32_max_abs_err_step_change": "float32 policy: largest error of that ΔD",
    "float32_realized_sign_flip_share": "float32 policy: share of realized ΔD signs "
    "flipped",
    "ratio_agreement": "`ratio` agreement, float64",
    "float32_ratio_agreement": "`ratio` agreement, float32 policy",
    "ntk1_agreement": "`ntk1` agreement, float64",
    "float32_ntk1_agreement": "`ntk1` agreement, float32 policy",
    "ntk2_agreement": "`ntk2` agreement, float64",
    "float32_ntk2_agreement": "`ntk2` agreement, float32 policy",
    "speedup": "speed-up, probe: fast ÷ plain tokens per CPU-second",
    "unit_speedup": "speed-up, with the trunk",
    "minibatch_others_rows": "minibatch probing: off-minibatch rows probed per step",
    "minibatch_probe_cpu_s": "minibatch probing: probe + analysis, warm (CPU-s)",
    "minibatch_tokens_per_cpu_s": "minibatch probing: updated tokens per CPU-second, "
    "probe + analysis (warm)",
    "minibatch_unit_tokens_per_cpu_s": "minibatch probing: updated tokens per "
    "CPU-second, with the trunk",
    "minibatch_compile_cpu_s": "minibatch probing: compile of its row-subset "
    "programs (cold − warm, CPU-s)",
    "minibatch_step_cpu_s": "minibatch probing: one step, warm (median, CPU-s)",
    "minibatch_probe_wall_s": "minibatch probing: probe + analysis, warm (wall s)",
    "minibatch_max_rel_diff": "largest difference minibatch vs all-rows fast path, "
    "probed entries (relative)",
    "minibatch_metrics_compared": "analysis metrics compared (same rows probed)",
    "minibatch_metrics_differing": "analysis metrics differing (rel. > 1e-9)",
    "minibatch_controls_cpu_s": "matched controls in the probe's pass (minibatch "
    "probing, the experiment's route; phase `controls`, CPU-s)",
    "minibatch_with_controls_cpu_s": "minibatch probing with the controls in its "
    "pass: probe + analysis, warm (CPU-s)",
    "controls_metrics_compared": "controls' metrics compared, in-pass vs second pass",
    "controls_metrics_differing": "controls' metrics differing (rel. > 1e-9)",
    "minibatch_speedup": "speed-up, probe: minibatch probing ÷ plain tokens per "
    "CPU-second",
    "minibatch_unit_speedup": "speed-up, minibatch probing, with the trunk",
    "minibatch_over_all_rows": "minibatch probing ÷ all-rows fast path, tokens per "
    "CPU-second",
    "route_tokens_per_cpu_s": "the experiment's route (minibatch probing, controls "
    "in its pass): updated tokens per CPU-second, probe + analysis (warm)",
    "route_unit_tokens_per_cpu_s": "the experiment's route: updated tokens per "
    "CPU-second, with the trunk",
    "seed_generation_cpu_s": "one seed's generation: both engines' rollouts and the "
    "anchor's rescore (CPU-s, shared by the seed's two units)",
    "route_speedup": "speed-up, probe: the experiment's route ÷ plain tokens per "
    "CPU-second",
}
PROBE_RATIOS = {
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
PROBE_PHASES = {
    "grad": "trainer steps: minibatch loss + gradient",
    "update": "optimizer update",
    "jvp": "nested JVP (fast: + ratio, Ḋ from the same pass)",
    "stats": "ratio and Ḋ (token_stats on the logits)",
    "realized": "realized-D passes",
    "masks": "mask branches",
    "controls": "matched controls (in the probe's pass)",
    "layout": "shared-prompt layout",
    "analysis": "analysis (analyze_probe)",
    "other": "other (Python, records)",
    "trunk": "frozen trunk (trainer construction)",
    "io": "I/O: the unit's results written",
}
PROFILE_RUNS = {
    "baseline_cold": "plain loop, 2 steps, cold",
    "baseline_warm": "plain loop, warm (its 2nd step × steps)",
    "fast_cold": "fast, cold",
    "fast_warm": "fast, warm",
    "minibatch_cold": "minibatch probing, cold",
    "minibatch_warm": "minibatch probing, warm",
    "route_warm": "the experiment's route (+ controls in its pass), warm",
}


def _profile_rows(prof: dict, runs: list[str]) -> list[list[str]]:
    """The profile table's rows: CPU-s per phase (:data:`PROBE_PHASES`) of each of
    ``runs``, phases no run has left out, then the totals."""
    table = []
    for phase, label in PROBE_PHASES.items():
        cells = [prof[r].get(phase) for r in runs]
        if all(c is None for c in cells):
            continue
        table.append([label] + ["–" if c is None else f"{c:.2f}" for c in cells])
    totals = [sum(prof[r].values()) for r in runs]
    return table + [["**total**"] + [f"**{t:.2f}**" for t in totals]]


def render_probe(doc: dict) -> str:
    q, targets = doc["quantities"], doc["targets"]
    values = dict(q)
    ratios = [n for n in PROBE_RATIOS if n in doc["ratios"]]  # older files: fewer
    for name in ratios:
        num, den = PROBE_RATIOS[name]
        values[name] = q[num] / q[den]
        _check_ratio(f"bench_probe: {name}", doc["ratios"][name], values[name])

    def rows(names):
        out = []
        for name in names:
            t = targets.get(name)
            met = None
            if t is not None:
                where = f"bench_probe: target on {name}"
                met = _check_met(where, t["met"], values[name], t["target"])
            small = name == "max_rel_diff" or "change" in name
            v = values[name]
            cell = "–" if v is None else _num(v, ".2e" if small else ".3g")
            label = PROBE_LABELS.get(name, name)
            out.append([label, cell + _mark(met), _target(t and t["target"])])
        return out

    prof = doc["profile"]
    runs = [r for r in PROFILE_RUNS if r in prof]
    head = ["phase (CPU-s)", *(PROFILE_RUNS[r] for r in runs)]
    table = _profile_rows(prof, runs)
    return "\n\n".join(
        [
            provenance(doc),
            _table(["measure", "value", "target"], rows(q)),
            _table(["ratio (same run)", "value", "target"], rows(ratios)),
            "Profile of the unit (CPU seconds per phase, both paths in this run):",
            _table(head, table),
        ]
    )


#: the measures of an earlier probe run set beside the current one
PROBE_BEFORE = (
    "route_tokens_per_cpu_s",
    "route_unit_tokens_per_cpu_s",
    "rollouts_cpu_s",
    "rollouts_f32_cpu_s",
    "rescore_cpu_s",
    "trunk_cpu_s",
    "seed_generation_cpu_s",
    "minibatch_run_projected_cpu_s",
    "minibatch_run_projected_wall_s",
    "minibatch_run_projected_wall_2cores_s",
)


def render_probe_before(doc: dict) -> str:
    """An earlier ``bench_probe`` run (kept as ``bench_probe_before.json``): its
    provenance, the measures of :data:`PROBE_BEFORE` and the profile of the
    experiment's route, to read beside the current block."""
    q, prof = doc["quantities"], doc["profile"]
    labels = {
        **PROBE_LABELS,
        "minibatch_run_projected_cpu_s": "the default run projected at these rates "
        "(CPU-s; the text above the current block)",
        "minibatch_run_projected_wall_s": "the same, wall at this run's CPU-s per "
        "wall second of the warm probe (s)",
        "minibatch_run_projected_wall_2cores_s": "the same, wall with both cores "
        "busy (s)",
    }
    rows = [[labels.get(n, n), _num(q[n], ".3g")] for n in PROBE_BEFORE if n in q]
    runs = [r for r in ("minibatch_warm", "route_warm") if r in prof]
    table = _profile_rows(prof, runs)
    return "\n\n".join(
        [
            provenance(doc),
            _table(["measure (before)", "value"], rows),
            _table(["phase (CPU-s, before)", *(PROFILE_RUNS[r] for r in runs)], table),
        ]
    )


#: results files holding another benchmark's run (the stem it was written as)
KIND = {"bench_probe_before": "bench_probe"}

# results file stem: (block name, renderer, the command that writes the file)
BENCHMARKS = {
    "bench_numeric": ("bench-numeric", render_numeric, ""),
    "bench_numeric_scale": ("bench-numeric-scale", render_numeric_scale, "--scale"),
    "bench_hessian": ("bench-hessian", render_hessian, ""),
    "bench_models": ("bench-models", render_models, ""),
    "bench_torchfront": ("bench-torchfront", render_torchfront, ""),
    "bench_probe": ("bench-probe", render_probe, ""),
    "bench_probe_before": ("bench-probe-before", render_probe_before, ""),
}


def render(stem: str, results: Path = RESULTS) -> str:
    """The block of one benchmark: its tables, or "not measured yet"."""
    block, renderer, flags = BENCHMARKS[stem]
    path = results / f"{stem}.json"
    if not path.exists():
        script = KIND.get(stem, stem).removesuffix("_scale")
        flags = f"{flags} " if flags else ""
        return (
            f"Not measured yet: run `python benchmarks/{script}.py {flags}--json-out "
            f"benchmarks/results/{stem}.json`, then `make docs`."
        )
    doc = json.loads(path.read_text())
    kind = KIND.get(stem, stem)
    if doc.get("benchmark") != kind or doc.get("schema") != SCHEMA:
        raise Inconsistent(
            f"{path.name}: benchmark {doc.get('benchmark')!r}, schema "
            f"{doc.get('schema')!r} (expected {kind!r}, {SCHEMA})"
        )
    return renderer(doc)


#: results files in benchmarks/results/ that another generator renders
OTHER_OWNERS = {
    "convexity_provers": "scripts/gen_provers_table.py",
    "convexity_registry": "scripts/gen_convexity_table.py",
}


def blocks(results: Path = RESULTS) -> dict[tuple[str, str], str]:
    unknown = sorted(
        p.name
        for p in results.glob("*.json")
        if p.stem not in BENCHMARKS and p.stem not in OTHER_OWNERS
    )
    if unknown:
        raise ValueError(f"{results}: no benchmark owns {', '.join(unknown)}")
    return {(PAGE, BENCHMARKS[s][0]): render(s, results) for s in BENCHMARKS}


if __name__ == "__main__":
    raise SystemExit(docgen.main(blocks))

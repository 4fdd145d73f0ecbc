"""Renders the composition/chord measurement (block ``convexity-provers`` of
``docs/convexity.md``) from ``benchmarks/results/convexity_provers.json``.

``--run`` computes the results file: ``check_convexity`` on every loss of the corpus
(``examples/losses/provers.py`` and ``examples/losses/adversarial.py``, the truth of
each derived by hand in its docstring and listed in :data:`TRUTH`, plus the registry
rows the registry table leaves ``unknown``), 64 search starts, V = 3 (``--part I N``
runs every N-th loss, ``--assemble`` joins the parts of parallel processes). The
verdict *before* the composition prover and the chord refuter is the same run's
records without theirs, combined by the same pure combiner (both stages run last and
change no earlier record), so before and after are one run. ``--check`` (a test runs
it) re-renders the block from the committed file and fails when the page differs.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import docgen  # noqa: E402

PAGE, BLOCK = "docs/convexity.md", "convexity-provers"
RESULTS = (
    Path(__file__).resolve().parents[1] / "benchmarks/results/convexity_provers.json"
)

C, N = "convex", "not_convex"
#: the truth of every corpus loss, derived by hand (each docstring says why).
TRUTH = {
    "examples/losses/provers.py": {
        "max_margin": C,
        "hinge_ce": C,
        "multiclass_hinge": C,
        "abs_margin": C,
        "relu_sum": C,
        "softplus_margin": C,
        "squared_hinge": C,
        "weighted_lse": C,
        "cond_branch": C,
        "switch_branch": C,
        "fori_ce": C,
        "min_margin": N,
        "neg_abs": N,
        "capped_ce": N,
        "argmax_nll": N,
        "floor_jump": N,
        "round_jump": N,
        "rem_sawtooth": N,
        "int_cast_jump": N,
        "where_jump": N,
        "top1_sort": N,
        "atan_margin": N,
        "atan2_ce": N,
        "fori_log_pi": N,
        "sort_top1_convex": C,
    },
    "examples/losses/adversarial.py": {
        "last_token_flip": N,
        "python_branch": N,
        "float_factor": N,
        "token_threshold": N,
        "take_one_hot": C,
        "fixed_token": C,
        "iota_threshold": N,
        "iota_weighted": N,
        "count_from_five": N,
        "mu_threshold": N,
        "vocab_scale": N,
        "mean_squares": C,
        "carried_witness": N,
        "shape_branch": N,
        "len_branch": N,
    },
}
#: registry rows the registry table leaves unknown (name, adv).
REGISTRY = [("dppo_topk_tv_k_slots", 1.0), ("dppo_topk_kl_k_slots", 1.0)]


def _specs():
    for name, adv in REGISTRY:
        yield name, {"adv": adv}, None
    for path, truths in TRUTH.items():
        for name, truth in truths.items():
            yield f"{path}:{name}", {}, truth


def run(part: int = 0, parts: int = 1, save=None) -> dict:
    import jax

    from theorycheck.convexity import _check
    from theorycheck.convexity._types import Stage

    jax.config.update("jax_enable_x64", True)
    seen = {}
    real = _check.combine

    def combine(records, checked, tokens=""):
        mine = (Stage.DCP, Stage.CHORD)
        seen["before"] = real(
            [r for r in records if r.stage not in mine], checked, tokens
        )
        return real(records, checked, tokens)

    _check.combine = combine
    rows, start = [], time.perf_counter()
    for i, (spec, params, truth) in enumerate(_specs()):
        if i % parts != part:
            continue
        t0 = time.perf_counter()
        res = _check.check_convexity(spec, params=params, num_starts=64)
        before = seen["before"]
        decisive = [
            m["method"]
            for m in res.methods
            if m["method"] in ("composition (DCP)", "chord")
            and m["status"] in ("proved", "refuted")
        ]
        rows.append(
            {
                "spec": spec,
                "params": params,
                "truth": truth,
                "before": str(before.verdict),
                "before_scope": before.text,
                "after": str(res.verdict),
                "after_scope": res.scope,
                "by": decisive,
                "seconds": round(time.perf_counter() - t0, 1),
            }
        )
        if save is not None:  # each row as it comes (a long run is never lost)
            Path(save).write_text(json.dumps(_meta(rows, start), indent=1))
        print(
            f"{spec}: {before.verdict} -> {res.verdict} ({res.scope})",
            file=sys.stderr,
            flush=True,
        )
    return _meta(rows, start)


def _meta(rows, start) -> dict:
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    load = Path("/proc/loadavg")
    return {
        "rows": rows,
        "wall_s": round(time.perf_counter() - start, 1),
        "num_starts": 64,
        "vocab": [3],
        "commit": commit,
        "python": platform.python_version(),
        "load_average": load.read_text().split()[:3] if load.exists() else None,
    }


def _decided(v):
    return v in (C, N)


def render(data) -> str:
    rows = data["rows"]
    lines = [
        "| loss | truth | before | after | decided by | scope (after) |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        spec = r["spec"].replace("examples/losses/", "")
        if r["params"]:
            spec += " " + ", ".join(f"{k}={v:+g}" for k, v in r["params"].items())
        lines.append(
            f"| `{spec}` | {r['truth'] or '—'} | {r['before']} | {r['after']} | "
            f"{', '.join(r['by']) or '—'} | {r['after_scope']} |"
        )
    n = len(rows)
    before = sum(_decided(r["before"]) for r in rows)
    after = sum(_decided(r["after"]) for r in rows)
    known = [r for r in rows if r["truth"]]
    wrong = sum(1 for r in known if _decided(r["after"]) and r["after"] != r["truth"])
    wrong_b = sum(
        1 for r in known if _decided(r["before"]) and r["before"] != r["truth"]
    )
    note = (
        f"Generated by `scripts/gen_provers_table.py` from "
        f"`benchmarks/results/convexity_provers.json` (commit {data['commit']}, "
        f"{data['num_starts']} search starts, V = 3, {data.get('processes', 1)} "
        f"process(es), {data['wall_s']:.0f} s wall clock, "
        f"load average {' '.join(data['load_average'] or ['?'])}): {before} of {n} "
        f"decided before ({100 * before / n:.0f}%), {after} of {n} after "
        f"({100 * after / n:.0f}%); verdicts that contradict the truth: "
        f"{wrong_b} before, "
        f"{wrong} after."
    )
    return "\n".join(lines) + "\n\n" + note


def blocks():
    return {(PAGE, BLOCK): render(json.loads(RESULTS.read_text()))}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--run", action="store_true", help="recompute the results file")
    parser.add_argument("--check", action="store_true")
    parser.add_argument(
        "--part",
        type=int,
        nargs=2,
        metavar=("I", "N"),
        help="with --run: every N-th loss from the I-th, to --save",
    )
    parser.add_argument("--save", metavar="PART.json")
    parser.add_argument("--assemble", nargs="+", metavar="PART.json")
    args = parser.parse_args()
    if args.run and args.part:
        Path(args.save).write_text(json.dumps(run(*args.part, args.save), indent=1))
        sys.exit(0)
    if args.assemble:  # parts run in parallel processes: wall clock is the longest
        parts = [json.loads(Path(p).read_text()) for p in args.assemble]
        order = {s: i for i, (s, _, _) in enumerate(_specs())}
        data = dict(parts[0])
        data["rows"] = sorted(
            (r for p in parts for r in p["rows"]), key=lambda r: order[r["spec"]]
        )
        data["wall_s"] = max(p["wall_s"] for p in parts)
        data["processes"] = len(parts)
        RESULTS.write_text(json.dumps(data, indent=1) + "\n")
    if args.run:
        RESULTS.write_text(json.dumps(run(), indent=1) + "\n")
    sys.exit(docgen.main(blocks, ["--check"] if args.check else []))

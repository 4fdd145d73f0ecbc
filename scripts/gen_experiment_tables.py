"""Writes the experiment tables of README.md and docs/ from ``experiments/results/``.

Each committed experiment run (``experiments/results/<name>/results.json`` with its
provenance, per-unit numbers and per-variant summary; ``rollouts.npz`` beside it for
``--replay``) is rendered by the experiment's own report module: the scale line (model,
batch, seeds, updated tokens per seed, wall time, load average, commit), the predictor,
mask and §4.2 tables per regime with 95% bootstrap intervals over seeds, and the
conclusions, each decided here from its interval (a difference is stated as a
difference only when its interval excludes 0). The linearization and gradient-bound
blocks state every over-seed number as mean [95% percentile bootstrap interval over
seeds], the α thresholds as a geometric mean with 10^(interval of log10 α), and a
comparison of two settings' α says whether their intervals overlap. A results file that
is absent renders a one-line "not measured yet" block. No experiment is run here.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import docgen  # noqa: E402

sys.path.insert(0, str(docgen.ROOT))

from experiments import (  # noqa: E402
    _gradient_report,
    _linearization_report,
    _rollout_report,
    _sign_report,
    runner,
)
from experiments._sign_report import cell  # noqa: E402

RESULTS = docgen.ROOT / "experiments" / "results"
#: the default run's scale targets (the experiments' power requirement).
TARGET_TOKENS, TARGET_SEEDS = 1000, 20


def load(name: str, root: Path = RESULTS) -> dict | None:
    """The committed results of experiment ``name`` (None when absent)."""
    path = root / name / "results.json"
    return json.loads(path.read_text()) if path.exists() else None


def _missing(name: str) -> str:
    return (
        f"*Not measured yet: no committed `experiments/results/{name}/results.json`.*"
    )


def scale_line(data: dict) -> str:
    """Model, batch, seeds, updated tokens per seed, wall time, load, commit; and
    whether the run reaches the default run's scale."""
    cfg = data["config"]
    tokens = [u["updated_tokens"] for u in data["units"].values()]
    seeds = sorted({u["seed"] for u in data["units"].values()})
    regimes = sorted({u["regime"] for u in data["units"].values()})
    small = max(tokens, default=0) < TARGET_TOKENS or len(seeds) < TARGET_SEEDS
    missing = data.get("missing_units") or []
    return (
        f"**Scale of the committed run:** `{cfg['model']}`, task `{cfg['task']}`, "
        f"{cfg['prompts']} prompts × {cfg['samples']} samples × {cfg['new_tokens']} "
        f"new tokens per seed, {len(seeds)} seeds ({seeds[0]}–{seeds[-1]}), regimes "
        f"{', '.join(f'`{r}`' for r in regimes)}"
        + (
            f" (the `bf16_engine` anchor rescored with {anchor_words(cfg)})"
            if "bf16_engine" in regimes
            else ""
        )
        + f", the frozen trunk in {cfg.get('trunk_dtype', 'float32')}"
        + "; updated tokens per seed "
        f"{min(tokens)}–{max(tokens)} (median {sorted(tokens)[len(tokens) // 2]}). "
        + (
            f"**Not finished (in no number below):** {', '.join(missing)}. "
            if missing
            else ""
        )
        + (
            f"This is **below the default run's scale** (≥ {TARGET_SEEDS} seeds × ≥ "
            f"{TARGET_TOKENS:,} updated tokens per seed): its intervals are wide and "
            "a difference they do not exclude is not evidence of no difference. "
            if small
            else ""
        )
        + timing(data)
    )


def timing(data: dict) -> str:
    """Wall time, invocations, machine, load average and the commits of a run (from
    its provenance and its ``runs`` record)."""
    prov = data["provenance"]
    runs = data.get("runs") or [
        {
            "wall_s": prov.get("wall_s"),
            "load_average_start": prov.get("load_average_start"),
            "load_average_end": prov.get("load_average_end"),
            "commit": prov.get("commit"),
        }
    ]
    wall = sum(r["wall_s"] or 0 for r in runs) or None
    load_avg = "; ".join(
        f"{r.get('load_average_start')} at the start, {r.get('load_average_end')} at "
        "the end"
        for r in runs
    )
    # the allocator each invocation ran with (recorded since the jemalloc preload)
    allocators = sorted({r["allocator"] for r in runs if r.get("allocator")})
    alloc = f", allocator {' and '.join(allocators)}" if allocators else ""
    peaks = [r["peak_rss_mb"] for r in runs if r.get("peak_rss_mb")]
    if peaks:
        alloc += f", peak RSS {max(peaks) / 1024:.1f} GB"
    # the commits the units were computed at (a run killed before its end records
    # no invocation of its own; its units still record theirs)
    shas = set((data.get("unit_commits") or {}).values()) or {
        r.get("commit") or "" for r in runs
    }
    computed = ", ".join(
        sorted(
            sha[:12] + (" (tracked files changed)" if "+dirty" in sha else "")
            for sha in shas
        )
    )
    return (
        (f"Wall time {wall / 60:.1f} min" if wall else "Wall time not recorded")
        + f" in {len(runs)} invocation(s) on {prov.get('cpu_count')} CPU cores "
        f"({prov.get('cpu')}) shared with other work, load average {load_avg}"
        f"{alloc}; units "
        f"computed at commit `{computed}`, summarized at "
        f"`{(prov.get('commit') or '')[:12]}`"
        + (" with uncommitted changes" if prov.get("dirty") else "")
        + f", {prov.get('started')}."
    )


def _verdict(d: dict | None, lower_is_better: bool = True) -> str:
    if not d or d.get("ci95") is None:
        return "cannot tell (fewer than 2 seeds with a value)"
    lo, hi = d["ci95"]
    if hi < 0:
        return "lower" if lower_is_better else "worse"
    if lo > 0:
        return "higher"
    return "no difference the interval can resolve"


def conclusions(data: dict) -> list[str]:
    """One sentence per regime and comparison, decided from the interval."""
    out = []
    for name, v in data["summary"].items():
        st, diffs = v["stats"], v["diffs"]
        tag = f"`{name}` (regime `{v['regime']}`, {len(v['seeds'])} seeds)"

        def ba(p, st=st):
            return _sign_report.cell(st.get(f"signal/{p}/balanced_accuracy"))

        out.append(
            f"- {tag}: one-step balanced accuracy on the signal tokens: ratio "
            f"{ba('ratio')}, Ḋ {ba('ddot_full')}, coupled first order {ba('ntk1')}, "
            f"first + second {ba('ntk2')}; base rate of a rise "
            f"{_sign_report.cell(st.get('signal/always_rise/agreement'))}."
        )
        for c in ("ratio_matched", "predictive_matched", "random_matched"):
            d = diffs.get(f"masks/coupled/unsafe_keep - masks/{c}/unsafe_keep")
            if d is None:
                continue
            out.append(
                f"- {tag}: unsafe keep of the coupled mask minus `{c}` (same masked "
                f"share): {_sign_report.cell(d, 3)} → {_verdict(d)}; smallest "
                f"detectable difference {d['mde']:.3f}."
                if d.get("mde") is not None
                else f"- {tag}: coupled − `{c}` unsafe keep {_sign_report.cell(d, 3)} "
                "(one seed: no interval, no conclusion)."
            )
        d = diffs.get(
            "paper_4_2/run/ddot/unsafe_keep - paper_4_2/run/ratio/unsafe_keep"
        )
        if d is not None:
            out.append(
                f"- {tag}: §4.2 (δ = median D, after the whole schedule): Ḋ minus "
                f"ratio unsafe keep {_sign_report.cell(d, 3)} → {_verdict(d)} (the "
                "paper: 0.342 − 0.369 = −0.027 over 61 seeds)."
            )
    return out


def probe_blocks(data: dict | None) -> dict[str, str]:
    """The sign-agreement blocks of docs/probes.md, README.md and findings.md."""
    names = ("probes-scale", "probes-tables", "probes-conclusions")
    if data is None:
        return dict.fromkeys(names, _missing("sign_agreement"))
    tables = []
    for name, v in data["summary"].items():
        st = v["stats"]
        gap = st.get("rollouts/anchor_gap/max_abs_sampled_logp")
        gap_line = (
            [
                "Anchor: the engine's teacher-forced rescoring of the recorded tokens "
                "(what a replay recomputes); its largest difference from the "
                "generating engine's own log-prob of the sampled token, per seed: "
                f"{_sign_report.cell(gap, 3)} (top-K: "
                f"{cell(st.get('rollouts/anchor_gap/max_abs_topk_logp'), 3)}).",
                "",
            ]
            if gap
            else []
        )
        zero = st.get("zero_signal/tokens")
        tables += [
            f"#### `{name}`: regime `{v['regime']}`, {len(v['seeds'])} seeds",
            "",
            f"Updated tokens per seed {cell(st.get('updated_tokens'), 0)}, of which "
            f"zero-signal (π = μ, counted apart) {cell(zero, 0)}.",
            "",
            *gap_line,
            "One-step sign metrics on the signal tokens (mean [95% bootstrap "
            "interval over seeds]):",
            "",
            *_sign_report.predictor_table(v),
            "Masks from the same state, with the matched controls (each removes as "
            "many tokens per step as the coupled mask):",
            "",
            *_sign_report.mask_table(v),
            *_sign_report.diff_table(
                v,
                [
                    (a, b)
                    for a, b in _sign_report.COMPARISONS
                    if a.startswith("masks/coupled/unsafe")
                ],
            ),
            f"§4.2 metric (δ = the {data['config']['paper_quantile']:g} quantile of "
            f"D, mean δ {_sign_report.sci(v['stats'].get('paper_4_2/delta'))}):",
            "",
            *_sign_report.paper_table(v),
        ]
    return {
        "probes-scale": scale_line(data),
        "probes-tables": "\n".join(tables),
        "probes-conclusions": "\n".join(conclusions(data)),
    }


def rollout_block(data: dict | None) -> str:
    """The rollout analysis block of docs/demo.md."""
    if data is None:
        return _missing("rollout_analysis")
    prov = data["provenance"]
    parts = []
    for r in data.get("runs", []):
        load = f"{r.get('load_average_start')} → {r.get('load_average_end')}"
        sha = (r.get("commit") or "")[:12]
        wall = r["wall_s"] / 60
        parts.append(f"computed at commit `{sha}` in {wall:.1f} min wall, load {load}")
    runs = "; ".join(parts)
    return "\n".join(
        [
            _rollout_report.section(data),
            f"{runs or 'Computing invocation not recorded'}; summarized at commit "
            f"`{(prov.get('commit') or '')[:12]}`, {prov.get('started')} "
            f"({prov.get('cpu_count')} CPU cores shared with other work).",
        ]
    )


#: how an anchor was rescored (``anchor_arithmetic``), in words
ARITHMETIC = {
    "xla": "XLA's bfloat16 arithmetic",
    "exact": "exactly rounded bfloat16 arithmetic",
}


def anchor_words(cfg: dict) -> str:
    """How a run's anchor was rescored, in words (a config that predates the
    setting: XLA's), with what that means for a replay on another CPU."""
    how = cfg.get("anchor_arithmetic", "xla")
    return ARITHMETIC[how] + (
        " (the same on every CPU)"
        if how == "exact"
        else " (CPU-dependent: replayed exactly on the run's CPU model only)"
    )


def determinism_block(data: dict | None) -> str:
    """Whether bfloat16 generation and rescoring were bit-identical."""
    if data is None:
        return _missing("engine_determinism")
    cfg, prov = data["config"], data["provenance"]
    rows = [
        "| compared | array | bit-identical | largest difference |",
        "|---|---|---|---|",
    ]
    for key, label in (
        ("same_process", "the same process, twice"),
        ("single_threaded_child", "a single-threaded XLA process"),
        ("sse42_child", "an XLA process with SSE4.2 code only"),
    ):
        for name, r in data.get(key, {}).items():
            diff = "–" if r["max_abs_diff"] is None else f"{r['max_abs_diff']:.2e}"
            ident = "yes" if r["bit_identical"] else "**no**"
            rows.append(f"| {label} | `{name}` | {ident} | {diff} |")
    return "\n".join(
        [
            f"`{cfg['model']}`, seed {cfg['seed']}, {cfg['prompts']} Countdown "
            f"prompts × {cfg['samples']} samples × {cfg['new_tokens']} tokens, "
            f"bfloat16 engine, on {prov.get('cpu')} ({prov.get('cpu_count')} "
            "cores), commit "
            f"`{(prov.get('commit') or '')[:12]}`:",
            "",
            *rows,
        ]
    )


def against_block(root: Path = RESULTS) -> str:
    """The cross-CPU comparison (``engine_determinism --against``): a recorded
    bfloat16 batch generated again on another CPU, bit for bit, and its recorded
    tokens rescored there."""
    path = root / "engine_determinism" / "against.json"
    if not path.exists():
        return (
            "**Not measured yet** (no committed "
            "`experiments/results/engine_determinism/against.json`)."
        )
    d = json.loads(path.read_text())
    prov = d["provenance"]
    rows = [
        "| array | bit-identical | entries equal | largest difference |",
        "|---|---|---|---|",
    ]
    for name, r in d["generation"].items():
        diff, share = r.get("max_abs_diff"), r.get("share_equal")
        cell = "–" if diff is None else f"{diff:.2e}"
        eq = "–" if share is None else f"{share:.1%}"
        ident = "yes" if r["bit_identical"] else "**no**"
        rows.append(f"| `{name}` | {ident} | {eq} | {cell} |")
    gap, rec = d["anchor_gap_here"], d["anchor_gap_recorded"]
    return "\n".join(
        [
            f"The bfloat16 batch of seed {d['seed']} recorded by the committed "
            f"`{d['experiment']}` run (on {d['recorded_on']}) generated again on "
            f"{prov.get('cpu')} ({prov.get('cpu_count')} cores, commit "
            f"`{(prov.get('commit') or '')[:12]}`, {prov.get('started')}) with the "
            "run's config and sampler, against the record:",
            "",
            *rows,
            "",
            "The recorded tokens rescored on this CPU with "
            + ARITHMETIC[d.get("anchor_arithmetic", "xla")]
            + " (the anchor a replay of that run recomputes): largest |rescored − "
            "engine-reported| sampled log-prob "
            f"{gap:.4g} here, {rec:.4g} in the unit recorded on {d['recorded_on']}"
            + (" (the same)." if gap == rec else " (the rescored anchors differ)."),
        ]
    )


# --- experiments.linearization and experiments.gradient_bounds -------------------

#: display names of the losses the LCO experiments train.
LOSS_NAMES = {
    "lco_mse": "LCO-MSE",
    "lco_kld": "LCO-KLD",
    "lco_lch": "LCO-LCH",
    "ppo": "PPO",
}


def _g(x, digits: int = 2) -> str:
    """``x`` rounded to ``digits`` significant digits, without an exponent from
    1e-4 to 1e5 (``n/a`` for None).

    Examples:
        >>> _g(708.3), _g(0.000415), _g(1.0), _g(3e-6)
        ('710', '0.00042', '1', '3e-06')
    """
    return "n/a" if x is None else f"{float(f'{x:.{digits}g}'):g}"


def _pct(x, digits: int = 2) -> str:
    return "n/a" if x is None else f"{_g(100 * x, digits)}%"


def _ci(ms, fmt=_g, digits: int = 2) -> str:
    """A ``runner.stat`` as ``mean [lo, hi]`` (its 95% bootstrap interval over
    seeds; ``_linearization_report.interval``, ``digits`` significant digits or
    more), the mean alone with fewer than 2 seeds.

    Examples:
        >>> _ci({"mean": 0.00046, "ci95": [0.00038, 0.00054]}, _pct)
        '0.046% [0.038%, 0.054%]'
        >>> _ci({"mean": 3.0, "ci95": None}), _ci(None)
        ('3', 'n/a')
    """
    if not ms:
        return "n/a"
    return _linearization_report.interval(
        ms.get("mean"), ms.get("ci95"), lambda x, extra: fmt(x, digits + extra)
    )


def _ci_of(values, fmt=_g) -> str:
    """``_ci`` of ``runner.stat(values)`` (per-seed values)."""
    return _ci(runner.stat(values), fmt)


def _geo_ci(values) -> str:
    """The geometric mean of positive per-seed values with the interval
    :math:`10^{\\mathrm{ci}}` of their log10 (as for the α thresholds)."""
    st = runner.stat([None if v is None else math.log10(v) for v in values])
    if st["mean"] is None:
        return "n/a"
    ci = None if st["ci95"] is None else [10**x for x in st["ci95"]]
    return _linearization_report.interval(
        10 ** st["mean"], ci, lambda x, extra: _g(x, 2 + extra)
    )


def _span(values, fmt=_g) -> str:
    """``lo–hi`` of the values that are not None (one value when they agree)."""
    xs = sorted(v for v in values if v is not None)
    if not xs:
        return "n/a"
    lo, hi = fmt(xs[0]), fmt(xs[-1])
    return lo if lo == hi else f"{lo}–{hi}"


def _mean(ms):
    return None if not ms else ms.get("mean")


def _regimes(data: dict) -> str:
    found = sorted({u["regime"] for u in data["units"].values()})
    return ", ".join(f"`{r}`" for r in found)


def _seeds(data: dict) -> list[int]:
    return sorted({u["seed"] for u in data["units"].values()})


def load_replay(name: str, root: Path = RESULTS) -> dict | None:
    """The committed replay of run ``name`` (``--replay``: replay/replay.json)."""
    path = root / name / "replay" / "replay.json"
    return json.loads(path.read_text()) if path.exists() else None


def replay_line(data: dict, replay: dict | None) -> str:
    """What the committed replay recomputed from the recorded rollouts, and how
    closely it agreed: per replay invocation its commit, CPU and date, its units,
    their largest relative difference and the units with a number over the
    tolerance (a replay on another CPU than the run's is named as such)."""
    if replay is None:
        return "**Not replayed yet** (no committed `replay/replay.json`)."
    units = replay["units"]
    if not units:  # every entry pruned with the units it checked
        return "**Not replayed yet** (no unit of this run in `replay/replay.json`)."
    numbers = sum(r.get("numbers", 0) for r in units.values())
    runs = replay.get("runs") or [replay.get("provenance", {})]
    used = sorted({r.get("run", 0) for r in units.values()})
    which = (
        "every unit"
        if len(units) == len(data["units"])
        else ", ".join(f"`{u}`" for u in sorted(units))
    )
    home = data.get("provenance", {}).get("cpu")
    parts = []
    for i in used:
        mine = {u: r for u, r in units.items() if r.get("run", 0) == i}
        bad = sorted(u for u, r in mine.items() if r.get("missing") or r["over_tol"])
        worst = max((r.get("max_rel_diff", 0.0) for r in mine.values()), default=0.0)
        cpu = runs[i].get("cpu") or "an unrecorded CPU"
        isa = runs[i].get("cpu_isa")
        home_isa = data.get("provenance", {}).get("cpu_isa")
        if cpu != home or (isa and home_isa and isa != home_isa):
            where = f"{cpu}, another CPU"
        elif isa and home_isa:
            where = f"{cpu}, the run's CPU"
        else:  # one model name can cover CPUs with other vector instructions
            where = f"{cpu}, the run's CPU name (instruction sets not recorded)"
        if runs[i].get("xla_flags"):  # another code path on that CPU
            where += f", with `XLA_FLAGS={runs[i]['xla_flags']}`"
        parts.append(
            f"on {where} (commit `{(runs[i].get('commit') or '')[:12]}`, "
            f"{runs[i].get('started')}): {len(mine)} unit(s), largest relative "
            f"difference {worst:.1e}, {len(bad)} with a number over {replay['tol']:g}"
            + (f" ({', '.join(bad)})" if bad else "")
            + _by_regime(data, mine, replay["tol"])
        )
    return (
        f"Replay (`--replay`, recomputed from the recorded rollouts): "
        f"{len(units)} of {len(data['units'])} units ({which}), {numbers:,} numbers; "
        + "; ".join(parts)
        + "."
    )


def _by_regime(data: dict, mine: dict, tol: float) -> str:
    """``" (regime r: n units, largest d, k over tol; ...)"``: a replay's units split
    by their regime, where they span more than one (else "")."""
    regimes: dict = {}
    for u, r in mine.items():
        regime = data["units"].get(u, {}).get("regime")
        regimes.setdefault(regime, []).append(r)
    if len(regimes) < 2 or None in regimes:
        return ""
    parts = []
    for regime, rs in sorted(regimes.items()):
        worst = max(r.get("max_rel_diff", 0.0) for r in rs)
        over = sum(bool(r.get("missing") or r["over_tol"]) for r in rs)
        parts.append(
            f"`{regime}`: {len(rs)} unit(s), largest {worst:.1e}, {over} over {tol:g}"
        )
    return " (by regime, " + "; ".join(parts) + ")"


def _train_dtypes(data: dict) -> str:
    """The trainer precision of the units (``train_dtype``; float64 when a unit does
    not record one), with the trainable subsets of each when they differ."""
    by: dict = {}
    for u in data["units"].values():
        by.setdefault(u.get("train_dtype", "float64"), set()).add(u.get("subset"))
    if len(by) == 1:
        return next(iter(by))
    return ", ".join(
        f"{dtype} (subsets {', '.join(sorted(map(str, subs)))})"
        for dtype, subs in sorted(by.items())
    )


def lco_scale_line(data: dict, what: str, replay: dict | None = None) -> str:
    """The scale of a committed linearization or gradient-bounds run: model, batch,
    seeds, trained response tokens per seed (those of groups with a nonzero GRPO
    advantage, the only ones whose targets move), regime, wall time, load, commit."""
    cfg = data["config"]
    seeds = _seeds(data)
    per_seed = cfg["prompts"] * cfg["samples"] * cfg["new_tokens"]
    signal = {}
    for u in data["units"].values():
        if "zero_advantage_groups" in u:
            live = cfg["prompts"] - u["zero_advantage_groups"]
            signal[u["seed"]] = live * cfg["samples"] * cfg["new_tokens"]
    missing = data.get("missing_units") or []
    return (
        f"**Scale of the committed run** ({what}): `{cfg['model']}`, task "
        f"`{cfg['task']}`, {cfg['prompts']} prompts × {cfg['samples']} samples × "
        f"{cfg['new_tokens']} new tokens per seed ({per_seed} trained response "
        f"tokens, of which {_span(signal.values(), lambda x: f'{x:.0f}')} per seed "
        f"in groups with a nonzero advantage), {len(seeds)} seeds "
        f"({seeds[0]}–{seeds[-1]}), "
        f"{len(data['units'])} units, regime {_regimes(data)} (bfloat16 rollout "
        f"engine as the anchor, rescored with {anchor_words(cfg)}, trainer in "
        f"{_train_dtypes(data)}); numbers are mean "
        f"[95% percentile bootstrap interval] over the {len(seeds)} seeds (the mean "
        "alone where fewer than 2 seeds have a value); with this few seeds the "
        "interval is rough: a percentile bootstrap undercovers at small n. "
        + (
            f"**Not finished (in no number below):** {', '.join(missing)}. "
            if missing
            else ""
        )
        + timing(data)
        + " "
        + replay_line(data, replay)
    )


def _lin_rows(summary: dict) -> list[tuple[str, str, int, dict]]:
    """``(loss, subset, steps, row)`` per summary key ``loss/subset/m<steps>``."""
    out = []
    for key, row in summary.items():
        loss, sub, m = key.split("/")
        out.append((loss, sub, int(m[1:]), row))
    return out


def _setting(loss: str, sub: str | None, m: int) -> str:
    steps = f"{m} step" + ("s" if m > 1 else "")
    where = (
        "" if sub is None else (", every block" if sub == "all" else f", last {sub}")
    )
    return f"{LOSS_NAMES.get(loss, loss)}{where}, {steps}"


def _alpha_at(row: dict, level: str = "0.1"):
    return row["thresholds"]["residual_median"][level]["alpha_geomean"]


def _alpha_ci(row: dict, level: str = "0.1") -> str:
    """The threshold α of a setting: geometric mean [10^interval of log10 α] over
    the seeds that crossed; "(1 seed crossed: no interval)" with one; "not
    reached" with none."""
    th = row["thresholds"]["residual_median"][level]
    if th["alpha_geomean"] is None:
        return "not reached"
    text = _linearization_report.interval(
        th["alpha_geomean"], th.get("alpha_ci95"), lambda x, extra: _g(x, 2 + extra)
    )
    return text if th.get("alpha_ci95") else f"{text} (1 seed crossed: no interval)"


def _overlap(a: dict, b: dict, level: str = "0.1") -> str:
    """Whether the two settings' intervals of the ``level`` α overlap (no claim of
    significance beyond that)."""
    ca = a["thresholds"]["residual_median"][level].get("alpha_ci95")
    cb = b["thresholds"]["residual_median"][level].get("alpha_ci95")
    if not ca or not cb:
        return "no interval for one of them"
    disjoint = ca[1] < cb[0] or cb[1] < ca[0]
    return "intervals disjoint" if disjoint else "intervals overlap"


def _not_reached(rows, level: str) -> tuple[int, int]:
    th = [r["thresholds"]["residual_median"][level] for *_, r in rows]
    return sum(t["not_reached"] for t in th), sum(r["seeds"] for *_, r in rows)


def _a1(row: dict, stat: str):
    return _mean(row["at_alpha_1"].get(stat))


def _a1_ci(row: dict, stat: str) -> str:
    """A number at α = 1 with its interval, in percent."""
    return _ci(row["at_alpha_1"].get(stat), _pct)


def lin_conclusions(data: dict, *, by_subset: bool = False) -> list[str]:
    """The conclusions of a linearization run, each with its regime, seeds and
    trainable subset, every number from the summary."""
    cfg, rows = data["config"], _lin_rows(data["summary"])
    regime = _regimes(data)
    out = []
    subsets = sorted({s for _, s, _, _ in rows}, key=lambda s: (s == "all", s))
    for sub in subsets:
        mine = [r for r in rows if r[1] == sub]
        params = mine[0][3]["trainable_params"]
        where = "every block" if sub == "all" else f"the last {sub} blocks"
        seeds = _span([r["seeds"] for *_, r in mine], lambda x: f"{x:.0f}")
        tag = f"Regime {regime}, {seeds} seed(s) per setting, {where} trainable"
        lo10, tot = _not_reached(mine, "0.1")
        lo50, _ = _not_reached(mine, "0.5")
        out += [
            f"- {tag} ({params:,} parameters with the final norm; "
            f"{cfg['optimizer']} at lr {cfg['lr']:g}): at the real update (α = 1) "
            "the median per-token residual ρ is "
            f"{_span([_a1(r, 'residual_median') for *_, r in mine], _pct)} "
            f"(per setting: {_per(mine, lambda r: _a1_ci(r, 'residual_median'))}).",
            f"- {tag}: the median residual reaches 10% at α = "
            f"{_span([_alpha_at(r) for *_, r in mine])} and 50% at α = "
            f"{_span([_alpha_at(r, '0.5') for *_, r in mine])} times the real "
            f"update (geometric means [10^interval of log10 α] over the seeds that "
            f"crossed inside the grid [{cfg['alpha_min']:g}, {cfg['alpha_max']:g}]; "
            f"not reached on it: {lo10} of {tot} seed-settings at 10%, {lo50} of "
            f"{tot} at 50%); per setting, 10%: {_per(mine, _alpha_ci)}; 50%: "
            f"{_per(mine, lambda r: _alpha_ci(r, '0.5'))}.",
            f"- {tag}: evaluated at the linearized logits z + αJΔθ, the median "
            "relative errors of Δlog π_k, ΔD and Δloss at α = 1 are "
            f"{_span([_a1(r, 'logp_lin_relerr_median') for *_, r in mine], _pct)}, "
            f"{_span([_a1(r, 'div_lin_relerr_median') for *_, r in mine], _pct)} "
            f"and {_span([_a1(r, 'loss_lin_relerr') for *_, r in mine], _pct)}; "
            "the first-order terms ⟨∇_z f, JΔθ⟩ are off by "
            f"{_span([_a1(r, 'logp_relerr_median') for *_, r in mine], _pct)}, "
            f"{_span([_a1(r, 'div_relerr_median') for *_, r in mine], _pct)} and "
            f"{_span([_a1(r, 'loss_relerr') for *_, r in mine], _pct)}; the "
            "first-order Δlog π_k has the realized sign on "
            f"{_span([_a1(r, 'logp_sign_agreement') for *_, r in mine], _pct)} of "
            "the tokens. Per setting (linearized Δlog π_k, ΔD, Δloss; first-order "
            "Δlog π_k, ΔD, Δloss; sign agreement):",
            *(
                f"  - {_setting(loss, None, m)}: "
                + ", ".join(_a1_ci(r, k) for k in LIN_ERRORS[:3])
                + "; "
                + ", ".join(_a1_ci(r, k) for k in LIN_ERRORS[3:6])
                + f"; {_a1_ci(r, LIN_ERRORS[6])}."
                for loss, _, m, r in mine
            ),
        ]
        out.append(
            f"- {tag}: the log-log slope of the median residual in α, from α = "
            f"{cfg['alpha_min']:g} to 1 (least squares per seed), is "
            f"{_span([_mean(r['residual_slope']) for *_, r in mine], _g3)} "
            "(1: the residual is the second-order term, proportional to α; per "
            f"setting: {_per(mine, lambda r: _ci(r['residual_slope'], digits=3))})."
        )
        out += _loss_comparisons(mine, tag)
    if by_subset and "all" in subsets:
        out += _subset_comparisons(rows, regime)
    return out


#: the numbers at α = 1 of the linearized-logits bullet, in its order.
LIN_ERRORS = (
    "logp_lin_relerr_median",
    "div_lin_relerr_median",
    "loss_lin_relerr",
    "logp_relerr_median",
    "div_relerr_median",
    "loss_relerr",
    "logp_sign_agreement",
)


def _per(rows, fmt) -> str:
    return ", ".join(f"{_setting(loss, None, m)} {fmt(r)}" for loss, _, m, r in rows)


def _loss_comparisons(rows, tag: str) -> list[str]:
    """PPO and LCO-KLD against LCO-MSE: where each leaves the linear regime."""
    out = []
    by = {(loss, m): r for loss, _, m, r in rows}
    for other in ("ppo", "lco_kld"):
        for m in sorted({m for _, _, m, _ in rows}):
            a, b = by.get(("lco_mse", m)), by.get((other, m))
            if a is None or b is None:
                continue
            xa, xb = _alpha_at(a), _alpha_at(b)
            if xa is None or xb is None:
                continue
            na = a["thresholds"]["residual_median"]["0.1"]["not_reached"]
            factor = xa / xb
            word = "sooner" if factor > 1 else "later"
            out.append(
                f"- {tag}: after {m} step{'s' if m > 1 else ''} {LOSS_NAMES[other]} "
                "reaches a 10% "
                f"residual at α = {_alpha_ci(b)}, LCO-MSE at α = {_alpha_ci(a)}"
                + (f" (over the {a['seeds'] - na} seeds that crossed)" if na else "")
                + (
                    f": {LOSS_NAMES[other]} leaves the linear regime "
                    f"{_g(max(factor, 1 / factor))}× {word} ({_overlap(a, b)})"
                    if not 0.9 < factor < 1 / 0.9
                    else ": the two leave the linear regime at about the same α "
                    f"(within 10%; {_overlap(a, b)})"
                )
                + "; ‖Δθ‖ "
                f"{_ci(b['update_norm'])} vs {_ci(a['update_norm'])}."
            )
    return out


def _subset_comparisons(rows, regime: str) -> list[str]:
    """Every block trainable against the last blocks, per loss and step count."""
    by = {(loss, sub, m): r for loss, sub, m, r in rows}
    last = sorted({s for _, s, _, _ in rows if s != "all"})
    out = []
    for sub in last:
        pairs = [
            (loss, m, by[(loss, sub, m)], r)
            for loss, s, m, r in rows
            if s == "all" and (loss, sub, m) in by
        ]
        factors = [
            _alpha_at(a) / _alpha_at(w)
            for _, _, a, w in pairs
            if _alpha_at(a) and _alpha_at(w)
        ]
        grow = [
            _mean(w["update_norm"]) / _mean(a["update_norm"]) for _, _, a, w in pairs
        ]
        worst = min(pairs, key=lambda p: _a1(p[3], "logp_sign_agreement") or 1)
        seeds = _span([w["seeds"] for *_, w in pairs], lambda x: f"{x:.0f}")
        tag = f"Regime {regime}, {seeds} seed(s), every block vs the last {sub}"
        out += [
            f"- {tag}: with every block the median residual reaches 10% at an α "
            f"{_factor(factors, 'smaller', 'larger')} (α is in units of each run's "
            "own real update), and the real update itself is "
            f"{_factor(grow, 'larger', 'smaller')} in ‖Δθ‖ (the same optimizer and "
            "learning rate over more parameters); per loss and step count (α at "
            f"10%, every block vs the last {sub}; ‖Δθ‖, every block vs the last "
            f"{sub}):",
            *(
                f"  - {_setting(loss, None, m)}: α {_alpha_ci(w)} vs {_alpha_ci(a)} "
                f"({_overlap(w, a)}); ‖Δθ‖ {_ci(w['update_norm'])} vs "
                f"{_ci(a['update_norm'])}."
                for loss, m, a, w in pairs
            ),
            f"- {tag}: the lowest sign agreement of the first-order Δlog π_k with "
            f"the realized change is {_a1_ci(worst[3], 'logp_sign_agreement')} "
            f"({_setting(worst[0], 'all', worst[1])}; last {sub}, same loss and "
            f"steps: {_a1_ci(worst[2], 'logp_sign_agreement')}).",
        ]
    return out


def _factor(ratios, above: str, below: str) -> str:
    """``ratios`` (x / y) as "k× above" when all exceed 1, "k× below" when all are
    under 1, and as the ratios themselves otherwise."""
    xs = [r for r in ratios if r]
    if xs and min(xs) > 1:
        return f"{_span(xs)}× {above}"
    if xs and max(xs) < 1:
        return f"{_span([1 / r for r in xs])}× {below}"
    return f"a factor {_span(xs)} {above} (not the same direction everywhere)"


def tiny_lin_conclusion(data: dict) -> str:
    """The tiny model's ordering of the subsets (the one its test holds)."""
    cfg, rows = data["config"], _lin_rows(data["summary"])
    subs = sorted({s for _, s, _, _ in rows}, key=lambda s: (s == "all", s))
    parts = [
        f"{'every block' if s == 'all' else f'last {s}'} "
        f"{_span([_alpha_at(r) for _, x, _, r in rows if x == s])}"
        for s in subs
    ]
    per = ", ".join(f"{_setting(loss, s, m)} {_alpha_ci(r)}" for loss, s, m, r in rows)
    return (
        f"On the tiny random model (`--tiny`, {len(_seeds(data))} seeds, coin-flip "
        f"rewards, {cfg['optimizer']} at lr {cfg['lr']:g}, regime {_regimes(data)}) "
        f"the median residual reaches 10% at α = {'; '.join(parts)} "
        "(geometric means [10^interval of log10 α] over seeds, per loss and step "
        f"count: {per})."
    )


def _bounds_facts(data: dict) -> list[str]:
    s, units = data["summary"]["bounds"], data["units"]
    n = len(_seeds(data))
    tag = f"Regime {_regimes(data)}, {n} seeds"
    steps = {
        loss: sum(
            len(u["steps"]) for k, u in units.items() if k.startswith(f"bounds/{loss}/")
        )
        for loss in s
    }
    out = []
    viol = sum(r["bound_violations"] for r in s.values())
    per_loss = "; ".join(
        f"{LOSS_NAMES[x]} σ_max {_ci(r['sigma_max'])}, growth "
        f"{_ci(r['sigma_growth'], digits=3)}"
        for x, r in s.items()
    )
    out.append(
        f"- {tag}: ‖∇_θL‖ ≤ σ_max(J)·‖∇_zL‖ held at every step ({viol} violations in "
        f"{sum(steps.values())} steps over {', '.join(LOSS_NAMES[x] for x in s)}); "
        f"σ_max(J) ≈ {_span([_mean(r['sigma_max']) for r in s.values()])}, growing "
        f"by a factor {_span([_mean(r['sigma_growth']) for r in s.values()], _g3)} "
        f"over the run (mean [interval] over seeds: {per_loss})."
        if viol == 0
        else f"- {tag}: ‖∇_θL‖ exceeded σ_max(J)·‖∇_zL‖ at {viol} of "
        f"{sum(steps.values())} steps (σ_max(J), mean [interval] over seeds: "
        f"{per_loss})."
    )
    for loss, r in s.items():
        t, ci = _mean(r["tightness"]), r["tightness"].get("ci95")
        over = (
            {"mean": 1 / t, "ci95": None if not ci else [1 / ci[1], 1 / ci[0]]}
            if t and (not ci or ci[0] > 0)
            else None
        )
        out.append(
            f"- {tag}: {LOSS_NAMES[loss]}: tightness ‖∇_θL‖/(σ_max‖∇_zL‖) "
            f"{_ci(r['tightness'])} (per step "
            f"{_g(r['tightness_min'])}–{_g(r['tightness_max'])})"
            + (
                f": the bound overestimates ‖∇_θL‖ about {_ci(over)}× (1 / the "
                "tightness and its interval)"
                if over
                else ""
            )
            + f"; {r['spikes']} gradient spike(s) (> 3× the run's median)."
        )
    mse = [u for k, u in units.items() if k.startswith("bounds/lco_mse/")]
    first, ratios, last = {}, {}, 0  # per minibatch: one value per seed
    for u in mse:
        by = {(st["epoch"], st["minibatch"]): st["loss"] for st in u["steps"]}
        last = max(e for e, _ in by)
        for (e, j), v in by.items():
            if e == 0 and last > 0:
                first.setdefault(j, []).append(v)
                ratios.setdefault(j, []).append(by[(last, j)] / v if v > 0 else None)
    if first:  # a minibatch seen in two epochs
        grads = [
            max(st["grad_norm"] for st in u["steps"]) / u["steps"][0]["grad_norm"]
            for u in mse
        ]
        per = "; ".join(
            f"minibatch {j}: {_geo_ci(first[j])} at its first visit, "
            f"{_geo_ci(ratios[j])}× that at its last"
            for j in sorted(first)
        )
        out.append(
            f"- {tag}: LCO-MSE's fixed-target loss on a minibatch is "
            f"{_span([v for vs in first.values() for v in vs])} at its first visit "
            f"and {_span([v for vs in ratios.values() for v in vs])}× that at its "
            f"last visit {last} epoch(s) later (geometric means [10^interval of "
            f"log10] over seeds, {per}); the parameter gradient grows by a factor "
            f"{_span(grads)} over the run (largest over first step; mean over seeds "
            f"{_ci_of(grads)})."
        )
    return out


def _g3(x) -> str:
    return _g(x, 3)


def _fixed_facts(data: dict) -> list[str]:
    s, units = data["summary"]["fixed"], data["units"]
    tag = f"Regime {_regimes(data)}, {len(_seeds(data))} seeds"
    out = []
    for loss, r in s.items():
        mine = [u for k, u in units.items() if k.startswith(f"fixed/{loss}/")]
        gaps = [1 - u["real_rate"] for u in mine if u["real_rate"] is not None]
        diff = max(
            abs(a - b) / max(abs(a), 1e-300)
            for u in mine
            for a, b in zip(u["real_losses"], u["linearized_losses"])
        )
        n = r["steps"] * r["seeds"]
        out.append(
            f"- {tag}: {LOSS_NAMES[loss]} by gradient descent at η = "
            f"{_span([u['eta'] for u in mine])} ({r['steps']} steps): the loss "
            f"falls by a factor 1 − ({_span(gaps)}) per step (1 − rate: mean "
            f"{_ci_of(gaps)} over seeds); the real and the "
            f"linearized model's losses differ by at most {_g(diff)} (relative); "
            f"⟨∇_θL, θ − θ*⟩ < 0 at {r['param_inner_negative']} of {n} steps, the "
            f"needed inequality fails at {r['needed_inequality_fails']} of {n}; "
            f"{r['outputs']:,} logit outputs vs {r['params']:,} parameters."
        )
    return out


def reach_facts(data: dict, *, within: float = 0.02) -> list[str]:
    """Prop. 4.4 with a reachable target: where the inequality holds and fails."""
    r = data["summary"].get("reach")
    if not r:
        return []
    tag = f"Regime {_regimes(data)}, {r['seeds']} seeds"
    scales = [x["scale"] for x in r["scales"]]
    ok = None
    for i, s in enumerate(scales):
        if all(
            p["ratio"][i] is not None and abs(p["ratio"][i] - 1) <= within
            for p in r["per_seed"].values()
        ):
            ok = s
        else:
            break
    loose = [
        _mean(x["residual"]) / _mean(x["ratio_dev"])
        for x in r["scales"]
        if _mean(x["ratio_dev"])
    ]
    fails = [p for p in r["per_seed"].values() if p["first_fail_scale"] is not None]
    last = r["scales"][-1]
    per_s = [
        f"  - s = {_g(x['scale'])}: ρ {_ci(x['residual'])} over abs(ratio − 1) "
        f"{_ci(x['ratio_dev'])} ({_g(_mean(x['residual']) / _mean(x['ratio_dev']))}×)."
        for x in r["scales"]
        if _mean(x["ratio_dev"])
    ]
    return [
        f"- {tag}: every seed's ratio at θ_0 stays within {within:.0%} of 1 up to "
        f"s = {_g(ok)}"
        + (
            f" (ρ there: {_ci(r['scales'][scales.index(ok)]['residual'])})"
            if ok is not None
            else ""
        )
        + f"; the needed inequality first fails at s = "
        f"{_span([p['first_fail_scale'] for p in fails])} in {len(fails)} of "
        f"{r['seeds']} seeds (ρ there "
        f"{_span([p['residual_at_first_fail'] for p in fails])}; mean over those "
        f"seeds {_ci(r['residual_at_first_fail'])}), "
        f"{r['holds_on_whole_grid']} hold(s) on the whole grid; at the largest s "
        f"= {_g(last['scale'])} it fails at θ_0 in {last['fails']} and at the "
        f"midpoint in {last['fails_mid']} of {r['seeds']}.",
        f"- {tag}: the Cauchy-Schwarz bound abs(ratio − 1) ≤ ρ held at every scale "
        f"and seed ({r['ratio_bound_violations']} violations) and is "
        f"{_span(loose)}× loose (mean ρ over mean abs(ratio − 1), per s; mean "
        "[interval] over seeds):"
        if r["ratio_bound_violations"] == 0
        else f"- {tag}: abs(ratio − 1) ≤ ρ failed {r['ratio_bound_violations']} "
        "times; per s, mean [interval] over seeds:",
        *per_s,
    ]


def gradient_conclusions(data: dict) -> list[str]:
    """The conclusions of a gradient-bounds run, every number from the results."""
    s = data["summary"]
    return [
        *(_bounds_facts(data) if s["bounds"] else []),
        *(_fixed_facts(data) if s["fixed"] else []),
        *reach_facts(data),
    ]


def _section(report, data: dict) -> str:
    """A report module's ``section`` (its tables), as a docs block: its headings
    one level below the page's sections."""
    lines = report.section(data).strip().split("\n")
    return "\n".join("##" + ln if ln.startswith("## ") else ln for ln in lines)


#: the committed figures of each LCO report module, with their alt text.
FIGURES = {
    "_linearization_report": [("residual_vs_alpha.png", "residual vs alpha")],
    "_gradient_report": [
        ("bounds.png", "gradient norms and bounds per step"),
        ("fixed_target.png", "loss on a fixed target, real vs linearized"),
        ("reach.png", "Prop. 4.4 with a reachable target"),
    ],
}


def lco_blocks(root: Path = RESULTS) -> dict[str, str]:
    """The blocks of docs/linearization.md and the findings block."""
    lin, sub = load("linearization", root), load("linearization_subsets", root)
    grad, tiny = load("gradient_bounds", root), load("reach_tiny", root)
    grad_all = load("gradient_bounds_all", root)
    lin_tiny = load("linearization_tiny", root)
    out = {}
    for key, data, name, what in (
        ("linearization", lin, "linearization", "`experiments.linearization`"),
        (
            "linearization-subsets",
            sub,
            "linearization_subsets",
            "`experiments.linearization --losses lco_mse,lco_kld,ppo --subsets "
            "2,all --seeds 3`",
        ),
        ("gradient", grad, "gradient_bounds", "`experiments.gradient_bounds`"),
        (
            "gradient-all",
            grad_all,
            "gradient_bounds_all",
            "`experiments.gradient_bounds --trainable-blocks 30 --seeds 3 "
            "--fixed-losses '' --reach-scales ''`",
        ),
        (
            "reach-tiny",
            tiny,
            "reach_tiny",
            "`experiments.gradient_bounds --tiny --losses '' --fixed-losses ''`",
        ),
    ):
        if data is None:
            for part in ("scale", "tables", "conclusions"):
                out[f"{key}-{part}"] = _missing(name)
            continue
        report = (
            _gradient_report
            if name in ("gradient_bounds", "gradient_bounds_all", "reach_tiny")
            else (_linearization_report)
        )
        out[f"{key}-scale"] = lco_scale_line(data, what, load_replay(name, root))
        figures = [
            f"![{alt}](../experiments/results/{name}/{png})"
            for png, alt in FIGURES[report.__name__.rsplit(".", 1)[-1]]
            if (root / name / png).exists()
        ]
        out[f"{key}-tables"] = "\n\n".join([_section(report, data), *figures])
        facts = (
            gradient_conclusions(data)
            if report is _gradient_report
            else lin_conclusions(data, by_subset=True)
        )
        out[f"{key}-conclusions"] = "\n".join(facts)
    out["linearization-tiny"] = (
        _missing("linearization_tiny")
        if lin_tiny is None
        else lco_scale_line(
            lin_tiny,
            "`experiments.linearization --tiny`",
            load_replay("linearization_tiny", root),
        )
        + "\n\n"
        + tiny_lin_conclusion(lin_tiny)
    )
    return out


def blocks(root: Path = RESULTS) -> dict[tuple[str, str], str]:
    """Every generated experiment block, keyed ``(page, name)``."""
    sign = load("sign_agreement", root)
    probes = probe_blocks(sign)
    lco = lco_blocks(root)
    findings = "\n\n".join(
        dict.fromkeys(  # an absent run's one "not measured yet" line, once
            lco[f"{key}-{part}"]
            for key in (
                "linearization",
                "linearization-subsets",
                "gradient",
                "gradient-all",
            )
            for part in ("scale", "conclusions")
        )
    )
    return {
        **{("docs/linearization.md", name): body for name, body in lco.items()},
        ("docs/findings.md", "findings-linearization"): findings,
        ("docs/probes.md", "probes-scale"): probes["probes-scale"]
        + "\n\n"
        + replay_line(sign, load_replay("sign_agreement", root))
        if sign is not None
        else probes["probes-scale"],
        ("docs/probes.md", "probes-tables"): probes["probes-tables"],
        ("docs/probes.md", "probes-conclusions"): probes["probes-conclusions"],
        ("README.md", "readme-probes"): probes["probes-scale"]
        + "\n\n"
        + probes["probes-conclusions"],
        ("docs/findings.md", "findings-probes"): probes["probes-scale"]
        + "\n\n"
        + probes["probes-conclusions"],
        ("docs/demo.md", "demo-rollouts"): rollout_block(
            load("rollout_analysis", root)
        ),
        ("docs/probes.md", "engine-determinism"): determinism_block(
            load("engine_determinism", root)
        ),
        ("docs/probes.md", "engine-determinism-cpus"): against_block(root),
    }


if __name__ == "__main__":
    raise SystemExit(docgen.main(blocks))

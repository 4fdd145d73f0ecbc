"""Writes the experiment tables of README.md and docs/ from ``experiments/results/``.

Each committed experiment run (``experiments/results/<name>/results.json`` with its
provenance, per-unit numbers and per-variant summary; ``rollouts.npz`` beside it for
``--replay``) is rendered by the experiment's own report module: the scale line (model,
batch, seeds, updated tokens per seed, wall time, load average, commit), the predictor,
mask and §4.2 tables per regime with 95% bootstrap intervals over seeds, and the
conclusions, each decided here from its interval (a difference is stated as a
difference only when its interval excludes 0). A results file that is absent renders a
one-line "not measured yet" block. No experiment is run here.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import docgen  # noqa: E402

sys.path.insert(0, str(docgen.ROOT))

from experiments import _rollout_report, _sign_report  # noqa: E402
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
    cfg, prov = data["config"], data["provenance"]
    tokens = [u["updated_tokens"] for u in data["units"].values()]
    seeds = sorted({u["seed"] for u in data["units"].values()})
    regimes = sorted({u["regime"] for u in data["units"].values()})
    small = max(tokens, default=0) < TARGET_TOKENS or len(seeds) < TARGET_SEEDS
    missing = data.get("missing_units") or []
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
    computed = ", ".join(sorted({(r.get("commit") or "")[:12] for r in runs}))
    return (
        f"**Scale of the committed run:** `{cfg['model']}`, task `{cfg['task']}`, "
        f"{cfg['prompts']} prompts × {cfg['samples']} samples × {cfg['new_tokens']} "
        f"new tokens per seed, {len(seeds)} seeds ({seeds[0]}–{seeds[-1]}), regimes "
        f"{', '.join(f'`{r}`' for r in regimes)}; updated tokens per seed "
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
        + (f"Wall time {wall / 60:.1f} min" if wall else "Wall time not recorded")
        + f" in {len(runs)} invocation(s) on {prov.get('cpu_count')} CPU cores "
        f"({prov.get('cpu')}) shared with other work, load average {load_avg}; units "
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
    ):
        for name, r in data[key].items():
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


def blocks(root: Path = RESULTS) -> dict[tuple[str, str], str]:
    """Every generated experiment block, keyed ``(page, name)``."""
    probes = probe_blocks(load("sign_agreement", root))
    return {
        ("docs/probes.md", "probes-scale"): probes["probes-scale"],
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
    }


if __name__ == "__main__":
    raise SystemExit(docgen.main(blocks))

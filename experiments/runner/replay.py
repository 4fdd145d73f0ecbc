"""Replay: every unit of a results file recomputed from its recorded rollouts, and
every number that differs reported (``replay/replay.json``)."""

from __future__ import annotations

import json
import math
import os

from experiments.runner import validate
from experiments.runner.context import Context, setup_jax
from experiments.runner.provenance import provenance
from experiments.runner.store import jsonable, write_json
from theorycheck._errors import BadInput


def flatten(tree, prefix: str = "") -> dict[str, float]:
    """Every number of a nested dict/list as ``{"a/b/0/c": value}``."""
    out: dict[str, float] = {}
    if isinstance(tree, dict):
        for k, v in tree.items():
            out.update(flatten(v, f"{prefix}{k}/"))
    elif isinstance(tree, list):
        for i, v in enumerate(tree):
            out.update(flatten(v, f"{prefix}{i}/"))
    elif isinstance(tree, int | float) and not isinstance(tree, bool):
        out[prefix[:-1]] = float(tree)
    return out


def _holes(tree, prefix: str = "") -> dict[str, bool]:
    """Every number-or-missing leaf of a nested dict/list: ``{"a/0/c": True}`` where
    it is NaN or null (a number the writer could not write), False where it is a
    number."""
    out: dict[str, bool] = {}
    if isinstance(tree, dict | list):
        items = tree.items() if isinstance(tree, dict) else enumerate(tree)
        for k, v in items:
            out.update(_holes(v, f"{prefix}{k}/"))
    elif tree is None or (isinstance(tree, float) and math.isnan(tree)):
        out[prefix[:-1]] = True
    elif isinstance(tree, int | float) and not isinstance(tree, bool):
        out[prefix[:-1]] = False
    return out


def compare_units(recorded: dict, replayed: dict, *, tol: float = 1e-6) -> dict:
    """Every per-unit number of ``replayed`` against ``recorded``: per unit the
    largest difference, relative to ``max(1, |recorded|)``, and the keys above
    ``tol`` (and keys present in only one of them). NaN (or null) on one side and a
    number on the other is a difference over any ``tol``; NaN on both sides is the
    same."""
    out = {}
    for unit, rec in sorted(recorded.items()):
        if unit not in replayed:
            out[unit] = {"missing": True}
            continue
        a, b = flatten(rec), flatten(replayed[unit])
        diffs = {k: abs(a[k] - b[k]) / max(1.0, abs(a[k])) for k in a.keys() & b.keys()}
        ha, hb = _holes(rec), _holes(replayed[unit])
        holes = {k for k in ha.keys() & hb.keys() if ha[k] != hb[k]}
        finite = [d for d in diffs.values() if not math.isnan(d)]
        only = sorted((a.keys() ^ b.keys()) - holes)
        out[unit] = {
            "max_rel_diff": max(finite, default=0.0),
            "over_tol": sorted({k for k, d in diffs.items() if d > tol} | holes),
            "keys_in_one_only": only,
            "numbers": len(diffs),
        }
    return out


def replay(
    exp,
    src: str,
    *,
    tol: float = 1e-6,
    only: list[str] | None = None,
    as_json: bool = False,
) -> int:
    """Recomputes every unit of ``src``/results.json from ``src``/rollouts.npz with
    the recorded config; writes ``src``/replay/replay.json (per unit: the largest
    relative difference and the keys above ``tol``) and prints one line (``as_json``:
    one JSON object). Exit 0 when every number agrees to ``tol``, 1 otherwise; what
    it reads is checked first (:mod:`.validate`: bad input, exit 2)."""
    from theorycheck._progress import bar

    spec = getattr(exp, "__spec__", None)
    name = (spec.name if spec else exp.__name__).rsplit(".", 1)[-1]
    path, data = validate.read_results(src)
    _same_analysis(exp, data, src)
    cfg = validate.config_of(exp, data, src, name)
    units = {u.id: u for u in exp.units(cfg)}
    chosen = sorted(data["units"]) if only is None else only
    validate.check_units(data["units"], units, chosen, src)
    batches = [(units[u].seed, units[u].engine) for u in chosen]
    bank = validate.read_bank(src, path, batches)
    setup_jax()
    ctx = Context(cfg, bank, exp.generate, replay=True)
    replayed = {}
    for uid in bar(chosen, desc="replay", unit="unit"):
        replayed[uid] = jsonable(exp.run_unit(ctx, cfg, units[uid]))
    recorded = {u: data["units"][u] for u in chosen}
    report = compare_units(recorded, replayed, tol=tol)
    for uid in report:  # which recorded numbers this replay checked
        report[uid]["recorded_sha"] = unit_sha(recorded[uid])
    bad = [u for u, r in report.items() if r.get("missing") or r["over_tol"]]
    out_dir = os.path.join(os.path.dirname(path), "replay")
    try:
        os.makedirs(out_dir, exist_ok=True)
    except OSError as err:
        raise BadInput(f"--replay {src}: cannot write {out_dir} ({err})") from None
    record = _merged_replay(
        os.path.join(out_dir, "replay.json"),
        report,
        tol,
        provenance(cfg, seeds=[]),
        data["units"],
    )
    write_json(os.path.join(out_dir, "replay.json"), record)
    worst = max((r.get("max_rel_diff", 0.0) for r in report.values()), default=0.0)
    if as_json:
        summary = {"units": len(report), "max_rel_diff": worst, "tol": tol, "bad": bad}
        print(json.dumps({"results": path, "replay": out_dir, "summary": summary}))
    else:
        print(
            f"replay: {len(report)} units, largest relative difference {worst:.1e}, "
            f"{len(bad)} with numbers over {tol:g}"
            + (f" ({', '.join(bad[:5])})" if bad else "")
        )
    return 1 if bad else 0


def _merged_replay(path: str, report: dict, tol: float, prov: dict, units) -> dict:
    """The replay record with this replay's units added: a replay of some units
    (``--replay-units``) keeps the units an earlier replay at the same tolerance
    checked (still in the results file with the numbers it checked:
    ``recorded_sha``; an entry written before the hash existed is kept as it is),
    each unit with the ``run`` (index into ``runs``, one provenance per replay) that
    checked it; a unit replayed again is replaced."""
    old = {}
    if os.path.exists(path):
        with open(path) as fh:
            old = json.load(fh)
    runs, kept = [], {}
    if old.get("tol") == tol:
        runs = list(old.get("runs") or [old["provenance"]])
        for uid, rec in old.get("units", {}).items():
            if uid in units and uid not in report:
                if rec.get("recorded_sha", unit_sha(units[uid])) != unit_sha(
                    units[uid]
                ):
                    continue  # the unit was recomputed since: not checked
                kept[uid] = {"run": 0, **rec}
    runs.append(prov)
    merged = {**kept, **{u: {**r, "run": len(runs) - 1} for u, r in report.items()}}
    return {
        "tol": tol,
        "units": dict(sorted(merged.items())),
        "runs": runs,
        "provenance": prov,
    }


def unit_sha(unit: dict) -> str:
    """A short hash of a unit's recorded result (sorted-key JSON)."""
    import hashlib

    raw = json.dumps(jsonable(unit), sort_keys=True).encode()
    return hashlib.sha256(raw).hexdigest()[:16]


def _same_analysis(exp, data: dict, src: str) -> None:
    """A replay recomputes a unit with this code's analysis, so a results file whose
    units were analysed by another version (``exp.ANALYSIS_VERSION``, recorded per
    unit as ``analysis_version``) is refused: its numbers are other functions of the
    same rollouts (e.g. version 4 predicts only the step's minibatch rows by default
    and scores the matched controls in the probe's pass). It names the commit that
    wrote the file, where the replay is meaningful."""
    want = getattr(exp, "ANALYSIS_VERSION", None)
    if want is None:
        return
    found = sorted(
        {u.get("analysis_version") for u in data.get("units", {}).values()},
        key=str,
    )
    if found and found != [want]:
        commit = str(data.get("provenance", {}).get("commit") or "unknown")[:10]
        raise BadInput(
            f"--replay {src}: its units were analysed by version "
            f"{', '.join(map(str, found))} and this code computes version {want}; "
            f"replay it at commit {commit}"
        )

"""Running a set of claims, and the human forms of their results (table, markdown)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from theorycheck import _progress
from theorycheck.claims._discover import discover, select
from theorycheck.claims._evaluate import ClaimResult, MethodResult, evaluate


def run_claims(
    paths: Sequence[str | Path], *, only: Sequence[str] = (), quick: bool = False
) -> list[ClaimResult]:
    """Discovers the claims under ``paths`` and evaluates them, in order.

    Args:
        paths: ``.py`` files and folders (see :func:`theorycheck.claims.discover`).
        only: claim ids to run (all when empty); an unknown id is bad input.
        quick: fewer samples and smaller sizes in every check that takes ``quick``.

    Returns:
        One :class:`ClaimResult` per claim.
    """
    chosen = select(discover(paths), only)
    results = []
    for item in _progress.bar(chosen, desc="prove", unit="claim"):
        _progress.stage(f"claim {item.claim.id}")
        results.append(evaluate(item.claim, quick=quick))
    return results


def counts(results: Sequence[ClaimResult]) -> dict[str, int]:
    """How many claims have each status."""
    return dict(Counter(str(r.status) for r in results))


def _short(value) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 300 else text[:297] + "..."


def table_lines(results: Sequence[ClaimResult]) -> list[str]:
    """A plain-text table: one line per claim, then its checks indented."""
    width = max((len(r.id) for r in results), default=10)
    lines = []
    for r in results:
        lines.append(f"{r.id:<{width}}  {r.status:<21}  {r.seconds:7.2f} s")
        corr = r.correction.methods if r.correction else ()
        for m in _all_methods(r):
            if corr and m is corr[0]:
                lines.append(
                    f"  correction ({r.correction.status}): {r.correction.statement}"
                )
            lines.append(
                f"    {m.outcome:<7} {m.method:<11} {m.name}: {m.result.detail}"
            )
            if m.result.counterexample:
                lines.append(
                    f"            counterexample: {_short(m.result.counterexample)}"
                )
    tally = ", ".join(f"{n} {s}" for s, n in sorted(counts(results).items()))
    lines.append(f"{len(results)} claims: {tally or 'none'}")
    return lines


def _all_methods(r: ClaimResult) -> list[MethodResult]:
    extra = r.correction.methods if r.correction else ()
    return [*r.methods, *extra]


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def markdown(results: Sequence[ClaimResult], *, title: str = "Claims") -> str:
    """A markdown report: a summary table, then one section per claim."""
    out = [f"# {title}", ""]
    tally = ", ".join(f"{n} {s}" for s, n in sorted(counts(results).items()))
    out += [f"{len(results)} claims: {tally or 'none'}.", ""]
    out += ["| claim | status | methods | seconds |", "|---|---|---|---|"]
    for r in results:
        kinds = ", ".join(f"{m.method}: {m.outcome}" for m in r.methods)
        out.append(f"| `{r.id}` | **{r.status}** | {kinds} | {r.seconds:.2f} |")
    for r in results:
        c = r.claim
        out += ["", f"## `{c.id}`: {r.status}", ""]
        out += [f"*Source:* {_cell(c.source)} ({c.provenance}).", ""]
        out += [f"*Statement:* {_cell(c.statement)}", ""]
        if c.objection:
            out += [f"*Objection tested:* {_cell(c.objection)}", ""]
        out += _method_rows(r.methods)
        if r.correction is not None and r.correction.status != "not_run":
            out += [
                "",
                f"*Correction ({r.correction.status}):* "
                f"{_cell(r.correction.statement)}",
                "",
            ]
            out += _method_rows(r.correction.methods)
    return "\n".join(out) + "\n"


def _method_rows(methods: Sequence[MethodResult]) -> list[str]:
    rows = ["| method | check | outcome | detail |", "|---|---|---|---|"]
    for m in methods:
        detail = _cell(m.result.detail)
        if m.result.counterexample:
            detail += f"<br>counterexample: `{_cell(_short(m.result.counterexample))}`"
        rows.append(f"| {m.method} | {_cell(m.name)} | {m.outcome} | {detail} |")
    return rows


def write_report(results: Sequence[ClaimResult], out_dir: str | Path) -> Path:
    """Writes ``proofs.md`` and ``proofs.json`` into ``out_dir``; returns the first."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "proofs.md").write_text(markdown(results, title="Do the claims hold?"))
    payload = {"claims": [r.to_json() for r in results]}
    (out / "proofs.json").write_text(json.dumps(payload, indent=1, allow_nan=False))
    return out / "proofs.md"

"""Running a set of claims, and the human forms of their results (table, markdown)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from theorycheck import _progress
from theorycheck.claims._discover import discover, select
from theorycheck.claims._evaluate import ClaimResult, MethodResult, evaluate
from theorycheck.claims._types import VERDICTS

#: The report's sections: (title, the verdicts it holds). Only the first is the
#: papers failing; extensions and reviewer objections are never reported as that.
SECTIONS = (
    ("Fails as stated", ("fails as stated",)),
    ("Holds as stated", ("holds as stated",)),
    (
        "Assumptions measured at a stated setting",
        ("assumption fails at its setting", "assumption holds at its setting"),
    ),
    (
        "Extensions and reviewer objections (not the paper failing)",
        ("extension fails", "extension holds", "objection fails", "objection holds"),
    ),
    ("Undecided", ("undecided",)),
)
assert {v for _, vs in SECTIONS for v in vs} == set(VERDICTS)


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


def verdict_counts(results: Sequence[ClaimResult]) -> dict[str, int]:
    """How many claims have each verdict (:data:`theorycheck.claims.VERDICTS` order)."""
    tally = Counter(r.verdict for r in results)
    return {v: tally[v] for v in VERDICTS if tally[v]}


def sections(results: Sequence[ClaimResult]) -> list[tuple[str, list[ClaimResult]]]:
    """The results by report section (fails as stated, holds as stated, assumptions
    measured, extensions and objections, undecided), empty sections left out."""
    out = []
    for title, verdicts in SECTIONS:
        members = [r for r in results if r.verdict in verdicts]
        if members:
            out.append((title, members))
    return out


def _tally(results: Sequence[ClaimResult]) -> str:
    by_status = ", ".join(f"{n} {s}" for s, n in sorted(counts(results).items()))
    by_verdict = "; ".join(f"{n} {v}" for v, n in verdict_counts(results).items())
    return f"{len(results)} claims: {by_status or 'none'} ({by_verdict or 'none'})"


def _short(value) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 300 else text[:297] + "..."


def table_lines(results: Sequence[ClaimResult]) -> list[str]:
    """A plain-text table by section (fails as stated first; extensions and reviewer
    objections apart): one line per claim with its status and verdict, then its
    checks indented, then the tally."""
    width = max((len(r.id) for r in results), default=10)
    lines = []
    for title, members in sections(results):
        lines.append(f"{title} ({len(members)}):")
        for r in members:
            lines += _claim_lines(r, width)
    lines.append(_tally(results))
    return lines


def _claim_lines(r: ClaimResult, width: int) -> list[str]:
    extends = (
        f"  [{r.claim.kind.value} of {r.claim.extends}]" if r.claim.extends else ""
    )
    lines = [
        f"  {r.id:<{width}}  {r.status:<21}  {r.seconds:7.2f} s  {r.verdict}{extends}"
    ]
    if r.reason is not None:
        lines.append(f"      stopped: {r.reason}")
    corr = r.correction.methods if r.correction else ()
    for m in _all_methods(r):
        if corr and m is corr[0]:
            lines.append(
                f"    correction ({r.correction.status}): {r.correction.statement}"
            )
        lines.append(f"      {m.outcome:<7} {m.method:<11} {m.name}: {m.result.detail}")
        if m.result.counterexample:
            lines.append(
                f"              counterexample: {_short(m.result.counterexample)}"
            )
    return lines


def _all_methods(r: ClaimResult) -> list[MethodResult]:
    extra = r.correction.methods if r.correction else ()
    return [*r.methods, *extra]


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def markdown(results: Sequence[ClaimResult], *, title: str = "Claims") -> str:
    """A markdown report: the tally, a summary table per section (fails as stated
    first), then one section per claim with its quote, location and assumptions."""
    out = [f"# {title}", "", _tally(results) + ".", ""]
    for head, members in sections(results):
        out += [f"## {head}", ""]
        out += [
            "| claim | kind | status | methods | seconds |",
            "|---|---|---|---|---|",
        ]
        for r in members:
            kinds = ", ".join(f"{m.method}: {m.outcome}" for m in r.methods)
            out.append(
                f"| `{r.id}` | {r.claim.kind.value} | **{r.status}** | {kinds} | "
                f"{r.seconds:.2f} |"
            )
        out.append("")
    for r in results:
        out += _claim_section(r)
    return "\n".join(out) + "\n"


def _claim_section(r: ClaimResult) -> list[str]:
    c = r.claim
    out = ["", f"### `{c.id}`: {r.status} ({r.verdict})", ""]
    out += [f"*Source:* {_cell(c.source)} ({c.provenance}); {_cell(c.location)}.", ""]
    if c.extends:
        out += [f"*{c.kind.value.capitalize()} of:* `{c.extends}`.", ""]
    out += [f"*Quote:* {_cell(c.quote)}", ""]
    out += [f"*Statement checked:* {_cell(c.statement)}", ""]
    if r.reason is not None:
        out += [f"*Stopped:* {_cell(r.reason)}", ""]
    if c.assumptions:
        out += [f"*Assumptions:* {_cell('; '.join(c.assumptions))}.", ""]
    if c.objection:
        out += [f"*Objection tested:* {_cell(c.objection)}", ""]
    out += _method_rows(r.methods)
    if r.correction is not None and r.correction.status != "not_run":
        out += [
            "",
            f"*Correction ({r.correction.status}):* {_cell(r.correction.statement)}",
            "",
        ]
        out += _method_rows(r.correction.methods)
    return out


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

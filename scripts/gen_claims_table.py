"""The claims tables of docs/proofs.md, README.md and docs/findings.md, generated from a
committed ``theorycheck prove --json`` run (``proofs/results/prove.json``).

``--run`` runs ``theorycheck prove --json`` (full mode, default path ``./proofs``) in
a child process, measures its wall clock, CPU time and the load average before and
after, and writes ``proofs/results/prove.json`` with that provenance (commit, command,
versions, date), then rewrites the blocks. Without ``--run`` the blocks are rewritten
from the committed file; ``--check`` exits 1 when a block is out of date (a test
runs it). Blocks:

* ``claims-table`` (docs/proofs.md): every claim by section: fails as stated, holds
  as stated, assumptions measured, extensions and reviewer objections, undecided;
* ``claims-measured`` (docs/proofs.md): the figures of every assumption, extension
  and reviewer claim, check by check;
* ``claims-counterexamples`` (docs/proofs.md): every claim that fails as stated, with
  each failing check's line and its re-checked counterexample, and its correction;
* ``claims-summary`` (README.md, docs/findings.md): the tally and the headline list,
  which holds only the claims that fail as stated.
"""

from __future__ import annotations

import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import docgen  # noqa: E402

ROOT = docgen.ROOT
RESULTS = "proofs/results/prove.json"
COMMAND = ["theorycheck", "prove", "--json"]

#: (section title, verdicts), the order of ``theorycheck.claims.SECTIONS``.
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


def _loadavg() -> list[float]:
    try:
        return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]
    except OSError:
        return []


def run() -> dict:
    """Runs the full ``prove --json`` and returns the results with provenance."""
    from theorycheck import _git, _version

    env = dict(os.environ, PYTHONPATH=str(ROOT))
    before, start = _loadavg(), time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "theorycheck", *COMMAND[1:]],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    wall = time.perf_counter() - start
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    claims = json.loads(proc.stdout)["claims"]
    return {
        "provenance": {
            "command": " ".join(COMMAND),
            "commit": _git.git("rev-parse", "HEAD") or "unknown",
            "dirty": bool(_git.git("status", "--porcelain", "--untracked-files=no")),
            "theorycheck": _version.__version__,
            "python": platform.python_version(),
            "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "wall_seconds": round(wall, 1),
            "cpu_seconds": round(usage.ru_utime + usage.ru_stime, 1),
            "peak_rss_mb": round(usage.ru_maxrss / 1024),
            "loadavg_before": before,
            "loadavg_after": _loadavg(),
        },
        "claims": claims,
    }


def load(root: Path = ROOT) -> dict:
    return json.loads((root / RESULTS).read_text())


def _cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _by_section(claims):
    for title, verdicts in SECTIONS:
        members = [c for c in claims if c["verdict"] in verdicts]
        if members:
            yield title, members


def _kinds(c) -> str:
    kinds = ", ".join(dict.fromkeys(m["method"] for m in c["methods"]))
    corr = c.get("correction") or {}
    if corr.get("methods"):
        extra = ", ".join(dict.fromkeys(m["method"] for m in corr["methods"]))
        kinds += f" → correction: {extra}"
    return kinds


def _tally(claims) -> str:
    by_status: dict[str, int] = {}
    by_verdict: dict[str, int] = {}
    for c in claims:
        by_status[c["status"]] = by_status.get(c["status"], 0) + 1
        by_verdict[c["verdict"]] = by_verdict.get(c["verdict"], 0) + 1
    statuses = ", ".join(f"{n} {s}" for s, n in sorted(by_status.items()))
    order = [v for _, vs in SECTIONS for v in vs]
    verdicts = "; ".join(f"{by_verdict[v]} {v}" for v in order if v in by_verdict)
    return f"**{len(claims)} claims**: {statuses} ({verdicts})"


def _provenance(p: dict) -> str:
    load = "/".join(f"{x:g}" for x in p["loadavg_before"]) or "n/a"
    return (
        f"`{p['command']}` at commit `{p['commit'][:12]}` ({p['date_utc']}): "
        f"{p['wall_seconds']:.0f} s wall, {p['cpu_seconds']:.0f} s CPU, peak "
        f"{p['peak_rss_mb']} MB, load average {load} (1/5/15 min) when it started"
    )


#: how a check's line names a measurement read back from its committed file
COMMITTED = "the committed measurement "


def _committed(claims) -> tuple[list[str], list[str]]:
    """The committed measurement files the run read back (``theorycheck.claims.
    measured``), and the checks that measured now instead."""
    files: dict[str, list[str]] = {}
    fresh: list[str] = []
    for c in claims:
        for m in c["methods"]:
            d = m["detail"]
            if COMMITTED in d:
                name = d.split(COMMITTED, 1)[1].split(" ", 1)[0]
                files.setdefault(name, []).append(c["id"])
            elif "measured now (" in d:
                fresh.append(c["id"])
    out = [
        f"`{name}` (read by {', '.join(f'`{i}`' for i in dict.fromkeys(ids))})"
        for name, ids in files.items()
    ]
    return out, sorted(set(fresh))


def _measurements(claims) -> str:
    files, fresh = _committed(claims)
    if not files and not fresh:
        return ""
    line = (
        "Real-checkpoint measurements read back from committed files (regenerate: "
        "`theorycheck prove --remeasure`): " + ("; ".join(files) or "none")
    )
    if fresh:
        line += "; measured during the run: " + ", ".join(f"`{i}`" for i in fresh)
    return line + "."


def table(data: dict) -> str:
    """The docs/proofs.md block: every claim, by section."""
    claims = data["claims"]
    out = [
        f"Generated from `{RESULTS}` by `scripts/gen_claims_table.py`: "
        f"{_provenance(data['provenance'])}.",
        "",
        _tally(claims) + ".",
    ]
    if _measurements(claims):
        out += ["", _measurements(claims)]
    for title, members in _by_section(claims):
        out += ["", f"**{title}** ({len(members)})", ""]
        out += [
            "| claim | kind | location | status | method kinds | seconds |",
            "|---|---|---|---|---|---|",
        ]
        for c in members:
            kind = c["kind"] + (f" of `{c['extends']}`" if c.get("extends") else "")
            out.append(
                f"| `{c['id']}` | {kind} | {_cell(c['location'])} | {c['status']} | "
                f"{_kinds(c)} | {c['seconds']:.1f} |"
            )
    return "\n".join(out)


def summary(data: dict) -> str:
    """The README / findings block: the tally and the headline list (only the
    claims that fail as stated)."""
    claims = data["claims"]
    failing = [c for c in claims if c["verdict"] == "fails as stated"]
    out = [
        f"Generated from `{RESULTS}` ({_provenance(data['provenance'])}).",
        "",
        _tally(claims) + ".",
        "",
        f"Fails as stated ({len(failing)}), each with its counterexample in "
        "[docs/proofs.md](docs/proofs.md):",
        "",
    ]
    for c in failing:
        corr = c.get("correction") or {}
        tail = "; holds with a correction" if corr.get("status") == "holds" else ""
        out.append(f"- `{c['id']}` ({_cell(c['location'])}){tail}")
        for m in c["methods"]:
            if m["status"] == "fail":
                out.append(f"  - {m['method']}: {m['detail']}")
                break
    others = [
        c
        for c in claims
        if c["verdict"] in ("extension fails", "objection fails")
        or c["verdict"].startswith("assumption")
    ]
    if others:
        out += [
            "",
            "Not the paper failing: "
            + "; ".join(f"`{c['id']}` {c['verdict']}" for c in others)
            + ".",
        ]
    held = [c for c in claims if c["verdict"] == "holds as stated"]
    if held:
        out += [
            "",
            f"Holds as stated ({len(held)}): "
            + ", ".join(f"`{c['id']}`" for c in held)
            + ".",
        ]
    return "\n".join(out)


def measured(data: dict) -> str:
    """The docs/proofs.md block of figures: every assumption, extension and reviewer
    claim with each check's result line (and its correction's)."""
    out = [f"Generated from `{RESULTS}` by `scripts/gen_claims_table.py`.", ""]
    for c in data["claims"]:
        if c["verdict"] in ("holds as stated", "fails as stated", "undecided"):
            continue
        out.append(f"- `{c['id']}` ({c['verdict']}):")
        corr = c.get("correction") or {}
        for m in [*c["methods"], *corr.get("methods", [])]:
            out.append(f"  - {m['method']}, {m['name']} ({m['status']}): {m['detail']}")
    return "\n".join(out)


#: the most characters of one counterexample shown in the docs (the full one is in
#: the results file)
CX_CHARS = 600


def _cx(cx) -> str:
    text = json.dumps(cx, ensure_ascii=False, sort_keys=True)
    if len(text) > CX_CHARS:
        text = text[:CX_CHARS] + f" ... ({len(text)} characters in {RESULTS})"
    return text


def counterexamples(data: dict) -> str:
    """The docs/proofs.md block: each claim that fails as stated, its failing checks
    with their re-checked counterexamples, and its correction's status."""
    out = [f"Generated from `{RESULTS}` by `scripts/gen_claims_table.py`.", ""]
    for c in data["claims"]:
        if c["verdict"] != "fails as stated":
            continue
        out.append(f"- `{c['id']}` ({_cell(c['location'])}): {_cell(c['statement'])}")
        for m in c["methods"]:
            if m["status"] == "fail":
                out.append(f"  - {m['method']}, {m['name']}: {m['detail']}")
                out.append(f"    counterexample: `{_cell(_cx(m['counterexample']))}`")
        corr = c.get("correction") or {}
        if corr:
            out.append(f"  - correction ({corr['status']}): {_cell(corr['statement'])}")
    return "\n".join(out)


def blocks(data: dict | None = None) -> dict[tuple[str, str], str]:
    data = data if data is not None else load()
    body = summary(data)
    findings = body.replace("](docs/proofs.md)", "](proofs.md)")
    return {
        ("docs/proofs.md", "claims-table"): table(data),
        ("docs/proofs.md", "claims-measured"): measured(data),
        ("docs/proofs.md", "claims-counterexamples"): counterexamples(data),
        ("README.md", "claims-summary"): body,
        ("docs/findings.md", "claims-summary"): findings,
    }


if __name__ == "__main__":
    if "--run" in sys.argv:
        sys.argv.remove("--run")
        data = run()
        path = ROOT / RESULTS
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data, indent=1, allow_nan=False) + "\n")
        print(f"wrote {RESULTS}: {_provenance(data['provenance'])}", file=sys.stderr)
    raise SystemExit(docgen.main(blocks))

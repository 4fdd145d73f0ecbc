"""The repository's git state, for the provenance of results (reports, experiments,
benchmarks): one helper instead of one per caller.

Examples:
    >>> git("--version") is None or git("--version").startswith("git version")
    True
"""

from __future__ import annotations

import subprocess
from pathlib import Path

#: the repository root (the folder that holds the ``theorycheck`` package).
ROOT = Path(__file__).resolve().parents[1]


def git(*args: str) -> str | None:
    """``git ARGS`` run at :data:`ROOT`: its stripped stdout, or None where git is
    missing, fails or takes over 10 s (a copy of the tree without ``.git``)."""
    try:
        out = subprocess.run(
            ["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None

"""Writes the API reference tables of the docs pages from each package's ``__all__``.

One row per public name: its kind and the first line of its docstring (for a constant,
the ``#:`` comment above its definition). A name added to ``__all__`` therefore shows up
in the docs after ``make docs``; ``tests/test_public_api.py`` fails until it does.
"""

from __future__ import annotations

import importlib
import inspect
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import docgen  # noqa: E402

#: package -> the docs page that documents it.
PAGES = {
    "theorycheck": "docs/development.md",
    "theorycheck.numeric": "docs/numeric.md",
    "theorycheck.losses": "docs/losses.md",
    "theorycheck.models": "docs/models.md",
    "theorycheck.convexity": "docs/convexity.md",
    "theorycheck.torchfront": "docs/convexity.md",
    "theorycheck.symbolic": "docs/convexity.md",
    "theorycheck.formal": "docs/convexity.md",
    "theorycheck.claims": "docs/proofs.md",
    "theorycheck.rl": "docs/probes.md",
    "theorycheck.probes": "docs/probes.md",
    "theorycheck.reproduce": "docs/demo.md",
}


def constant_comment(package: str, name: str) -> str:
    """The ``#:`` comment above ``NAME =`` in the package's modules ('' if none)."""
    module = importlib.import_module(package)
    root = Path(module.__file__).parent
    files = [Path(module.__file__)] if root.name == "theorycheck" else root.glob("*.py")
    for path in sorted(files):
        lines = path.read_text().splitlines()
        for i, line in enumerate(lines):
            if re.match(rf"{re.escape(name)}(: [^=]+)? = ", line):
                j, comment = i - 1, []
                while j >= 0 and lines[j].startswith("#:"):
                    comment.insert(0, lines[j][2:].strip())
                    j -= 1
                if comment:
                    return " ".join(comment)
    return ""


def summary(package: str, name: str) -> tuple[str, str]:
    """(kind, one-line summary) of ``package.name``."""
    obj = getattr(importlib.import_module(package), name)
    if inspect.isclass(obj):
        kind = "enum" if issubclass(obj, __import__("enum").Enum) else "class"
    elif callable(obj):
        kind = "function"
    else:
        return "constant", constant_comment(package, name)
    doc = inspect.getdoc(obj) or ""
    return kind, doc.split("\n\n")[0].replace("\n", " ").strip()


def _cell(text: str) -> str:
    return text.replace("\\|", "‖").replace("|", "\\|")


def table(package: str) -> str:
    names = importlib.import_module(package).__all__
    rows = ["| name | kind | summary |", "|---|---|---|"]
    for name in sorted(names, key=str.lower):
        kind, text = summary(package, name)
        rows.append(f"| `{name}` | {kind} | {_cell(text)} |")
    return f"Generated from `{package}.__all__` by `scripts/gen_api_tables.py`:\n\n" + (
        "\n".join(rows)
    )


def blocks() -> dict[tuple[str, str], str]:
    return {(page, f"api:{pkg}"): table(pkg) for pkg, page in PAGES.items()}


if __name__ == "__main__":
    raise SystemExit(docgen.main(blocks))

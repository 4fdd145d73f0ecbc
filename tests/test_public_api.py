"""The public API: every name in a package's ``__all__`` has a docstring (a ``#:``
comment for a constant) and appears in a docs page (optax's coverage check)."""

from __future__ import annotations

import enum
import importlib
import importlib.util
import inspect
import re
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

PACKAGES = (
    "theorycheck",
    "theorycheck.numeric",
    "theorycheck.losses",
    "theorycheck.models",
    "theorycheck.convexity",
    "theorycheck.torchfront",
    "theorycheck.symbolic",
    "theorycheck.formal",
    "theorycheck.claims",
    "theorycheck.rl",
    "theorycheck.probes",
    "theorycheck.reproduce",
)


def _script(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def undocumented(module, constant_comment) -> list[str]:
    """Names of ``module.__all__`` without a docstring of their own."""
    bad = []
    for name in module.__all__:
        obj = getattr(module, name)
        if inspect.isclass(obj):
            doc = obj.__dict__.get("__doc__") or ""
            auto = issubclass(obj, tuple) and doc.startswith(f"{name}(")
            if (
                not doc.strip()
                or auto
                or (issubclass(obj, enum.Enum) and doc == "An enumeration.")
            ):
                bad.append(name)
        elif callable(obj):
            if not (getattr(obj, "__doc__", None) or "").strip():
                bad.append(name)
        elif not constant_comment(module.__name__, name):
            bad.append(name)
    return bad


def missing_from_docs(module, text: str) -> list[str]:
    """Names of ``module.__all__`` that no docs page mentions."""
    return [n for n in module.__all__ if not re.search(rf"\b{re.escape(n)}\b", text)]


def _docs_text() -> str:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    return "\n".join(p.read_text() for p in pages)


@pytest.mark.parametrize("package", PACKAGES)
def test_public_api_every_name_has_a_docstring(package):
    gen = _script("gen_api_tables")
    module = importlib.import_module(package)
    assert undocumented(module, gen.constant_comment) == []


@pytest.mark.parametrize("package", PACKAGES)
def test_public_api_every_name_is_in_the_docs(package):
    module = importlib.import_module(package)
    assert missing_from_docs(module, _docs_text()) == []


def test_public_api_tables_are_up_to_date():
    gen = _script("gen_api_tables")
    assert set(gen.PAGES) == set(PACKAGES)
    stale = _script("docgen").stale_blocks(gen.blocks(), ROOT)
    assert stale == [], "run `make docs` (scripts/gen_api_tables.py)"


def test_public_api_check_can_fail():
    # Meta-test: an undocumented function, a bare NamedTuple, a constant without a
    # #: comment and a name no page mentions are all caught.
    from typing import NamedTuple

    def bare(x):
        return x

    class Bare(NamedTuple):
        x: int

    class Documented(enum.StrEnum):
        """Documented."""

        A = "a"

    fake = types.ModuleType("fake")
    fake.__all__ = ["bare", "Bare", "Documented", "LIMIT"]
    fake.bare, fake.Bare, fake.Documented, fake.LIMIT = bare, Bare, Documented, 3
    assert undocumented(fake, lambda pkg, name: "") == ["bare", "Bare", "LIMIT"]
    assert missing_from_docs(fake, "`Documented` and `LIMIT`") == ["bare", "Bare"]

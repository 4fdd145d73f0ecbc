"""Generated blocks in the docs pages: tables that are measurements of the code.

A docs page marks a block with two HTML comments (invisible when rendered)::

    <!-- BEGIN generated:NAME -->
    ...written by a generator, never by hand...
    <!-- END generated:NAME -->

Each ``scripts/gen_*.py`` defines ``blocks() -> {(page, NAME): markdown}`` and ends
with ``raise SystemExit(docgen.main(blocks))``. Run it to rewrite its blocks, or with
``--check`` to exit 1 (naming the block) when a page is out of date. ``make docs``
runs every generator.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

Blocks = Mapping[tuple[str, str], str]


def _markers(name: str) -> tuple[str, str]:
    return f"<!-- BEGIN generated:{name} -->", f"<!-- END generated:{name} -->"


def replace_block(text: str, name: str, body: str) -> str:
    """``text`` with the block ``name`` replaced by ``body``.

    Raises:
        ValueError: the markers are missing, repeated or out of order.
    """
    begin, end = _markers(name)
    if text.count(begin) != 1 or text.count(end) != 1:
        raise ValueError(f"block {name!r}: expected one {begin!r} and one {end!r}")
    pattern = re.compile(re.escape(begin) + r"\n.*?" + re.escape(end), re.DOTALL)
    new, n = pattern.subn(lambda _: f"{begin}\n{body.strip()}\n{end}", text)
    if n != 1:
        raise ValueError(f"block {name!r}: {end!r} comes before {begin!r}")
    return new


def stale_blocks(blocks: Blocks, root: Path = ROOT) -> list[str]:
    """The ``page:NAME`` of every block whose page text differs from ``blocks``."""
    stale = []
    for (page, name), body in blocks.items():
        text = (root / page).read_text()
        if replace_block(text, name, body) != text:
            stale.append(f"{page}:{name}")
    return stale


def write_blocks(blocks: Blocks, root: Path = ROOT) -> list[str]:
    """Rewrites every block; returns the ``page:NAME`` of those that changed."""
    changed = []
    for (page, name), body in blocks.items():
        path = root / page
        text = path.read_text()
        new = replace_block(text, name, body)
        if new != text:
            path.write_text(new)
            changed.append(f"{page}:{name}")
    return changed


def main(blocks: Callable[[], Blocks], argv: list[str] | None = None) -> int:
    """Command line of a generator: rewrite its blocks, or ``--check`` them."""
    parser = argparse.ArgumentParser(description=sys.modules["__main__"].__doc__)
    parser.add_argument(
        "--check", action="store_true", help="exit 1 if a block is out of date"
    )
    args = parser.parse_args(argv)
    if args.check:
        stale = stale_blocks(blocks())
        for item in stale:
            print(f"out of date: {item} (run make docs)", file=sys.stderr)
        return 1 if stale else 0
    for item in write_blocks(blocks()):
        print(f"rewrote {item}")
    return 0

"""Writes the conventions tables of docs/losses.md from the presets in the code.

The block is the output of ``theorycheck conventions --batch-shape 2,2,8 --lengths
2,8,4,0 --micro-batch-size 2`` (the command's own renderer), headings moved two levels
down to sit inside the page.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import docgen  # noqa: E402

COMMAND = (
    "theorycheck conventions --batch-shape 2,2,8 --lengths 2,8,4,0 --micro-batch-size 2"
)


def blocks() -> dict[tuple[str, str], str]:
    import jax

    from theorycheck.commands.conventions import render_markdown
    from theorycheck.losses import conventions_report

    jax.config.update("jax_enable_x64", True)
    report = conventions_report((2, 2, 8), [2, 8, 4, 0], micro_batch_size=2)
    text = re.sub(r"(?m)^#", "###", render_markdown(report))
    body = f"Generated from `{COMMAND}`:\n\n{text}"
    return {("docs/losses.md", "conventions"): body}


if __name__ == "__main__":
    raise SystemExit(docgen.main(blocks))

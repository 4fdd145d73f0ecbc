"""Progress on stderr, for people only: shown when stderr is a terminal, never stdout.

One small API shared by every long command (convexity stages, model loading, ``prove``,
``reproduce``, the experiments), so ``--json`` output on stdout is never disturbed.

* :func:`stage` prints one line ``theorycheck: <message>`` per stage.
* :func:`bar` wraps an iterable in a tqdm bar.

Both are silent unless stderr is a terminal, or ``THEORYCHECK_PROGRESS=1`` forces them
on (``THEORYCHECK_PROGRESS=0`` forces them off).

Examples:
    >>> enabled(stream=None) in (True, False)
    True
    >>> list(bar(range(3), desc="demo"))
    [0, 1, 2]
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator
from typing import IO, TypeVar

T = TypeVar("T")


def enabled(stream: IO[str] | None = None) -> bool:
    """Whether progress is shown on ``stream`` (default stderr).

    ``THEORYCHECK_PROGRESS=1``/``0`` overrides; otherwise only when it is a terminal.
    """
    forced = os.environ.get("THEORYCHECK_PROGRESS")
    if forced in ("0", "1"):
        return forced == "1"
    stream = sys.stderr if stream is None else stream
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def stage(message: str) -> None:
    """Prints ``theorycheck: <message>`` on stderr when progress is enabled."""
    if enabled():
        print(f"theorycheck: {message}", file=sys.stderr, flush=True)


def bar(
    iterable: Iterable[T], *, desc: str, total: int | None = None, unit: str = "it"
) -> Iterator[T]:
    """Yields from ``iterable`` with a tqdm bar on stderr when progress is enabled."""
    if not enabled():
        yield from iterable
        return
    from tqdm import tqdm

    yield from tqdm(iterable, desc=desc, total=total, unit=unit, file=sys.stderr)

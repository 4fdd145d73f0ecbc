"""Files that are whole or absent: a run killed mid-write (SIGKILL, a full disk) never
leaves half a report where a whole one is expected.

Examples:
    >>> import tempfile, pathlib
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> write_text_atomic(folder / "a.md", "uᵀHu\\n").read_text(encoding="utf-8")
    'uᵀHu\\n'
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["save_figure_atomic", "write_bytes_atomic", "write_text_atomic"]


def write_bytes_atomic(path: str | os.PathLike, data: bytes) -> Path:
    """Writes ``data`` to a temporary file beside ``path``, flushed to disk, then
    renames it onto ``path`` (atomic on POSIX); the temporary file is removed on any
    failure. Returns ``path``."""
    target = Path(path)
    fd, tmp = tempfile.mkstemp(
        dir=target.parent, prefix=f".{target.name}.", suffix=".tmp"
    )
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return target


def write_text_atomic(path: str | os.PathLike, text: str) -> Path:
    """:func:`write_bytes_atomic` of ``text`` in UTF-8 (whatever the locale)."""
    return write_bytes_atomic(path, text.encode("utf-8"))


def save_figure_atomic(fig, path: str | os.PathLike, **kwargs) -> Path:
    """A matplotlib figure rendered in memory (the format from ``path``'s suffix),
    then written by :func:`write_bytes_atomic`; ``kwargs`` go to ``savefig``."""
    import io

    target = Path(path)
    buffer = io.BytesIO()
    fig.savefig(buffer, format=target.suffix.lstrip(".") or "png", **kwargs)
    return write_bytes_atomic(target, buffer.getvalue())

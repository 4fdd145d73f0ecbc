"""What every command shares on the way out: JSON emission, output paths, flag names.

* :func:`emit_json` prints exactly one JSON object on stdout (``--json``); NaN and
  infinities become ``null`` (JSON has no such numbers), so a command that can meet
  them says so in its own fields rather than silently.
* :func:`check_output_path` validates a file a command will write (``--plot``,
  ``--report``) *before* any work, so a bad path never costs a full run.
* :func:`flag_names` turns a library error that speaks of an argument
  (``max_len 3 ...``) into the CLI's words (``--max-len 3 ...``): library code never
  mentions CLI flags.

Examples:
    >>> to_jsonable({"a": float("nan"), "b": (1, 2.5)})
    {'a': None, 'b': [1, 2.5]}
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

from theorycheck._errors import BadInput

__all__ = [
    "check_input_file",
    "check_output_dir",
    "check_output_path",
    "emit_json",
    "flag_names",
    "to_jsonable",
]


def to_jsonable(obj: Any) -> Any:
    """Converts numpy/jax scalars and arrays to plain JSON values (NaN/inf -> null)."""
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if hasattr(obj, "tolist"):
        return to_jsonable(obj.tolist())
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def emit_json(obj: dict) -> None:
    """Prints exactly one JSON object on stdout (one line)."""
    print(json.dumps(to_jsonable(obj), allow_nan=False), flush=True)


def check_output_path(
    flag: str, path: str | os.PathLike, suffixes: tuple[str, ...] | None
) -> Path:
    """Checks that ``path`` can be written as a file, before any work is done.

    Args:
        flag: the option that named the path, for the message (e.g. ``"--plot"``).
        path: the file to be written (it may exist: it is replaced).
        suffixes: accepted suffixes (lower case, with the dot), or ``None`` for any.

    Returns:
        ``path`` as a :class:`~pathlib.Path`.

    Raises:
        BadInput: a directory, a wrong suffix, a missing or unwritable parent
        directory.

    Examples:
        >>> check_output_path("--plot", "notes.txt", (".png",))
        Traceback (most recent call last):
        ...
        theorycheck._errors.BadInput: --plot 'notes.txt': expected a .png file
    """
    text = os.fspath(path)
    if text.strip() == "":
        raise BadInput(f"{flag} {text!r} is empty; expected a file path")
    if "\x00" in text:
        raise BadInput(f"{flag} {text!r}: a path cannot hold a NUL byte")
    try:
        return _checked_file(flag, text, suffixes)
    except BadInput:
        raise
    except (OSError, ValueError) as err:  # NUL byte, a name too long, a loop ...
        raise BadInput(f"{flag} {text!r} is not a usable path: {err}") from None


def _checked_file(flag: str, text: str, suffixes: tuple[str, ...] | None) -> Path:
    target = Path(text)
    if os.path.lexists(target) and not target.exists():
        raise BadInput(f"{flag} {text!r} is a broken or looping symbolic link")
    if target.is_dir():
        raise BadInput(f"{flag} {text!r} is a directory; expected a file path")
    if suffixes is not None and target.suffix.lower() not in suffixes:
        kinds = ", ".join(suffixes[:-1]) + " or " * (len(suffixes) > 1) + suffixes[-1]
        raise BadInput(f"{flag} {text!r}: expected a {kinds} file")
    parent = target.parent
    if not parent.is_dir():
        raise BadInput(f"{flag} {text!r}: directory {str(parent)!r} does not exist")
    if not _writable(parent):
        raise BadInput(f"{flag} {text!r}: directory {str(parent)!r} is not writable")
    if target.exists() and not os.access(target, os.W_OK):
        raise BadInput(f"{flag} {text!r}: the file exists and is not writable")
    return target


def check_output_dir(flag: str, path: str | os.PathLike) -> Path:
    """Checks that ``path`` is (or can be created as) a writable directory.

    Raises:
        BadInput: ``path`` is empty (it would mean the working directory), is a
        file, or the nearest existing ancestor is not a writable directory.

    Examples:
        >>> check_output_dir("--out", "")
        Traceback (most recent call last):
        ...
        theorycheck._errors.BadInput: --out '' is empty; expected a directory
    """
    text = os.fspath(path)
    if text.strip() == "":
        raise BadInput(f"{flag} {text!r} is empty; expected a directory")
    if "\x00" in text:
        raise BadInput(f"{flag} {text!r}: a path cannot hold a NUL byte")
    try:
        return _checked_dir(flag, text)
    except BadInput:
        raise
    except (OSError, ValueError) as err:  # NUL byte, a name too long, a loop ...
        raise BadInput(f"{flag} {text!r} is not a usable path: {err}") from None


def _checked_dir(flag: str, text: str) -> Path:
    target = Path(text)
    if target.exists() and not target.is_dir():
        raise BadInput(f"{flag} {text!r} is a file; expected a directory")
    probe = target
    while not probe.exists():
        if os.path.lexists(probe):
            raise BadInput(
                f"{flag} {text!r}: {str(probe)!r} is a broken or looping symbolic link"
            )
        probe = probe.parent
    if not probe.is_dir() or not _writable(probe):
        raise BadInput(f"{flag} {text!r}: {str(probe)!r} is not a writable directory")
    return target


def _writable(folder: Path) -> bool:
    """Whether a file can be created in ``folder``: tried, not read off the mode bits
    (root passes every ``os.access`` test; /proc and read-only mounts do not)."""
    if not os.access(folder, os.W_OK | os.X_OK):
        return False
    try:
        fd, name = tempfile.mkstemp(dir=folder, prefix=".theorycheck-probe-")
    except OSError:
        return False
    os.close(fd)
    os.remove(name)
    return True


def check_input_file(
    flag: str, path: str | os.PathLike, suffixes: tuple[str, ...] | None = None
) -> Path:
    """Checks that ``path`` names a readable regular file, before it is opened (a
    directory, ``/dev/null`` or a named pipe is named as what it is, and a pipe is
    never opened: reading one could wait forever).

    Raises:
        BadInput: an empty path, a NUL byte, a missing path, a directory or other
        non-regular file, a wrong suffix, an unreadable file.

    Examples:
        >>> check_input_file("BATCH", "")
        Traceback (most recent call last):
        ...
        theorycheck._errors.BadInput: BATCH '' is empty; expected a file
    """
    text = os.fspath(path)
    if text.strip() == "":
        raise BadInput(f"{flag} {text!r} is empty; expected a file")
    if "\x00" in text:
        raise BadInput(f"{flag} {text!r}: a path cannot hold a NUL byte")
    target = Path(text)
    try:
        if os.path.lexists(target) and not target.exists():
            raise BadInput(f"{flag} {text!r} is a broken or looping symbolic link")
        if not target.exists():
            raise BadInput(f"{flag} {text!r} does not exist")
        if target.is_dir():
            raise BadInput(f"{flag} {text!r} is a directory; expected a file")
        if not target.is_file():
            raise BadInput(f"{flag} {text!r} is not a regular file (a device or pipe)")
        if not os.access(target, os.R_OK):
            raise BadInput(f"{flag} {text!r}: the file is not readable")
    except BadInput:
        raise
    except (OSError, ValueError) as err:  # a name too long, a loop of links ...
        raise BadInput(f"{flag} {text!r} is not a usable path: {err}") from None
    if suffixes is not None and target.suffix.lower() not in suffixes:
        kinds = ", ".join(suffixes[:-1]) + " or " * (len(suffixes) > 1) + suffixes[-1]
        raise BadInput(f"{flag} {text!r}: expected a {kinds} file")
    return target


class flag_names:  # lower case: it reads as the context manager it is
    """Re-raises a library :class:`BadInput` that starts with an argument name with
    that argument's flag instead (``flag_names(max_len="--max-len")``); reusable.

    Examples:
        >>> with flag_names(max_len="--max-len"):
        ...     raise BadInput("max_len 3 is below the longest length 5")
        Traceback (most recent call last):
        ...
        theorycheck._errors.BadInput: --max-len 3 is below the longest length 5
    """

    def __init__(self, **flags: str) -> None:
        self.flags = flags

    def __enter__(self) -> flag_names:
        return self

    def __exit__(self, kind, err, tb) -> None:
        if not isinstance(err, BadInput):
            return
        message = str(err)
        for name, flag in self.flags.items():
            rest = message[len(name) :]
            if message.startswith(name) and rest[:1] in (" ", ":", ""):
                raise BadInput(flag + rest) from None

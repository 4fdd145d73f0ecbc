"""Functions the isolation tests run in a child process (importable there by name)."""

from __future__ import annotations

import importlib.util
import pathlib


def call_file(path: str, func: str, marker: str | None = None, *args):
    """Loads the user file at ``path`` (its top level runs here) and calls ``func``.

    ``marker`` (a path) is written with ``"loading"`` before the module runs and
    ``"calling"`` just before the call, so a test can tell how far the child got.
    """
    if marker:
        pathlib.Path(marker).write_text("loading")
    spec = importlib.util.spec_from_file_location("_user_target", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if marker:
        pathlib.Path(marker).write_text("calling")
    return getattr(module, func)(*args)

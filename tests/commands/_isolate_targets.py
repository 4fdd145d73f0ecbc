"""Functions the isolation tests run in a child process (importable there by name)."""

from __future__ import annotations

import importlib.util
import time


def call_file(path: str, func: str, *args):
    """Loads the user file at ``path`` (its top level runs here) and calls ``func``."""
    spec = importlib.util.spec_from_file_location("_user_target", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, func)(*args)


def sleep_then(seconds: float, value):
    """Sleeps, then returns ``value`` (a call that finishes in time)."""
    time.sleep(seconds)
    return value

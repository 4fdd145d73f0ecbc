"""The environment is part of the input: checks made before a command runs.

* :func:`safe_streams`: stdout and stderr never fail on a character the locale
  cannot encode (``PYTHONIOENCODING=ascii``, ``LANG=C``): it is written as a
  backslash escape instead of ending the run with a ``UnicodeEncodeError`` halfway
  through a report (``--json`` output is ASCII already).
* :func:`check_shadowing`: a ``jax.py`` (or ``numpy.py``, ``sympy/`` ...) in the
  working directory, which ``python -m theorycheck`` puts first on the import path,
  would be imported instead of the installed package.
* :func:`check_jax_environment`: ``JAX_PLATFORMS`` naming a platform this machine
  lacks, or an ``XLA_FLAGS`` that XLA refuses (XLA logs a fatal error and exits the
  process: it cannot be caught in-process), are found by starting JAX's backend once
  in a forked probe; done only when one of the two variables is set.

Each raises :class:`~theorycheck._errors.BadInput` naming the variable or the file.
"""

from __future__ import annotations

import importlib.machinery
import importlib.metadata
import os
import sys
import threading
from pathlib import Path

from theorycheck._errors import BadInput

__all__ = ["check_jax_environment", "check_shadowing", "safe_streams"]

#: import name -> distribution name, for the packages a command may import.
_PACKAGES = {
    "jax": "jax",
    "jaxlib": "jaxlib",
    "numpy": "numpy",
    "scipy": "scipy",
    "sympy": "sympy",
    "mpmath": "mpmath",
    "z3": "z3-solver",
    "yaml": "PyYAML",
    "omegaconf": "omegaconf",
    "matplotlib": "matplotlib",
    "ml_dtypes": "ml_dtypes",
    "opt_einsum": "opt_einsum",
    # not torch: the torch a user's loss runs with is theirs to choose (a trainer's
    # environment on PYTHONPATH, say); a missing or broken one is named by the torch
    # front end with the pip command.
}


def safe_streams() -> None:
    """Characters that stdout/stderr cannot encode become backslash escapes."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            try:
                reconfigure(errors="backslashreplace")
            except (ValueError, OSError):  # a closed or detached stream
                pass


def _installed_at(dist: str, name: str) -> Path | None:
    try:
        return Path(importlib.metadata.distribution(dist).locate_file(name)).resolve()
    except (importlib.metadata.PackageNotFoundError, OSError, TypeError):
        return None


def check_shadowing() -> None:
    """Refuses a module of the user's that would be imported in place of one of the
    packages theorycheck uses (a not yet imported one, found first on ``sys.path``).

    Raises:
        BadInput: naming the file, the package it hides and what to do.
    """
    for name, dist in _PACKAGES.items():
        if name in sys.modules:
            continue  # imported already: whatever the path says, that one is used
        installed = _installed_at(dist, name)
        if installed is None:
            continue
        try:
            spec = importlib.machinery.PathFinder.find_spec(name)
        except (ImportError, ValueError, OSError):
            continue
        if spec is None:
            continue
        found = Path(spec.origin or next(iter(spec.submodule_search_locations or ())))
        shown = found.parent if found.name == "__init__.py" else found
        if not found.resolve().is_relative_to(installed):
            raise BadInput(
                f"{str(shown)!r} shadows the installed {name} package (it comes "
                "first on the import path); rename or move it"
            )


def _probe_backend() -> tuple[int, str]:
    """Starts JAX's backend in a forked child: ``(exit status, what it said)``."""
    import jax

    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        try:
            os.close(read)
            os.dup2(write, 2)  # XLA's fatal log goes to the pipe
            jax.devices()
            os._exit(0)
        except BaseException as err:  # the probe's finding, sent to the parent
            os.write(write, f"{type(err).__name__}: {err}".encode()[-2000:])
            os._exit(3)
    os.close(write)
    chunks = []
    while chunk := os.read(read, 65536):
        chunks.append(chunk)
    os.close(read)
    _, status = os.waitpid(pid, 0)
    said = b"".join(chunks).decode("utf-8", "replace")
    return os.waitstatus_to_exitcode(status), said


def _backends_started() -> bool:
    jax = sys.modules.get("jax")
    if jax is None:
        return False
    try:
        from jax._src import xla_bridge

        return bool(xla_bridge._backends)
    except (ImportError, AttributeError):
        return True  # cannot tell: assume the process already runs JAX


def check_jax_environment() -> None:
    """Starts JAX's backend once in a forked probe when ``JAX_PLATFORMS`` or
    ``XLA_FLAGS`` is set (0.1 s after JAX's import, which the command needs anyway).

    Raises:
        BadInput: naming the variable and its value, with the probe's first line.
    """
    keys = ("JAX_PLATFORMS", "XLA_FLAGS")
    wanted = {k: os.environ[k] for k in keys if k in os.environ}
    if not wanted or _backends_started() or threading.active_count() > 1:
        return  # the defaults, a process that runs JAX already, or unsafe to fork
    code, said = _probe_backend()
    if code == 0:
        return
    lines = [ln.strip() for ln in said.splitlines() if ln.strip()]
    detail = lines[-1] if lines else f"exit status {code}"
    if "XLA_FLAGS" in said or ("XLA_FLAGS" in wanted and "JAX_PLATFORMS" not in wanted):
        key = "XLA_FLAGS"
    else:
        key = "JAX_PLATFORMS"
    detail = detail.split("] ", 1)[-1][:300].rstrip(":")
    raise BadInput(
        f"environment variable {key}={wanted[key]!r}: JAX cannot start with it "
        f"({detail or 'no reason given'})"
    )

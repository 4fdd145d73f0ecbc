"""Running user code where it can be stopped: a child process with a deadline.

:func:`run_isolated` calls ``fn(*args, **kwargs)`` in a fresh Python process (its own
session; at the deadline, on SIGINT/SIGTERM and when this process dies, the child and
everything below it are killed: :mod:`theorycheck._isolation`) and returns the value.
What the child does is kept off our stdout:

* the deadline is a wall clock: an endless ``while True``, ``time.sleep``, an endless
  ``lax.while_loop`` or a loop at the top level of the user's module are all stopped,
  and the run ends with :class:`~theorycheck._errors.BadInput` naming the deadline;
* the child's stdout and stderr (the user's ``print``, JAX warnings) are captured in
  files: forwarded to our stderr when the call succeeds, dropped when it fails (the
  error stays one line); on a terminal with progress enabled the child's stderr is
  live instead and its stdout goes to our stderr;
* ``sys.exit(n)`` (and ``os._exit``, a signal) in the child is :class:`BadInput`;
* an exception is :class:`BadInput` of one line naming ``label``, the exception and
  where it was raised (the innermost frame in one of ``user_files`` when there is
  one); a :class:`BadInput` raised in the child keeps its own message.

The value travels back pickled, without the user's code: a function or class of the
user's files inside it comes back as ``None`` (so code that needs the user's function,
such as a report that evaluates the loss, runs inside the same isolated call);
unpickling accepts only classes of a short list of packages (never the user's module:
that would run its code in this process).

The child is started with ``python -m theorycheck.commands._isolate_child DIR`` and
reads ``DIR/call.pkl``; it inherits JAX's ``x64`` and rank-promotion settings from this
process so that the same call gives the same numbers in both.

Examples:
    >>> import operator
    >>> run_isolated(operator.add, 2, 3, deadline_s=60.0, label="add")
    5
"""

from __future__ import annotations

import io
import os
import pickle
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from theorycheck._errors import BadInput
from theorycheck._isolation import kill_group, kill_tree

__all__ = [
    "MAX_TIMEOUT_S",
    "DEADLINE_BASE_S",
    "DEADLINE_PER_TIMEOUT",
    "caller_for",
    "run_isolated",
    "user_file",
]

#: a command whose stages get ``--timeout S`` each is stopped after
#: ``DEADLINE_BASE_S + DEADLINE_PER_TIMEOUT * S`` seconds when it runs user code
#: (start-up and JAX compilation are in the base; the convexity checker's symbolic
#: stages take up to 5 S, the numeric stages a few seconds).
DEADLINE_BASE_S = 20.0
DEADLINE_PER_TIMEOUT = 10.0
#: the largest ``--timeout`` (a day): beyond it the deadline is no bound at all.
MAX_TIMEOUT_S = 86400.0

#: top-level packages whose classes a child's result may hold.
_SAFE_PACKAGES = frozenset(
    {
        "builtins",
        "collections",
        "copyreg",
        "datetime",
        "decimal",
        "fractions",
        "_codecs",
        "enum",
        "pathlib",
        "numpy",
        "sympy",
        "mpmath",
        "theorycheck",
        "jax",
        "jaxlib",
        "ml_dtypes",
    }
)


_CHILD = "theorycheck.commands._isolate_child"


def user_file(spec: str) -> Path | None:
    """The file a ``path/to/file.py[:function]`` SPEC names, or ``None`` for a
    registered name (the same rule the loss resolver uses).

    Examples:
        >>> user_file("ppo") is None, user_file("losses/mine.py:loss").name
        (True, 'mine.py')
    """
    if ":" not in spec and not spec.endswith(".py"):
        return None
    path_text = spec.rpartition(":")[0] if ":" in spec else spec
    return Path(path_text)


def caller_for(spec: str, timeout_s: float) -> Callable[..., Any]:
    """How a command calls code that runs SPEC: directly for a registered name,
    through :func:`run_isolated` for a user file, with the whole-run deadline
    ``DEADLINE_BASE_S + DEADLINE_PER_TIMEOUT * timeout_s``.

    Use as ``call = caller_for(spec, timeout); result = call(fn, *args, **kw)``.

    Raises:
        BadInput: ``timeout_s`` is not a finite number > 0 (checked before any work).

    Examples:
        >>> caller_for("ppo", 20.0)(max, 1, 2)
        2
    """
    if not (isinstance(timeout_s, (int, float)) and 0 < timeout_s <= MAX_TIMEOUT_S):
        raise BadInput(
            f"--timeout {timeout_s!r} must be a number in (0, {MAX_TIMEOUT_S:g}] s"
        )
    path = user_file(spec)
    if path is None:
        return lambda fn, *args, **kwargs: fn(*args, **kwargs)
    problem = (
        "does not exist"
        if not path.exists()
        else "is a directory, not a Python file"
        if path.is_dir()
        else "is not a regular file"
        if not path.is_file()
        else None
    )
    if problem is not None:
        raise BadInput(f"loss file {str(path)!r} {problem}")
    deadline = DEADLINE_BASE_S + DEADLINE_PER_TIMEOUT * timeout_s
    text = (
        f"{deadline:g} s (= {DEADLINE_BASE_S:g} + {DEADLINE_PER_TIMEOUT:g} x "
        f"--timeout {timeout_s:g})"
    )

    def call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return run_isolated(
            fn,
            *args,
            deadline_s=deadline,
            deadline_text=text,
            label=spec,
            user_files=[path],
            **kwargs,
        )

    return call


class _SafeUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if module.split(".")[0] not in _SAFE_PACKAGES:
            raise pickle.UnpicklingError(f"refusing {module}.{name}")
        return super().find_class(module, name)

    def persistent_load(self, pid: Any) -> None:
        return None  # the user's code, left in the child (_isolate_child.USER_CODE)


def _jax_settings() -> dict[str, Any]:
    if "jax" not in sys.modules:
        return {}
    config = sys.modules["jax"].config
    return {
        "jax_enable_x64": bool(config.jax_enable_x64),
        "jax_numpy_rank_promotion": str(config.jax_numpy_rank_promotion),
    }


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])  # the directory above the package
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (root, env.get("PYTHONPATH", "")) if p
    )
    return env


def _streams(workdir: Path):
    """(stdout, stderr, live) for the child: files, or our stderr when live."""
    from theorycheck._progress import enabled

    if enabled():
        try:
            err_fd = sys.stderr.fileno()
            return err_fd, err_fd, True
        except (AttributeError, OSError, io.UnsupportedOperation):
            pass
    out = open(workdir / "stdout.txt", "wb")  # closed by the caller once started
    err = open(workdir / "stderr.txt", "wb")
    return out, err, False


def _kill_group(proc: subprocess.Popen) -> None:
    """The process group ``proc`` leads, killed (the claims harness uses it)."""
    kill_group(proc.pid)


def _forward(workdir: Path) -> None:
    for name in ("stdout.txt", "stderr.txt"):
        path = workdir / name
        if path.exists() and path.stat().st_size:
            text = path.read_bytes().decode("utf-8", "replace")
            sys.stderr.write(text if text.endswith("\n") else text + "\n")
    sys.stderr.flush()


def run_isolated(
    fn: Callable[..., Any],
    *args: Any,
    deadline_s: float,
    label: str,
    deadline_text: str | None = None,
    user_files: Sequence[str | os.PathLike] = (),
    **kwargs: Any,
) -> Any:
    """``fn(*args, **kwargs)`` in a child process stopped at ``deadline_s`` seconds.

    Args:
        fn: a module-level function (it is pickled by reference).
        *args: positional arguments (picklable).
        deadline_s: wall-clock limit for the whole child, start-up included.
        label: what the child runs, for messages (e.g. the user's SPEC).
        deadline_text: how the deadline was chosen, for the timeout message
            (default ``"{deadline_s} s"``).
        user_files: the user's source files; an exception's location is named by
            its innermost frame in one of them.
        **kwargs: keyword arguments (picklable).

    Returns:
        What ``fn`` returned.

    Raises:
        BadInput: the deadline passed (the child is killed), the child exited or
        raised (one line: label, exception, where), or a bad deadline.
    """
    if not (isinstance(deadline_s, (int, float)) and 0 < deadline_s < float("inf")):
        raise BadInput(f"deadline {deadline_s!r} must be a finite number > 0")
    workdir = Path(tempfile.mkdtemp(prefix="theorycheck-isolate-"))
    try:
        call = {
            "fn": fn,
            "args": args,
            "kwargs": kwargs,
            "label": label,
            "user_files": [str(Path(f).resolve()) for f in user_files],
            "jax": _jax_settings(),
        }
        (workdir / "call.pkl").write_bytes(pickle.dumps(call))
        out, err, live = _streams(workdir)
        try:
            proc = subprocess.Popen(
                [sys.executable, "-m", _CHILD, str(workdir), str(os.getpid())],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                env=_child_env(),
                start_new_session=True,
            )
        finally:
            if not live:
                out.close()
                err.close()
        _wait(proc, deadline_s, label, deadline_text)
        return _outcome(workdir, proc.returncode, label, live)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _wait(proc, deadline_s: float, label: str, deadline_text: str | None) -> None:
    """Waits for the child; kills it and everything below it at the deadline or
    when this wait is interrupted (SIGINT, SIGTERM), before the exception goes on."""
    try:
        proc.wait(timeout=deadline_s)
    except BaseException as err:
        kill_tree(proc.pid)  # not reaped yet: the pid is still the child's
        proc.wait()
        if isinstance(err, subprocess.TimeoutExpired):
            raise BadInput(
                f"{label}: stopped at the deadline of "
                f"{deadline_text or f'{deadline_s:g} s'} (still running)"
            ) from None
        raise
    finally:
        kill_group(proc.pid)  # grandchildren the call left behind in its group


def _outcome(workdir: Path, returncode: int, label: str, live: bool) -> Any:
    result = workdir / "result.pkl"
    if not result.exists():
        if returncode < 0:
            name = signal.Signals(-returncode).name
            raise BadInput(f"{label}: the process running it died ({name})")
        raise BadInput(f"{label}: exited with status {returncode} and no result")
    try:
        kind, payload = _SafeUnpickler(io.BytesIO(result.read_bytes())).load()
    except Exception as err:
        raise RuntimeError(f"{label}: the result cannot be read back: {err}") from err
    if kind == "ok":
        if not live:
            _forward(workdir)
        return payload
    if kind == "internal":
        raise RuntimeError(payload)
    raise BadInput(payload)

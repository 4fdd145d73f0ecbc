"""jemalloc for the experiment processes, where the machine has it.

An experiment's probe allocates and frees float64 temporaries of hundreds of MB
(``[rows, tokens, V]`` logits and their softmax) many times per step. glibc's malloc
serves every allocation above 32 MB with a fresh ``mmap`` and returns it with
``munmap`` on free, so each one is page-faulted and zeroed by the kernel again: on
two seeds of the default sign-agreement run about a sixth of the process's CPU time
was system time (89 of 493 CPU-s). jemalloc with ``dirty_decay_ms:-1`` and
``muzzy_decay_ms:-1`` never returns freed pages to the system, so the next
temporary of that size reuses them without a fault (the same two seeds: 14 s of
system time, 223 s wall instead of 271 s). What it costs is memory: the process
keeps the most it ever held (peak RSS 7.0 GB instead of 6.2 GB on those seeds).
Measured and not taken: jemalloc's default decay (it purges freed pages gradually
from the moment they are freed, and allocations of 8 MB and more at once), and
``oversize_threshold:0`` with one arena: both kept the system time of glibc. The
allocator does not enter any computed number: XLA aligns its buffers itself (tested
on two seeds of the default run: the same results and rollouts, bit for bit,
with either).

Between units the run loop calls :func:`release`, which purges jemalloc's arenas:
the freed pages go back to the system once per unit (each unit's first temporaries
fault their pages again), so what the process keeps is one unit's most, not the
most of every unit before it.

``python -m experiments.<name>`` re-executes itself once with ``LD_PRELOAD`` set
(:func:`environment`) when the dynamic loader finds ``libjemalloc.so`` (Debian and
Ubuntu: ``apt install libjemalloc2``) and it is not loaded yet;
``THEORYCHECK_ALLOCATOR=system`` keeps the system allocator. Every results file names
the allocator its process ran with (:func:`loaded`).
"""

from __future__ import annotations

import ctypes.util
import os
import sys

#: jemalloc's settings for these processes (the module docstring)
MALLOC_CONF = "dirty_decay_ms:-1,muzzy_decay_ms:-1"
#: the environment variable that chooses: "jemalloc" (the default) or "system"
CHOICE = "THEORYCHECK_ALLOCATOR"
#: set in the re-executed process (never a second re-execution)
_DONE = "THEORYCHECK_ALLOCATOR_PRELOADED"


def loaded() -> str:
    """``"jemalloc"`` when this process has jemalloc mapped, else ``"system"``."""
    try:
        with open("/proc/self/maps") as f:
            return "jemalloc" if "jemalloc" in f.read() else "system"
    except OSError:  # not Linux: no preload either
        return "system"


def environment(environ, library: str | None) -> dict | None:
    """The environment to re-execute with, or None to run as is: none when the
    choice is ``system``, when ``library`` (the loader's name of libjemalloc, None
    when the machine has none) is None, or when this process is the re-executed one
    (never a loop, even where the preload failed)."""
    choice = environ.get(CHOICE, "")
    if choice not in ("", "jemalloc", "system"):
        from theorycheck._errors import BadInput

        raise BadInput(f"{CHOICE}={choice!r} must be jemalloc or system")
    if choice == "system" or library is None or environ.get(_DONE):
        return None
    env = dict(environ)
    env[_DONE] = "1"
    env["LD_PRELOAD"] = " ".join(p for p in (library, environ.get("LD_PRELOAD")) if p)
    env.setdefault("MALLOC_CONF", MALLOC_CONF)
    return env


def reexec(module: str) -> None:
    """Re-executes ``python -m module`` with jemalloc preloaded when
    :func:`environment` says so (this process is replaced); returns otherwise."""
    if sys.platform != "linux" or loaded() == "jemalloc":
        return
    env = environment(os.environ, ctypes.util.find_library("jemalloc"))
    if env is not None:
        sys.stdout.flush()
        sys.stderr.flush()
        os.execve(sys.executable, [sys.executable, "-m", module, *sys.argv[1:]], env)


#: jemalloc's MALLCTL_ARENAS_ALL: ``arena.<i>.purge`` with it purges every arena
_ALL_ARENAS = 4096


def release() -> bool:
    """Returns the pages jemalloc holds freed to the system: this thread's cache is
    flushed, then every arena's dirty and muzzy pages are purged
    (``mallctl("arena.4096.purge")``). True when done; False, doing nothing, when
    the process runs another allocator (no ``mallctl`` symbol)."""
    mallctl = getattr(ctypes.CDLL(None), "mallctl", None)
    if mallctl is None:
        return False
    mallctl.argtypes = [ctypes.c_char_p, *[ctypes.c_void_p] * 3, ctypes.c_size_t]
    mallctl.restype = ctypes.c_int
    flushed = mallctl(b"thread.tcache.flush", None, None, None, 0)
    purged = mallctl(f"arena.{_ALL_ARENAS}.purge".encode(), None, None, None, 0)
    return flushed == 0 and purged == 0

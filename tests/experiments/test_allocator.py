"""jemalloc preloaded for ``python -m experiments.<name>`` where the machine has it:
the environment it re-executes with, the choice, the loop guard, bad input, and the
allocator each results file names."""

import ctypes.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from experiments.runner import allocator as _allocator
from theorycheck._errors import BadInput

ROOT = Path(__file__).resolve().parents[2]


def test_the_re_execution_preloads_jemalloc_with_its_settings():
    env = _allocator.environment({"PATH": "/bin"}, "libjemalloc.so.2")
    assert env["LD_PRELOAD"] == "libjemalloc.so.2"
    assert env["MALLOC_CONF"] == _allocator.MALLOC_CONF
    assert env["PATH"] == "/bin" and env[_allocator._DONE] == "1"


def test_a_user_preload_and_malloc_conf_are_kept():
    env = _allocator.environment(
        {"LD_PRELOAD": "libmine.so", "MALLOC_CONF": "narenas:2"}, "libjemalloc.so.2"
    )
    assert env["LD_PRELOAD"] == "libjemalloc.so.2 libmine.so"
    assert env["MALLOC_CONF"] == "narenas:2"


@pytest.mark.parametrize(
    "environ, library",
    [
        ({_allocator.CHOICE: "system"}, "libjemalloc.so.2"),  # chosen off
        ({}, None),  # no jemalloc on the machine
        ({_allocator._DONE: "1"}, "libjemalloc.so.2"),  # re-executed already
    ],
)
def test_no_re_execution(environ, library):
    assert _allocator.environment(environ, library) is None


def test_a_bad_choice_is_bad_input():
    with pytest.raises(BadInput, match="'tcmalloc' must be jemalloc or system"):
        _allocator.environment({_allocator.CHOICE: "tcmalloc"}, None)


def _clean(environ):
    """The environment without a preload or an allocator choice of its own."""
    drop = {"LD_PRELOAD", "MALLOC_CONF", _allocator.CHOICE, _allocator._DONE}
    return {k: v for k, v in environ.items() if k not in drop}


def _provenance_allocator(tmp_path, **env):
    out = tmp_path / env.get(_allocator.CHOICE, "default")
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "experiments.rollout_analysis",
            "--tiny",
            "--seeds",
            "1",
            "--report-only",
            "--out",
            str(out),
        ],
        cwd=ROOT,
        env={**_clean(os.environ), "PYTHONPATH": str(ROOT), **env},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    data = json.loads((out / "results.json").read_text())
    return data["provenance"]["allocator"]


@pytest.mark.skipif(sys.platform != "linux", reason="LD_PRELOAD and /proc: Linux")
def test_the_command_line_runs_with_jemalloc_where_the_machine_has_it(tmp_path):
    have = ctypes.util.find_library("jemalloc") is not None
    assert _provenance_allocator(tmp_path) == ("jemalloc" if have else "system")
    chosen = _provenance_allocator(tmp_path, THEORYCHECK_ALLOCATOR="system")
    assert chosen == "system"


def test_release_does_nothing_under_the_system_allocator():
    if _allocator.loaded() == "jemalloc":
        pytest.skip("this process runs jemalloc")
    assert _allocator.release() is False


_HELD = """
import numpy as np
from experiments.runner import allocator as _allocator

def rss_mb():
    with open("/proc/self/status") as f:
        line = next(x for x in f if x.startswith("VmRSS"))
    return int(line.split()[1]) // 1024

held = [np.ones(25_000_000) for _ in range(4)]  # 800 MB
del held
kept = rss_mb()
done = _allocator.release()
print(kept, rss_mb(), done)
"""


@pytest.mark.skipif(
    sys.platform != "linux" or ctypes.util.find_library("jemalloc") is None,
    reason="needs libjemalloc (Linux)",
)
def test_release_returns_the_pages_jemalloc_kept():
    """With decay off jemalloc keeps 800 MB of freed arrays; release() gives them
    back to the system."""
    run = subprocess.run(
        [sys.executable, "-c", _HELD],
        cwd=ROOT,
        env={
            **_clean(os.environ),
            "PYTHONPATH": str(ROOT),
            **_allocator.environment({}, ctypes.util.find_library("jemalloc")),
        },
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    kept, after, done = run.stdout.split()
    assert done == "True"
    assert int(kept) > 700, run.stdout  # freed, and still resident
    assert int(after) < int(kept) - 700, run.stdout

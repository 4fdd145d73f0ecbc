"""Two local CPU processes (two devices each) on 127.0.0.1 run the tiny sign-agreement
experiment with ``--distributed``: killed after the first saved round and restarted,
they end with the units of a single-process run of the same config; only process 0
writes; the unit assignment and the broadcast decision of what is left."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from experiments import _distributed

ROOT = Path(__file__).resolve().parents[2]
ARGS = ["--tiny", "--grid", "base,sgd,adam_no_momentum", "--seeds", "1"]
ARGS += ["--masks", "none"]
UNITS = 3  # two rounds on two processes


def _env(cache: Path):
    env = dict(os.environ)
    env.update(
        # the runs of this test share compiled programs (compile dominates tiny runs)
        JAX_COMPILATION_CACHE_DIR=str(cache),
        JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
        PYTHONPATH=os.pathsep.join([str(ROOT), *sys.path]),
        XLA_FLAGS="--xla_force_host_platform_device_count=2",
        JAX_PLATFORMS="cpu",
        THEORYCHECK_PROGRESS="0",
    )
    return env


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _launch(out: Path, processes: int = 2) -> list[subprocess.Popen]:
    cmd = [sys.executable, "-m", "experiments.sign_agreement", *ARGS, "--out", str(out)]
    env = _env(out.parent / "jax_cache")
    if processes == 1:
        return [subprocess.Popen(cmd, cwd=ROOT, env=env, stderr=subprocess.PIPE)]
    port = _port()
    flags = ["--distributed", "--coordinator", f"127.0.0.1:{port}"]
    flags += ["--num-processes", str(processes)]
    return [
        subprocess.Popen(
            [*cmd, *flags, "--process-id", str(i)],
            cwd=ROOT,
            env=env,
            stderr=subprocess.PIPE,
        )
        for i in range(processes)
    ]


def _wait(procs, timeout=1800):
    for p in procs:
        _, err = p.communicate(timeout=timeout)
        assert p.returncode == 0, err.decode()[-3000:]


def _units(out: Path) -> dict:
    path = out / "results.json"
    return json.loads(path.read_text())["units"] if path.exists() else {}


def test_two_processes_killed_and_resumed_equal_one_process(tmp_path):
    single, dist = tmp_path / "single", tmp_path / "dist"
    procs = _launch(dist)
    deadline = time.time() + 1800  # minutes on a quiet machine; more under load
    while not _units(dist) and time.time() < deadline:
        if any(p.poll() is not None for p in procs):
            break
        time.sleep(0.05)
    for p in procs:  # kill as soon as the first round is saved
        if p.poll() is None:
            p.send_signal(signal.SIGKILL)
        p.communicate()
    saved = _units(dist)
    assert 0 < len(saved) < UNITS, f"kill came too late or too early: {list(saved)}"
    one = _launch(single, processes=1)  # the reference, while the resume runs
    _wait(_launch(dist))
    _wait(one)
    got, want = _units(dist), _units(single)
    assert sorted(got) == sorted(want) and len(want) == UNITS
    for unit in want:
        assert got[unit] == want[unit], unit
    assert (dist / "report.md").exists()
    # only process 0 wrote: one results file, no temporary files of a second writer
    assert sorted(p.name for p in dist.iterdir() if p.suffix == ".json") == [
        "results.json",
        "timings.json",
    ]


def test_rounds_assign_units_by_process_index():
    todo = [f"u{i}" for i in range(5)]
    for index in range(2):
        ctx = _distributed.Context(index=index, count=2)
        rounds = _distributed.assign(todo, ctx)
        assert [r[index] for r in rounds] == todo[index::2] + [None] * (index == 1)
    assert _distributed.assign(todo, _distributed.Context()) == [[u] for u in todo]


def test_one_process_decides_from_its_own_store():
    ctx = _distributed.Context()
    done = {"a"}.__contains__
    assert _distributed.broadcast_todo(["a", "b"], done, ctx) == ["b"]
    assert _distributed.gather({"x": 1}, ctx) == [{"x": 1}]


def test_process_flags_need_distributed():
    import argparse

    from theorycheck._errors import BadInput

    p = argparse.ArgumentParser()
    _distributed.add_flags(p)
    with pytest.raises(BadInput, match="--process-id needs --distributed"):
        _distributed.from_args(p.parse_args(["--process-id", "1"]))
    assert _distributed.from_args(p.parse_args([])).count == 1

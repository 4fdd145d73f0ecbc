"""``--distributed`` on two local CPU processes (two devices each) on 127.0.0.1.

The tiny rollout-analysis experiment, four seeds (four units), over two processes:
killed (SIGKILL: process 0 kills itself as it starts its second unit, so that
exactly the first round is saved, and the test kills process 1 then), then
restarted; then the same command in one process. The restarted run ends with the
single-process run's units, number for number, the same recorded rollouts (so it
replays as the single-process run does) and the same per-unit files; only process
0 wrote. The runs share a compilation cache: the killed run compiles (process 0 for
device 0, which the single-process run reuses, process 1 for its own devices), the
others mostly read it. Also: the rounds by process index, process
0's decision, the flags' bad input (exit 2, before any connection).
"""

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from experiments import rollout_analysis
from experiments.runner import distributed as _distributed
from theorycheck._errors import BadInput

ROOT = Path(__file__).resolve().parents[2]
SEEDS = 4  # two rounds on two processes: the kill falls between them
ARGS = ["--tiny", "--seeds", str(SEEDS)]

#: runs the experiment; with KILL_AT=n the process SIGKILLs itself as it starts its
#: n-th unit (no clean-up: a kill from outside, at a known point of the run)
RUNNER = """
import os, signal, sys
from experiments import rollout_analysis as exp
at, calls, unit = int(os.environ.get("KILL_AT", "0")), [0], exp.run_unit
def run_unit(*args):
    calls[0] += 1
    if calls[0] == at:
        os.kill(os.getpid(), signal.SIGKILL)
    return unit(*args)
exp.run_unit = run_unit
sys.exit(exp.main(sys.argv[1:]))
"""


DEVICES_FLAG = "--xla_force_host_platform_device_count=2"


def _env(cache: Path, kill_at: int = 0) -> dict:
    env = dict(os.environ)
    env.update(
        # the runs share compiled programs (compilation dominates a tiny run)
        JAX_COMPILATION_CACHE_DIR=str(cache),
        JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
        PYTHONPATH=os.pathsep.join([str(ROOT), *sys.path]),
        # two devices per process, after the suite's own flags (its compile level)
        XLA_FLAGS=" ".join(
            [*os.environ.get("XLA_FLAGS", "").split(), DEVICES_FLAG]
        ).strip(),
        JAX_PLATFORMS="cpu",
        THEORYCHECK_PROGRESS="0",
        KILL_AT=str(kill_at),
    )
    return env


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _launch(out: Path, processes: int, kill_at: int = 0) -> list[subprocess.Popen]:
    """The experiment on ``processes`` local processes; ``kill_at``: process 0
    kills itself as it starts its ``kill_at``-th unit."""
    cmd = [sys.executable, "-c", RUNNER, *ARGS, "--out", str(out)]
    cache = out.parent / "jax_cache"
    run = lambda argv, i=0: subprocess.Popen(  # noqa: E731
        argv,
        cwd=ROOT,
        env=_env(cache, kill_at if i == 0 else 0),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    if processes == 1:
        return [run(cmd)]
    flags = ["--distributed", "--coordinator", f"127.0.0.1:{_port()}"]
    flags += ["--num-processes", str(processes)]
    return [run([*cmd, *flags, "--process-id", str(i)], i) for i in range(processes)]


def _wait(procs, timeout=1200) -> list[int]:
    codes = []
    for p in procs:
        out, err = p.communicate(timeout=timeout)
        codes.append(p.returncode)
        p.stdout_text, p.stderr_text = out.decode(), err.decode()
    return codes


def _ok(procs) -> None:
    codes = _wait(procs)
    assert codes == [0] * len(procs), [p.stderr_text[-3000:] for p in procs]


def _units(out: Path) -> dict:
    path = out / "results.json"
    return json.loads(path.read_text())["units"] if path.exists() else {}


def _arrays(path: Path) -> dict:
    with np.load(path) as z:
        return {k: z[k] for k in z.files}


def _same_arrays(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(
        a[k].dtype == b[k].dtype and np.array_equal(a[k], b[k]) for k in a
    )


@pytest.mark.slow  # five processes of the tiny model, compilation shared
def test_two_processes_killed_and_resumed_equal_one_process(tmp_path):
    single, dist = tmp_path / "single", tmp_path / "dist"
    # process 0 kills itself as it starts its second unit (round 1 is saved); then
    # process 1, which waits for it or computes its second unit, is killed too
    first = _launch(dist, 2, kill_at=2)
    assert _wait(first[:1]) == [-signal.SIGKILL], first[0].stderr_text[-3000:]
    first[1].kill()
    first[1].communicate()
    saved = _units(dist)
    assert sorted(saved) == ["seed0", "seed1"], sorted(saved)
    # every seed's rollouts were generated (by one process each) and recorded by
    # process 0 before the units; the units of round 1 wrote their files
    assert {p.name for p in dist.glob("batch_seed*.npz")} == {
        "batch_seed0.npz",
        "batch_seed1.npz",
    }
    resumed = _launch(dist, 2)
    _ok(resumed)
    _ok(_launch(single, 1))
    got, want = _units(dist), _units(single)
    assert sorted(want) == [f"seed{s}" for s in range(SEEDS)]
    assert sorted(got) == sorted(want)
    for unit in want:
        assert got[unit] == want[unit], unit
    for s in range(SEEDS):  # the units' own files, from both processes
        name = f"batch_seed{s}.npz"
        assert _same_arrays(_arrays(dist / name), _arrays(single / name)), name
    # the recorded rollouts: the batches a replay reads are the single run's
    recorded = [_arrays(d / "rollouts.npz") for d in (dist, single)]
    assert _same_arrays(*recorded)
    # the resumed run computed the last two units, one on each process
    data = json.loads((dist / "results.json").read_text())
    assert [(r["units"], r["processes"]) for r in data["runs"]] == [(2, 2)]
    assert data["missing_units"] == []
    assert (dist / "report.md").exists()
    assert resumed[0].stdout_text.strip().endswith("report.md")
    assert "report.md" not in resumed[1].stdout_text  # process 1 writes nothing
    # process 0 alone wrote: no temporary file of a second writer is left
    assert not [p.name for p in dist.iterdir() if ".tmp" in p.name]


def test_rounds_assign_units_by_process_index():
    todo = [f"u{i}" for i in range(5)]
    for index in range(2):
        ctx = _distributed.Processes(index=index, count=2)
        rounds = _distributed.assign(todo, ctx)
        assert [r[index] for r in rounds] == todo[index::2] + [None] * (index == 1)
    assert _distributed.assign(todo, _distributed.Processes()) == [[u] for u in todo]
    assert _distributed.assign([], _distributed.Processes(index=0, count=3)) == []


def test_one_process_decides_from_its_own_store():
    ctx = _distributed.Processes()
    done = {"a"}.__contains__
    assert _distributed.decide(["a", "b", "c"], done, ctx=ctx) == ["b", "c"]
    with pytest.raises(BadInput, match="holds a run with another"):
        _distributed.decide(["a"], done, "x holds a run with another config", ctx)
    assert _distributed.gather({"x": 1}, ctx) == [{"x": 1}]
    assert _distributed.broadcast_bytes(b"ab", ctx) == b"ab"
    assert _distributed.gather_bytes(b"ab", ctx) == [b"ab"]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--process-id", "1"], "--process-id needs --distributed"),
        (["--coordinator", "h:1"], "--coordinator needs --distributed"),
        (["--distributed", "--num-processes", "0"], "--num-processes 0 must be"),
        (
            ["--distributed", "--num-processes", "2", "--process-id", "2"],
            "--process-id 2 is outside [0, 2)",
        ),
        (["--distributed", "--coordinator", "nohost"], "'nohost' is not host:port"),
        (["--distributed", "--replay", "x"], "--replay runs in one process"),
    ],
)
def test_bad_distributed_flags_exit_2_before_connecting(argv, message, capsys):
    assert rollout_analysis.main(["--tiny", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1, err
    assert _distributed.context().count == 1  # nothing connected

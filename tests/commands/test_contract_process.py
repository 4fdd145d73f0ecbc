"""The error contract as the user meets it: the real CLI in a subprocess.

Classes: bounded configs (depth, size, alias and interpolation expansion, NaN),
numbers out of range, unusable paths, the environment (locale, ``JAX_PLATFORMS``,
``XLA_FLAGS``, a module shadowing a dependency), signals (130/143, one line, no
traceback, no orphan) and an answer that cannot be written (stdout closed, full).
Each case checks: the exit status, ONE stderr line on exit 2 naming the cause, no
traceback, and a bound on the time it took.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from theorycheck._isolation import descendants

ROOT = Path(__file__).resolve().parents[2]
#: a case slower than this is a hang (generous: shared CPUs, JAX's import).
BOUND_S = 60.0
COEFFICIENT = ["coefficient", "ppo", "--p", "0.5", "--q", "0.4", "--adv", "1"]


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("JAX_PLATFORMS",)}
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p
    )
    env.update(extra)
    return env


def _cli(args, *, cwd=None, env=None, stdout=subprocess.PIPE):
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "theorycheck", *map(str, args)],
        cwd=cwd,
        env=env or _env(),
        stdin=subprocess.DEVNULL,
        stdout=stdout,
        stderr=subprocess.PIPE,
        timeout=BOUND_S,
    )
    err = proc.stderr.decode("utf-8", "replace")
    out = proc.stdout.decode("utf-8", "replace") if proc.stdout else ""
    assert "Traceback" not in err, err
    assert time.monotonic() - start < BOUND_S
    return proc.returncode, out, err


def _refused(args, *names, **kw) -> str:
    code, out, err = _cli(args, **kw)
    assert code == 2, (code, err)
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("theorycheck"), err
    assert all(n in err for n in names), (names, err)
    return err


CONFIGS = {
    "deep_yaml_flow_list": ("deep.yaml", "a: " + "[" * 5000 + "]" * 5000, "nested"),
    "deep_json_list": (
        "deep.json",
        '{"a": ' + "[" * 100_000 + "]" * 100_000 + "}",
        "nested",
    ),
    "deep_block_yaml": (
        "block.yaml",
        "".join("  " * i + f"k{i}:\n" for i in range(80)) + "  " * 80 + "v: 1\n",
        "nested",
    ),
    "alias_bomb": (
        "bomb.yaml",
        "a0: &a0 [x, x, x, x, x, x, x, x, x]\n"
        + "".join(
            f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]\n" for i in range(1, 10)
        ),
        "aliases",
    ),
    "interpolation_bomb": (
        "interp.yaml",
        "b0: abcdefghij\n"
        + "".join(
            f"b{i}: ${{b{i - 1}}}${{b{i - 1}}}${{b{i - 1}}}\n" for i in range(1, 20)
        ),
        "interpolations",
    ),
    "eight_megabytes": ("big.yaml", "k: " + "x" * (8 << 20) + "\n", "bytes"),
    "nan_leaf": (
        "nan.yaml",
        "algorithm:\n  adv_estimator: grpo\nactor_rollout_ref:\n  actor:\n"
        "    clip_ratio: .nan\n",
        "clip_ratio",
    ),
    "infinite_number": ("inf.yaml", "loss_type: grpo\nepsilon: .inf\n", "epsilon"),
    "json_nan": ("nan.json", '{"loss_type": "grpo", "epsilon": NaN}', "epsilon"),
}


@pytest.mark.parametrize("case", sorted(CONFIGS))
def test_configs_past_a_limit_are_refused_in_one_line(tmp_path, case):
    name, text, said = CONFIGS[case]
    (tmp_path / name).write_text(text)
    _refused(["conventions", "--config", name], said, cwd=tmp_path)


def test_a_deep_batch_is_refused(tmp_path):
    (tmp_path / "b.json").write_text('{"p": ' + "[" * 100_000 + "]" * 100_000 + "}")
    _refused(["audit", "b.json"], "b.json", cwd=tmp_path)


@pytest.mark.parametrize("value", ["1e300", "3e9", "-1e300"])
def test_whole_numbers_out_of_range_are_refused_before_jax(value):
    args = [*COEFFICIENT, "--set", f"length={value}"]
    args[1] = "gspo"
    _refused(args, "length")


def test_unusable_paths_are_one_line(tmp_path):
    (tmp_path / "loop1").symlink_to("loop2")
    (tmp_path / "loop2").symlink_to("loop1")
    long = "x" * 300
    for flag, value in [
        ("--report", long),
        ("--report", "loop1"),
        ("--report", "loop1/a"),
    ]:
        _refused(["convexity", "ppo", flag, value], "--report", cwd=tmp_path)
    _refused(["reproduce", "--quick", "--out", "loop1/a"], "--out", cwd=tmp_path)


def test_output_is_safe_under_any_locale():
    env = _env(PYTHONIOENCODING="ascii", LANG="C", LC_ALL="C")
    code, out, err = _cli(["coefficient", "ppo\u00e9", "--p", "0.5"], env=env)
    assert code == 2 and len(err.splitlines()) == 1
    code, out, _ = _cli(COEFFICIENT, env=env)
    assert code == 0 and out


@pytest.mark.parametrize(
    "key, value",
    [("JAX_PLATFORMS", "cuda,nosuchplatform"), ("XLA_FLAGS", "--no_such_xla_flag=1")],
)
def test_a_jax_environment_that_cannot_start_is_named(key, value):
    _refused(COEFFICIENT, key, env=_env(**{key: value}))


@pytest.mark.parametrize("module", ["jax.py", "numpy.py"])
def test_a_module_shadowing_a_dependency_is_named(tmp_path, module):
    (tmp_path / module).write_text("raise RuntimeError('not the real one')\n")
    (tmp_path / "mine.py").write_text("def loss(logits, k):\n    return -logits[k]\n")
    _refused(["convexity", "mine.py:loss"], module, cwd=tmp_path)


def test_an_answer_that_cannot_be_written_is_not_exit_0():
    with open("/dev/full", "wb") as full:
        code, _, err = _cli([*COEFFICIENT, "--json"], stdout=full)
    assert code != 0 and len(err.splitlines()) == 1 and "stdout" in err
    # stdout closed by a shell (a preexec_fn would fork this multithreaded process)
    closed = subprocess.run(
        ["sh", "-c", 'exec "$@" >&-', "sh", sys.executable, "-m", "theorycheck"]
        + COEFFICIENT,
        env=_env(),
        stderr=subprocess.PIPE,
        timeout=BOUND_S,
    )
    assert closed.returncode != 0 and b"stdout" in closed.stderr
    assert b"Traceback" not in closed.stderr


SLEEPY = textwrap.dedent(
    """
    import subprocess, sys, time
    subprocess.Popen(["sleep", "300"], start_new_session=True)
    subprocess.Popen(["sh", "-c", "setsid sleep 301 & sleep 302"])
    open("started", "w").write("yes")
    time.sleep(300)

    def loss(logits, k):
        return -logits[k]
    """
)


def _start_sleepy(tmp_path):
    (tmp_path / "sleepy.py").write_text(SLEEPY)
    proc = subprocess.Popen(
        [sys.executable, "-m", "theorycheck", "convexity", "sleepy.py:loss"],
        cwd=tmp_path,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    for _ in range(600):  # the loss's module is running in the isolated child
        if (tmp_path / "started").exists():
            break
        time.sleep(0.1)
    else:
        proc.kill()
        pytest.fail("the isolated child never started")
    time.sleep(0.5)  # its children are started
    below = descendants(proc.pid)
    assert len(below) >= 4, below  # the child, its sleeps, the shell
    return proc, below


def _all_gone(pids, within=10.0):
    end = time.monotonic() + within
    alive = list(pids)
    while alive and time.monotonic() < end:
        alive = [p for p in alive if _alive(p)]
        time.sleep(0.1)
    return alive


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.slow
@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_ends_the_run_in_one_line_and_leaves_no_orphan(tmp_path, sig, code):
    proc, below = _start_sleepy(tmp_path)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=BOUND_S)
    assert proc.returncode == code, err
    text = err.decode()
    assert "Traceback" not in text and len(text.splitlines()) == 1, text
    assert signal.Signals(sig).name in text
    assert _all_gone(below) == []


@pytest.mark.slow
def test_a_killed_parent_leaves_no_orphan(tmp_path):
    proc, below = _start_sleepy(tmp_path)
    proc.kill()
    proc.communicate(timeout=BOUND_S)
    assert _all_gone(below) == []

"""``commands._isolate``: user code in a child process, stopped at its deadline, its
output kept off stdout, every way out of it (exit, exception, signal) one BadInput."""

from __future__ import annotations

import operator
import os
import textwrap
import time

import pytest

from tests.commands._isolate_targets import call_file
from theorycheck._errors import BadInput
from theorycheck.commands import _isolate
from theorycheck.commands._isolate import caller_for, run_isolated, user_file

USER = textwrap.dedent(
    """
    import os, subprocess, sys, time
    import jax
    import jax.numpy as jnp

    def spin():
        while True:
            pass

    def nap():
        time.sleep(1000)

    def xla_loop():
        body = lambda v: v + 1.0
        f = jax.jit(lambda x: jax.lax.while_loop(lambda v: v == v, body, x))
        return float(f(jnp.float32(0.0)))

    def with_child(pidfile):
        proc = subprocess.Popen(["sleep", "1000"])
        open(pidfile, "w").write(str(proc.pid))
        while True:
            pass

    def chatty():
        print("from the user's print")
        print("to stderr too", file=sys.stderr)
        return 42

    def leave(code):
        sys.exit(code)

    def hard_exit():
        os._exit(5)

    def broken():
        return [1, 2][5]

    def give_function():
        return chatty

    def give_record():
        return {"loss": chatty, "name": "chatty", "v": [1.5]}
    """
)


@pytest.fixture()
def user(tmp_path):
    path = tmp_path / "user.py"
    path.write_text(USER)
    return path


def _run(user, func, *args, deadline=60.0, marker=None):
    return run_isolated(
        call_file,
        str(user),
        func,
        None if marker is None else str(marker),
        *args,
        deadline_s=deadline,
        label=f"user.py:{func}",
        user_files=[user],
    )


def test_value_comes_back_and_prints_go_to_stderr(user, capsys):
    assert _run(user, "chatty") == 42
    out, err = capsys.readouterr()
    assert out == ""
    assert "from the user's print" in err and "to stderr too" in err


@pytest.mark.parametrize("func", ["spin", "nap", "xla_loop"])
def test_endless_calls_are_stopped_at_the_deadline(user, tmp_path, func):
    marker = tmp_path / "marker"
    start = time.monotonic()
    with pytest.raises(BadInput, match="stopped at the deadline of 3 s"):
        _run(user, func, deadline=3.0, marker=marker)
    assert time.monotonic() - start < 3.0 + 2.0
    assert marker.read_text() == "calling"  # the loop itself was reached


def test_a_module_level_loop_is_stopped(tmp_path):
    path = tmp_path / "looping.py"
    path.write_text("while True:\n    pass\n")
    marker = tmp_path / "marker"
    with pytest.raises(BadInput, match="stopped at the deadline"):
        _run(path, "loss", deadline=3.0, marker=marker)
    assert marker.read_text() == "loading"


def test_grandchildren_are_killed_with_the_child(user, tmp_path):
    pidfile = tmp_path / "pid"
    with pytest.raises(BadInput, match="deadline"):
        _run(user, "with_child", str(pidfile), deadline=3.0)
    pid = int(pidfile.read_text())
    for _ in range(50):  # reaped by init shortly after the kill
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        with open(f"/proc/{pid}/stat") as fh:  # a zombie is dead too
            if fh.read().split()[2] == "Z":
                break
        time.sleep(0.1)
    else:
        pytest.fail(f"grandchild {pid} still alive")


@pytest.mark.parametrize("code", [0, 3, "bye"])
def test_sys_exit_is_bad_input(user, code):
    with pytest.raises(BadInput, match=r"called sys\.exit\(" + repr(code)):
        _run(user, "leave", code)


def test_os_exit_is_bad_input(user):
    with pytest.raises(BadInput, match="exited with status 5 and no result"):
        _run(user, "hard_exit")


def test_an_exception_names_the_user_frame(user, capsys):
    with pytest.raises(BadInput) as err:
        _run(user, "broken")
    message = str(err.value)
    assert "IndexError: list index out of range" in message
    assert "(in broken at user.py:" in message and "\n" not in message
    assert capsys.readouterr().err == ""  # the failed child's output is dropped


def test_user_code_in_a_result_comes_back_as_none(user):
    assert _run(user, "give_function") is None
    assert _run(user, "give_record") == {"loss": None, "name": "chatty", "v": [1.5]}


@pytest.mark.parametrize("deadline", [0.0, -1.0, float("nan"), float("inf")])
def test_a_bad_deadline_is_refused_before_anything_runs(deadline):
    with pytest.raises(BadInput, match="deadline"):
        run_isolated(operator.add, 1, 2, deadline_s=deadline, label="add")


def test_caller_for_runs_registered_names_in_process_and_files_isolated(user):
    assert caller_for("ppo", 1.0)(operator.add, 1, 2) == 3
    assert user_file(f"{user}:chatty") == user
    assert caller_for(f"{user}:chatty", 1.0)(operator.add, 2, 2) == 4
    with pytest.raises(BadInput, match="does not exist"):
        caller_for("missing/file.py:loss", 1.0)
    for bad in (0.0, float("nan"), float("inf"), 1e308):
        with pytest.raises(BadInput, match="--timeout"):
            caller_for("ppo", bad)


def test_caller_for_deadline_follows_the_timeout(user, monkeypatch):
    monkeypatch.setattr(_isolate, "DEADLINE_BASE_S", 2.0)
    monkeypatch.setattr(_isolate, "DEADLINE_PER_TIMEOUT", 5.0)
    call = caller_for(f"{user}:spin", 0.1)
    with pytest.raises(BadInput, match=r"2\.5 s \(= 2 \+ 5 x --timeout 0\.1\)"):
        call(call_file, str(user), "spin")

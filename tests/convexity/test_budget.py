"""The symbolic stages run under a wall-clock budget tied to --timeout."""

from __future__ import annotations

import json
import math
import os
import threading
import time

import pytest

from theorycheck.cli import main
from theorycheck.convexity._budget import (
    StageTimeout,
    run_in_process,
    run_within,
    submit_in_process,
)


def test_run_within_returns_raises_and_interrupts():
    assert run_within(5.0, lambda a, b=0: a + b, 1, b=2) == 3
    with pytest.raises(ZeroDivisionError):
        run_within(5.0, lambda: 1 / 0)
    stopped = threading.Event()

    def endless():
        try:
            while True:
                sum(range(100))
        finally:
            stopped.set()

    start = time.monotonic()
    with pytest.raises(StageTimeout):
        run_within(0.2, endless)
    assert time.monotonic() - start < 2.0
    assert stopped.wait(2.0)  # the abandoned worker was interrupted, not left running


def test_run_in_process_returns_raises_and_kills():
    assert run_in_process(60.0, math.factorial, 5) == 120
    with pytest.raises(ValueError):
        run_in_process(60.0, math.sqrt, -1.0)
    start = time.monotonic()
    with pytest.raises(StageTimeout):
        run_in_process(0.5, time.sleep, 60)  # killed, not waited for
    assert time.monotonic() - start < 30.0
    assert run_in_process(60.0, math.factorial, 6) == 720  # a fresh worker after a kill


def test_run_in_process_keeps_its_worker_between_calls():
    first = run_in_process(60.0, os.getpid)
    assert first != os.getpid()
    assert run_in_process(60.0, os.getpid) == first  # no new spawn per call
    with pytest.raises(StageTimeout):
        run_in_process(0.5, time.sleep, 60)
    assert run_in_process(60.0, os.getpid) not in {first, os.getpid()}


def test_submit_in_process_returns_at_once_and_keeps_the_hard_limit():
    start = time.monotonic()
    pending = submit_in_process(60.0, time.sleep, 1.0)
    assert time.monotonic() - start < 1.0  # the caller works while it runs
    value, seconds = pending.result()
    assert value is None and 1.0 <= seconds < 30.0  # measured in the worker
    with pytest.raises(StageTimeout):
        submit_in_process(0.5, time.sleep, 60).result()  # killed, not waited for
    pending = submit_in_process(60.0, math.sqrt, -1.0)
    with pytest.raises(ValueError):
        pending.result()
    pending = submit_in_process(60.0, time.sleep, 60)
    pending.cancel()  # the caller failed meanwhile: the worker is killed
    assert run_in_process(60.0, math.factorial, 5) == 120


def test_run_in_process_from_a_second_thread_gets_its_own_process():
    from theorycheck.convexity import _budget

    kept = run_in_process(60.0, os.getpid)
    with _budget._worker_lock:  # the kept worker is busy: the call spawns its own
        other = run_in_process(60.0, os.getpid)
    assert other not in {kept, os.getpid()}
    assert run_in_process(60.0, os.getpid) == kept


def test_sapo_negative_advantage_structure_times_out(capsys):
    # SymPy does not finish SAPO's transcendental margin (tau_neg = 21/20): with
    # --timeout 0.2 the symbolic stages stop after 1 s and the numeric search decides.
    argv = ["convexity", "sapo", "--set", "adv=-1", "--timeout", "0.2", "--json"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    methods = {m["method"]: m for m in out["methods"]}
    assert methods["structure"]["status"] == "unknown"
    assert "timed out" in methods["structure"]["detail"]
    assert "(1 s = 5 x --timeout)" in methods["structure"]["detail"]
    assert out["verdict"] in {"not_convex", "unknown"}
    if out["verdict"] == "not_convex":
        assert methods["numeric search"]["status"] == "refuted"
        assert out["counterexample"]["curvature"] < 0


def _collect(tag):
    """In the worker: the call's tag and pid, and its aside's outcome."""
    from theorycheck.convexity._budget import aside_result

    return tag, os.getpid(), aside_result()


def _aside_value(tag, wait=0.0, until=None):
    """``(tag, pid)`` after ``wait`` seconds, or once the file ``until`` exists."""
    time.sleep(wait)
    end = time.monotonic() + 60.0
    while until is not None and not os.path.exists(until) and time.monotonic() < end:
        time.sleep(0.01)
    return tag, os.getpid()


def _aside_fails():
    raise ValueError("the aside failed")


def _alive(pid) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:  # a zombie is not running
        return f.read().split(")")[1].split()[0] != "Z"


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="an aside needs a second core")
def test_an_aside_runs_in_the_helper_and_reaches_only_its_own_call(tmp_path):
    from theorycheck.convexity import _budget

    def run(tag, aside, fn=_collect):
        return submit_in_process(60.0, fn, tag, aside=aside).result()[0]

    tag, worker, (ok, (value, helper)) = run(1, (_aside_value, (1,)))
    assert (tag, ok, value) == (1, True, 1)
    assert len({worker, helper, os.getpid()}) == 3  # beside the call, not in it
    _, _, (ok, err) = run(2, (_aside_fails, ()))
    assert not ok and isinstance(err, ValueError)  # the call decides what it means
    # a call that does not collect its aside: the next call gets its own, whether
    # the helper had replied (kept; the stale reply is skipped) or not (killed)
    submit_in_process(60.0, time.sleep, 0.5, aside=(_aside_value, (3,))).result()
    assert run(4, (_aside_value, (4,)))[2][1][0] == 4
    # one still at work when the call returns finishes it (its reply dropped) and
    # takes no new aside until then: the next call does its work itself
    release = tmp_path / "release"
    aside = (_aside_value, (5, 0.0, str(release)))
    submit_in_process(60.0, time.sleep, 0.05, aside=aside).result()
    busy = _budget._helper.proc.pid
    assert run(6, (_aside_value, (6,)))[2] is None
    release.touch()
    end = time.monotonic() + 30.0
    while _budget._draining is not None and _budget._draining.is_alive():
        assert time.monotonic() < end
        time.sleep(0.01)
    tag, _, (ok, (value, same)) = run(7, (_aside_value, (7,)))
    assert (tag, ok, value, same) == (7, True, 7, busy)  # kept, and its own reply
    # past the ended call's limit, a helper still at its aside is killed
    submit_in_process(1.0, time.sleep, 0.05, aside=(_aside_value, (8, 60))).result()
    time.sleep(1.0)
    tag, _, (ok, (value, fresh)) = run(9, (_aside_value, (9,)))
    assert (tag, ok, value) == (9, True, 9) and fresh != busy and not _alive(busy)
    assert run(10, None)[2] is None  # no aside: the call does the work itself


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="an aside needs a second core")
def test_the_hard_limit_kills_the_helper_with_the_worker():
    from theorycheck.convexity import _budget

    pending = submit_in_process(1.0, _collect, 0, aside=(_aside_value, (0, 60)))
    helper, worker = _budget._helper.proc.pid, _budget._worker.proc.pid
    start = time.monotonic()
    with pytest.raises(StageTimeout):
        pending.result()  # the call waits for its aside past the limit
    assert time.monotonic() - start < 30.0
    assert not _alive(helper) and not _alive(worker)
    assert _budget._helper is None and _budget._worker is None

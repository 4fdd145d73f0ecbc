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

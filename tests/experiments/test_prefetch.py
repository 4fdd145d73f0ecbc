"""The next unit's rollout batch generated in the background (``Context.prefetch``):
each batch generated once, waited for by the unit that reads it, dropped after
``close``, never started where a batch cannot be generated; the bank read while a
batch is added; and a tiny run with it equal to one without it."""

import json
import threading
import types

import numpy as np
import pytest

from experiments import rollout_analysis, runner
from experiments.runner import allocator as _allocator
from tests.experiments._results import assert_same_results
from theorycheck.models import Model


def _context(tmp_path, monkeypatch, generate, **kwargs):
    """A Context over a fake sampler: ``record`` is the identity on a dict of arrays,
    and the model is a placeholder (nothing loads)."""
    import theorycheck.rl

    monkeypatch.setattr(theorycheck.rl, "record", lambda rollouts: rollouts)
    monkeypatch.setattr(theorycheck.rl, "from_record", lambda model, rec, **kw: rec)
    cfg = types.SimpleNamespace(
        out=str(tmp_path), model="fake", temperature=1.0, anchor_arithmetic="xla"
    )
    ctx = runner.Context(cfg, runner.RolloutBank(str(tmp_path)), generate, **kwargs)
    ctx._model = Model(None, None, None)  # (config, params, tokenizer): unused
    return ctx


def _batch(seed):
    return {"tokens": np.full((2, 3), seed, np.int32)}, {"seed": seed}


def test_a_prefetched_batch_is_generated_once_in_the_background(tmp_path, monkeypatch):
    release, calls = threading.Event(), []

    def generate(ctx, seed, engine):
        calls.append((seed, engine, threading.current_thread().name))
        release.wait(10)
        return _batch(seed)

    ctx = _context(tmp_path, monkeypatch, generate)
    ctx.prefetch(1, "float32")
    ctx.prefetch(1, "float32")  # running already: no second thread
    assert ctx.bank.get(1, "float32") is None
    waiter = threading.Thread(target=ctx.ensure, args=(1, "float32"))
    waiter.start()  # the unit reading the batch waits for the background one
    release.set()
    waiter.join(10)
    ctx._ahead.join(10)
    assert calls == [(1, "float32", "rollouts-ahead")]
    assert ctx.bank.get(1, "float32")["tokens"].tolist() == [[1] * 3] * 2
    reread = runner.RolloutBank(str(tmp_path))  # and it is in rollouts.npz
    assert reread.get(1, "float32")["tokens"].tolist() == [[1] * 3] * 2


def test_rollouts_starts_the_upcoming_batch_after_its_own(tmp_path, monkeypatch):
    calls = []

    def generate(ctx, seed, engine):
        calls.append((seed, threading.current_thread().name))
        return _batch(seed)

    ctx = _context(tmp_path, monkeypatch, generate)
    ctx.upcoming = (1, "bfloat16")
    got, meta = ctx.rollouts(0, "bfloat16")
    ctx._ahead.join(10)
    assert meta == {"seed": 0} and got["tokens"].tolist() == [[0] * 3] * 2
    assert calls == [(0, "MainThread"), (1, "rollouts-ahead")]


def test_a_batch_finished_after_close_is_not_recorded(tmp_path, monkeypatch):
    release = threading.Event()

    def generate(ctx, seed, engine):
        release.wait(10)
        return _batch(seed)

    ctx = _context(tmp_path, monkeypatch, generate)
    ctx.bank.put(0, "bfloat16", *_batch(0))
    ctx.prefetch(1, "bfloat16")
    ctx.close()
    release.set()
    ctx._ahead.join(10)
    assert ctx.bank.batches() == {(0, "bfloat16")}
    assert runner.RolloutBank(str(tmp_path)).batches() == {(0, "bfloat16")}


@pytest.mark.parametrize("setting", ["replay", "no_generation", "held"])
def test_no_background_generation_where_none_may_run(setting, tmp_path, monkeypatch):
    def generate(ctx, seed, engine):
        raise AssertionError("generated")

    ctx = _context(tmp_path, monkeypatch, generate, replay=setting == "replay")
    if setting == "no_generation":
        ctx.no_generation = "distributed"
    if setting == "held":
        ctx.bank.put(1, "float32", *_batch(1))
    ctx.prefetch(1, "float32")
    assert ctx._ahead is None


def test_a_failed_background_batch_is_raised_by_the_unit_that_reads_it(
    tmp_path, monkeypatch
):
    calls = []

    def generate(ctx, seed, engine):
        calls.append(threading.current_thread().name)
        raise ValueError(f"bad seed {seed}")

    ctx = _context(tmp_path, monkeypatch, generate)
    ctx.prefetch(3, "float32")
    ctx._ahead.join(10)
    with pytest.raises(ValueError, match="bad seed 3"):
        ctx.ensure(3, "float32")
    assert calls == ["rollouts-ahead", "MainThread"]


def test_the_bank_is_read_while_batches_are_added(tmp_path):
    bank = runner.RolloutBank(str(tmp_path), write=False)
    errors = []

    def add():
        try:
            for seed in range(300):
                bank.put(seed, "float32", {f"f{i}": np.zeros(1) for i in range(8)}, {})
        except Exception as err:  # noqa: BLE001 - reported below
            errors.append(err)

    writer = threading.Thread(target=add)
    writer.start()
    while writer.is_alive():
        try:
            bank.batches(), bank.get(0, "float32"), bank.pack(bank.batches())
        except Exception as err:  # noqa: BLE001 - the assertion below names it
            errors.append(err)
            break
    writer.join()
    assert errors == [] and len(bank.batches()) == 300


def test_a_tiny_run_without_background_generation_is_the_same(tmp_path, monkeypatch):
    """The same run twice: the default (each next batch generated in the background,
    seen on the background thread) and with prefetch off (every batch on the main
    thread): the same results and the same recorded rollouts."""
    threads = []
    real = rollout_analysis.generate

    def spy(ctx, seed, engine):
        threads.append(threading.current_thread().name)
        return real(ctx, seed, engine)

    monkeypatch.setattr(rollout_analysis, "generate", spy)
    argv = ["--tiny", "--seeds", "3"]
    assert rollout_analysis.main([*argv, "--out", str(tmp_path / "ahead")]) == 0
    ahead, threads[:] = list(threads), []
    monkeypatch.setattr(runner.Context, "prefetch", lambda self, seed, engine: None)
    assert rollout_analysis.main([*argv, "--out", str(tmp_path / "seq")]) == 0
    assert "rollouts-ahead" in ahead and set(threads) == {"MainThread"}
    assert len(ahead) == len(threads)
    run = json.loads((tmp_path / "seq" / "results.json").read_text())["runs"][-1]
    assert run["peak_rss_mb"] > 0  # the invocation's record: its peak memory
    assert run["allocator"] == _allocator.loaded()  # and its allocator
    assert_same_results(
        tmp_path / "ahead" / "results.json", tmp_path / "seq" / "results.json"
    )
    with (
        np.load(tmp_path / "ahead" / "rollouts.npz") as a,
        np.load(tmp_path / "seq" / "rollouts.npz") as b,
    ):
        assert sorted(a.files) == sorted(b.files)
        for k in a.files:
            np.testing.assert_array_equal(a[k], b[k], err_msg=k)

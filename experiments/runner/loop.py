"""The run loop: parse the flags, then run every unfinished unit, report only, or
replay; write results.json, report.md and the figures."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time

from experiments.runner import allocator, distributed
from experiments.runner.bank import RolloutBank
from experiments.runner.context import Context, Unit, log, setup_jax
from experiments.runner.flags import _ids, parse_config
from experiments.runner.provenance import commit, provenance
from experiments.runner.replay import replay
from experiments.runner.store import ResultStore, _write_bytes, jsonable
from theorycheck._errors import BadInput

_SAVED = "the finished units are saved (the same command resumes)"


class Terminated(BaseException):
    """SIGTERM, raised in the main thread (like ``KeyboardInterrupt`` for SIGINT)."""


def _on_sigterm(signum, frame):
    raise Terminated


def _stop(code: int, hard: bool) -> int:
    """``code``; with ``hard`` (the process is the experiment's own) the process
    ends here, streams flushed: the interpreter's teardown with the model's threads
    still running can crash (SIGSEGV) after a signal."""
    if hard:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


def guarded(name: str, body, *, hard: bool = False) -> int:
    """``body()``'s exit status under the contract of every entry point
    (docs/design.md): 2 on bad input with one line on stderr naming the bad value
    (argparse errors included), 130 on SIGINT and 143 on SIGTERM with one line and
    no traceback (finished units are saved: a restart resumes)."""
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.getsignal(signal.SIGTERM) if main_thread else None
    if main_thread:
        signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        return body()
    except BadInput as err:
        print(f"{name}: error: {' '.join(str(err).split())}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{name}: interrupted (SIGINT); {_SAVED}", file=sys.stderr)
        return _stop(130, hard)
    except Terminated:
        print(f"{name}: terminated (SIGTERM); {_SAVED}", file=sys.stderr)
        return _stop(143, hard)
    finally:
        if main_thread:
            signal.signal(signal.SIGTERM, previous)


def main(exp, argv=None) -> int:
    """The run loop of an experiment module ``exp`` (module docstring): parse the
    flags, then run, report only or replay, under :func:`guarded`'s contract;
    ``--json`` prints one JSON object (the results file and the summary)."""
    spec = getattr(exp, "__spec__", None)  # run as ``python -m experiments.X``
    name = (spec.name if spec else exp.__name__).rsplit(".", 1)[-1]
    own = exp.__name__ == "__main__" and argv is None and spec is not None
    if own:
        allocator.reexec(spec.name)  # jemalloc where the machine has it
    return guarded(name, lambda: _main(exp, name, argv), hard=own)


def _main(exp, name: str, argv) -> int:
    cfg, args = parse_config(
        exp.Config,
        argv,
        prog=f"python -m experiments.{name}",
        description=exp.__doc__.split("\n\n")[0],
    )
    if args.fresh and args.report_only:
        raise BadInput(
            "--fresh with --report-only would discard every finished unit and "
            "compute none; pass one of them"
        )
    if args.replay_units and not args.replay:
        raise BadInput("--replay-units needs --replay DIR")
    recompute = _ids(args.recompute, "--recompute")
    if recompute and (args.fresh or args.report_only or args.replay):
        raise BadInput(
            "--recompute recomputes finished units of a run: drop --fresh, "
            "--report-only and --replay"
        )
    distributed.check_args(args)
    if args.replay:
        if args.distributed:
            raise BadInput("--replay runs in one process; drop --distributed")
        only = _ids(args.replay_units, "--replay-units") or None
        return replay(exp, args.replay, only=only, as_json=args.json)
    exp.units(cfg)  # a bad grid exits 2 on every process before connecting
    distributed.from_args(args)
    return run(
        exp,
        cfg,
        fresh=args.fresh,
        report_only=args.report_only,
        recompute=recompute,
        as_json=args.json,
    )


def run(
    exp,
    cfg,
    *,
    fresh: bool = False,
    report_only: bool = False,
    recompute=(),
    as_json: bool = False,
) -> int:
    """Runs every unfinished unit of ``exp.units(cfg)``, then writes results.json
    (summary, provenance), report.md and the figures into ``cfg.out``.

    ``recompute``: finished units computed again from the rollouts the run
    recorded (each must be one of ``exp.units(cfg)`` with its batch in
    ``rollouts.npz``: a recompute never samples new rollouts).

    Under ``--distributed`` (``runner.distributed.context()`` has several
    processes) every process calls this: process 0 decides the units left and tells
    the others, the seeds' rollouts are shared (:func:`_share_rollouts`), the units
    are computed by process index and gathered, and process 0 alone writes."""
    import base64

    from theorycheck._provenance import load_average

    dist = distributed.context()
    setup_jax()
    units = exp.units(cfg)
    store, error = _open_store(exp, cfg, units, fresh, recompute, dist.writer)
    done = (lambda u: True) if report_only else (lambda u: store.done(u))
    todo = distributed.decide([u.id for u in units], done, error, dist)
    by_id = {u.id: u for u in units}
    bank = RolloutBank(cfg.out, fresh=fresh, write=dist.writer)
    ctx = Context(cfg, bank, exp.generate)
    ctx.outbox = {}  # a unit's files (Context.savez) travel with its result
    if dist.count > 1:
        _share_rollouts(ctx, [by_id[u] for u in todo], dist)
    start, load0, computed = time.time(), load_average(), []

    # single process: the next unit's batch is generated while a unit computes
    ahead = {a: b for a, b in zip(todo, todo[1:])} if dist.count == 1 else {}

    def compute(uid):
        t0 = time.perf_counter()
        nxt = ahead.get(uid)
        ctx.upcoming = None if nxt is None else (by_id[nxt].seed, by_id[nxt].engine)
        log(f"{uid}: running")
        result = jsonable(exp.run_unit(ctx, cfg, by_id[uid]))
        files = {k: base64.b64encode(v).decode() for k, v in ctx.outbox.items()}
        ctx.outbox.clear()
        allocator.release()  # one unit's most is what the process keeps
        return {"result": result, "seconds": time.perf_counter() - t0, "files": files}

    def save(uid, payload):
        for fname, raw in payload["files"].items():  # a unit's own files first
            _write_bytes(os.path.join(cfg.out, fname), base64.b64decode(raw))
        store.save(uid, payload["result"], seconds=payload["seconds"])
        computed.append(uid)

    name = exp.__name__.rsplit(".", 1)[-1]
    try:
        distributed.run_units(todo, save, compute, dist, progress=name)
    finally:
        ctx.close()
    if not dist.writer:
        return 0
    ids = {u.id for u in units}
    missing = [u.id for u in units if not store.done(u.id)]
    # the units of this config only (a run reported with fewer seeds drops the rest)
    store.data["units"] = {k: v for k, v in store.data["units"].items() if k in ids}
    if computed:
        store.data.setdefault("runs", []).append(
            _invocation(len(computed), dist.count, start, load0, cfg.out)
        )
    extra = {"load_average_end": load_average()}
    runs = store.data.get("runs", [])
    if runs:
        extra["wall_s"] = round(sum(r["wall_s"] for r in runs), 1)
    data = store.finish(
        provenance=provenance(cfg, seeds=cfg.seed_list(), **extra),
        missing_units=missing,
    )
    data = store.finish(summary=exp.report.summarize(data))
    write_report(exp, cfg.out, data, store.timings)
    _answer(store.path, os.path.join(cfg.out, "report.md"), data, as_json)
    return 0


def _open_store(exp, cfg, units, fresh, recompute, writer: bool):
    """``(store, error)``: process 0's :class:`ResultStore` (None elsewhere), or the
    message of the bad input it met (told to every process, then raised
    everywhere)."""
    if not writer:
        return None, None
    try:
        if recompute:
            _check_recorded(cfg.out, units, recompute)
        store = ResultStore(
            cfg.out,
            cfg,
            fresh=fresh,
            recompute=recompute,
            reads_anchor=getattr(exp, "reads_anchor", None),
        )
    except BadInput as err:
        return None, str(err)
    return store, None


def _invocation(units: int, processes: int, start, load0, out: str) -> dict:
    """This invocation's record in ``results.json``'s ``runs``."""
    from theorycheck._provenance import load_average

    return {
        "units": units,
        "processes": processes,
        "wall_s": round(time.time() - start, 1),
        "load_average_start": load0,
        "load_average_end": load_average(),
        "allocator": allocator.loaded(),
        "peak_rss_mb": _peak_rss_mb(),
        **commit(out),
    }


def _answer(results: str, report: str, data: dict, as_json: bool) -> None:
    """What a run prints on stdout: the report's path, or (``--json``) one object
    with the results file, the report, the unfinished units and the summary."""
    if not as_json:
        print(report)
        return
    answer = {
        "results": results,
        "report": report,
        "missing_units": data.get("missing_units", []),
        "summary": data["summary"],
    }
    print(json.dumps(answer, allow_nan=False))


def _peak_rss_mb() -> float | None:
    """The process's peak resident memory so far (MB; None where unknown)."""
    try:
        import resource
    except ImportError:  # not POSIX
        return None
    kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # kB on Linux
    return round(kb / 1024, 1) if sys.platform == "linux" else None


def _check_recorded(out_dir: str, units: list, ids: list[str]) -> None:
    """Bad input unless every unit in ``ids`` is one of ``units`` whose rollout
    batch is recorded in ``out_dir``/rollouts.npz."""
    by_id = {u.id: u for u in units}
    unknown = [u for u in ids if u not in by_id]
    if unknown:
        raise BadInput(f"--recompute {', '.join(unknown)}: not a unit of this run")
    bank = RolloutBank(out_dir)
    held = bank.batches()
    lacking = [u for u in ids if (by_id[u].seed, by_id[u].engine) not in held]
    if lacking:
        raise BadInput(
            f"--recompute {', '.join(lacking)}: no recorded rollouts in {bank.path}"
        )


def _share_rollouts(ctx: Context, todo: list[Unit], dist) -> None:
    """Every rollout batch the ``todo`` units read, on every process, before they
    run (``--distributed``): process 0's recorded batches are broadcast; each seed
    still lacking one is generated by one process (seeds assigned by process index,
    the bfloat16 engine first, since a float32 batch may take its prompt draw from
    it) and gathered, and process 0 records it in ``rollouts.npz``. A seed's units
    on different processes so read the same batch, the one a replay reads; a unit
    that would generate one more batch raises instead."""
    needed = list(dict.fromkeys((u.seed, u.engine) for u in todo))
    recorded = [b for b in needed if ctx.bank.get(*b) is not None]
    packed = distributed.broadcast_bytes(
        ctx.bank.pack(recorded) if dist.writer else None, dist
    )
    if not dist.writer:
        ctx.bank.merge([packed])
    engines: dict[int, list[str]] = {}
    for seed, engine in needed:
        if ctx.bank.get(seed, engine) is None:
            engines.setdefault(seed, []).append(engine)
    for batch in distributed.assign(list(engines), dist):
        mine = batch[dist.index]
        before = ctx.bank.batches()
        if mine is not None:
            for engine in sorted(engines[mine], key=lambda e: e != "bfloat16"):
                ctx.ensure(mine, engine)
        new = ctx.bank.pack(ctx.bank.batches() - before)
        rows = distributed.gather_bytes(new, dist)
        ctx.bank.merge([r for i, r in enumerate(rows) if i != dist.index])
    ctx.no_generation = (
        "a unit reads a rollout batch the run did not generate before its units "
        "(under --distributed every batch is generated first, by one process)"
    )


def write_report(exp, out_dir: str, data: dict, timings: dict) -> None:
    """report.md and the figures of ``exp``'s report module."""
    exp.report.figures(out_dir, data)
    text = exp.report.markdown(data, timings)
    _write_bytes(os.path.join(out_dir, "report.md"), text.encode())

"""Experiments across processes and hosts with ``jax.distributed``.

An experiment is a list of independent units (variant x seed). With ``--distributed``
every process runs the same command; :func:`initialize` connects them
(``jax.distributed.initialize``: the coordinator address, the process count and the
process id come from the flags, or, when those are not given, from the environment
the way JAX reads it on Slurm, Open MPI and the other clusters it detects). Then:

* **Process 0 alone reads and writes the results store**, the report and the
  figures; the other processes need no shared file system.
* **Which units are left is decided once, by process 0** (from its results store)
  and broadcast (``multihost_utils.broadcast_one_to_all``), so a resumed run is
  consistent even if the processes saw different files.
* **Units are assigned by process index** in rounds: in round r, process i computes
  unit ``todo[r * P + i]`` on its own (addressable) devices; after each round the
  results are gathered on every process (``multihost_utils.process_allgather`` of
  the JSON-encoded results, as byte arrays) and process 0 saves them. A killed run
  loses at most the round in flight; restarted with the same command it continues.
* Nothing converts a non-addressable array to numpy: a unit's arrays live on its
  own process; only the encoded results cross processes, through the gather, which
  returns host-local copies.

Without ``--distributed`` (or with one process) :func:`run_units` is the plain loop.
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np

from theorycheck._errors import BadInput


@dataclasses.dataclass(frozen=True)
class Context:
    """Where this process stands: ``index`` of ``count`` processes."""

    index: int = 0
    count: int = 1

    @property
    def writer(self) -> bool:
        """Whether this process writes results, reports and figures (process 0)."""
        return self.index == 0


_CONTEXT = Context()


def context() -> Context:
    """The current :class:`Context` (one process until :func:`initialize`)."""
    return _CONTEXT


def initialize(
    *,
    coordinator: str | None = None,
    num_processes: int | None = None,
    process_id: int | None = None,
) -> Context:
    """Connects this process to the others (``jax.distributed.initialize``).

    Args:
        coordinator: ``host:port`` of process 0 (None: from the environment).
        num_processes: how many processes (None: from the environment).
        process_id: this process's index (None: from the environment).

    Returns:
        The :class:`Context`; also kept for :func:`context`.
    """
    global _CONTEXT
    import jax

    if num_processes is not None and num_processes < 1:
        raise BadInput(f"num_processes = {num_processes} must be >= 1")
    if process_id is not None and num_processes is not None:
        if not 0 <= process_id < num_processes:
            raise BadInput(f"process_id = {process_id} is outside [0, {num_processes})")
    # cross-process collectives of the CPU backend (the gathers below); set before
    # any backend starts, and without effect on GPU/TPU backends
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(
        coordinator_address=coordinator,
        num_processes=num_processes,
        process_id=process_id,
    )
    _CONTEXT = Context(index=jax.process_index(), count=jax.process_count())
    return _CONTEXT


def assign(todo: list, ctx: Context | None = None) -> list[list]:
    """Rounds of units: round r holds ``todo[r * P : (r + 1) * P]``; process i
    computes entry i of each round (None where a round is short).

    Examples:
        >>> assign(["a", "b", "c"], Context(index=1, count=2))
        [['a', 'b'], ['c', None]]
    """
    ctx = ctx or context()
    p = ctx.count
    rounds = [list(todo[s : s + p]) for s in range(0, len(todo), p)]
    return [r + [None] * (p - len(r)) for r in rounds]


def broadcast_todo(units: list[str], done, ctx: Context | None = None) -> list[str]:
    """The units left, as process 0 decides them (``done(unit)`` on process 0).

    A process whose store disagrees still follows process 0's decision.
    """
    ctx = ctx or context()
    flags = np.array([0 if ctx.writer and done(u) else 1 for u in units], np.int32)
    if ctx.count > 1:
        from jax.experimental import multihost_utils

        flags = np.asarray(
            multihost_utils.broadcast_one_to_all(flags, is_source=ctx.writer)
        )
    return [u for u, f in zip(units, flags) if f]


def gather(result, ctx: Context | None = None) -> list:
    """Every process's ``result`` (JSON-ready or None), in process order."""
    ctx = ctx or context()
    if ctx.count == 1:
        return [result]
    from jax.experimental import multihost_utils

    data = np.frombuffer(json.dumps(result).encode(), np.uint8)
    sizes = np.asarray(multihost_utils.process_allgather(np.int32(len(data))))
    width = int(sizes.max())
    padded = np.zeros(width, np.uint8)
    padded[: len(data)] = data
    rows = np.asarray(multihost_utils.process_allgather(padded))
    return [json.loads(bytes(rows[i, : sizes[i]])) for i in range(ctx.count)]


def run_units(
    units: list[str], store, compute, ctx: Context | None = None, progress: str = ""
) -> None:
    """Computes the units the store lacks, over every process; process 0 saves them.

    Args:
        units: unit ids in order.
        store: the results store (``done(unit)``, ``save(unit, result, seconds=)``);
            read and written on process 0 only.
        compute: ``unit -> (result, seconds)`` (a JSON-ready result).
        ctx: the :class:`Context` (default: :func:`context`).
        progress: a progress bar's label (``theorycheck._progress``), "" for none.
    """
    from experiments._common import jsonable
    from theorycheck._progress import bar

    ctx = ctx or context()
    todo = broadcast_todo(units, store.done, ctx)
    rounds = assign(todo, ctx)
    if progress:
        rounds = bar(rounds, desc=progress, unit="round")
    for batch in rounds:
        mine = batch[ctx.index]
        out = None
        if mine is not None:
            result, seconds = compute(mine)
            out = {"result": jsonable(result), "seconds": seconds}
        for unit, got in zip(batch, gather(out, ctx)):
            if unit is not None and ctx.writer:
                store.save(unit, got["result"], seconds=got["seconds"])


def add_flags(parser) -> None:
    """``--distributed``, ``--coordinator``, ``--num-processes``, ``--process-id``."""
    parser.add_argument(
        "--distributed",
        action="store_true",
        help="run over several processes/hosts (jax.distributed.initialize)",
    )
    parser.add_argument("--coordinator", default=None, help="host:port of process 0")
    parser.add_argument("--num-processes", type=int, default=None)
    parser.add_argument("--process-id", type=int, default=None)


def from_args(args) -> Context:
    """Initializes from parsed :func:`add_flags` flags (one process without
    ``--distributed``)."""
    if not args.distributed:
        for name in ("coordinator", "num_processes", "process_id"):
            if getattr(args, name) is not None:
                flag = "--" + name.replace("_", "-")
                raise BadInput(f"{flag} needs --distributed")
        return context()
    return initialize(
        coordinator=args.coordinator,
        num_processes=args.num_processes,
        process_id=args.process_id,
    )


__all__ = [
    "Context",
    "add_flags",
    "assign",
    "broadcast_todo",
    "context",
    "from_args",
    "gather",
    "initialize",
    "run_units",
]

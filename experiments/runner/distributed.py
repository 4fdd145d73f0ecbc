"""Experiments across processes and hosts with ``jax.distributed``.

An experiment is a list of independent units (variant x seed). With ``--distributed``
every process runs the same command; :func:`initialize` connects them
(``jax.distributed.initialize``: the coordinator address, the process count and the
process id come from the flags, or, where a flag is not given, from the environment
the way JAX reads it: ``SLURM_*`` under ``srun``, ``OMPI_*`` under Open MPI's
``mpirun``, and the other clusters JAX detects). The run loop
(``experiments.runner.loop.run``) then uses the pieces below:

* **Process 0 alone reads and writes the results store**, the recorded rollouts,
  the report and the figures; the other processes need no shared file system.
* **Which units are left is decided once, by process 0** (from its results store)
  and broadcast (:func:`decide`, ``multihost_utils.broadcast_one_to_all``), so a
  resumed run is consistent even where the processes see different files; a results
  store that holds another config is refused on every process with process 0's
  message.
* **Units are assigned by process index** in rounds (:func:`assign`): in round r,
  process i computes unit ``todo[r * P + i]`` on its own (addressable) devices;
  after each round the results are gathered (:func:`gather`,
  ``multihost_utils.process_allgather`` of the JSON-encoded results, as byte arrays)
  and process 0 saves them. A killed run loses at most the round in flight;
  restarted with the same command it continues.
* Nothing converts a non-addressable array to numpy: a unit's arrays live on its
  own process's devices; only encoded bytes cross processes, and both collectives
  return host-local numpy copies.

With one process every function here is the plain single-process step (no
collective is called).
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np

from theorycheck._errors import BadInput


@dataclasses.dataclass(frozen=True)
class Processes:
    """Where this process stands: ``index`` of ``count`` processes."""

    index: int = 0
    count: int = 1

    @property
    def writer(self) -> bool:
        """Whether this process writes results, reports and figures (process 0)."""
        return self.index == 0


_CONTEXT = Processes()


def context() -> Processes:
    """The current :class:`Processes` (one process until :func:`initialize`)."""
    return _CONTEXT


def check(
    *,
    coordinator: str | None = None,
    num_processes: int | None = None,
    process_id: int | None = None,
) -> None:
    """Bad flags found before any connection (exit 2 on every process alike).

    Examples:
        >>> check(coordinator="127.0.0.1:1234", num_processes=2, process_id=1)
        >>> check(num_processes=2, process_id=2)
        Traceback (most recent call last):
        ...
        theorycheck._errors.BadInput: --process-id 2 is outside [0, 2)
    """
    if num_processes is not None and num_processes < 1:
        raise BadInput(f"--num-processes {num_processes} must be >= 1")
    if process_id is not None and process_id < 0:
        raise BadInput(f"--process-id {process_id} must be >= 0")
    if process_id is not None and num_processes is not None:
        if process_id >= num_processes:
            raise BadInput(f"--process-id {process_id} is outside [0, {num_processes})")
    if coordinator is not None:
        host, _, port = coordinator.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise BadInput(f"--coordinator {coordinator!r} is not host:port")


def initialize(
    *,
    coordinator: str | None = None,
    num_processes: int | None = None,
    process_id: int | None = None,
) -> Processes:
    """Connects this process to the others (``jax.distributed.initialize``); must
    run before any JAX computation.

    Args:
        coordinator: ``host:port`` of process 0 (None: from the environment).
        num_processes: how many processes (None: from the environment).
        process_id: this process's index (None: from the environment).

    Returns:
        The :class:`Processes`; also kept for :func:`context`.
    """
    global _CONTEXT
    import jax

    check(coordinator=coordinator, num_processes=num_processes, process_id=process_id)
    # cross-process collectives of the CPU backend (the gathers below); set before
    # any backend starts, and without effect on GPU/TPU backends
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    try:
        jax.distributed.initialize(
            coordinator_address=coordinator,
            num_processes=num_processes,
            process_id=process_id,
        )
    except (ValueError, TypeError) as err:  # a setting neither given nor detected
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise BadInput(
            f"--distributed: {first} (pass --coordinator, --num-processes and "
            "--process-id, or launch under srun/mpirun)"
        ) from err
    _CONTEXT = Processes(index=jax.process_index(), count=jax.process_count())
    return _CONTEXT


def assign(todo: list, ctx: Processes | None = None) -> list[list]:
    """Rounds of units: round r holds ``todo[r * P : (r + 1) * P]``; process i
    computes entry i of each round (None where a round is short).

    Examples:
        >>> assign(["a", "b", "c"], Processes(index=1, count=2))
        [['a', 'b'], ['c', None]]
        >>> assign(["a", "b"], Processes())
        [['a'], ['b']]
    """
    ctx = ctx or context()
    p = ctx.count
    rounds = [list(todo[s : s + p]) for s in range(0, len(todo), p)]
    return [r + [None] * (p - len(r)) for r in rounds]


def _bucket(n: int) -> int:
    """The padded length of ``n`` bytes: a power of two >= 64, so that the
    collectives compile for a few shapes only."""
    return max(64, 1 << max(0, n - 1).bit_length())


def broadcast_bytes(data: bytes | None, ctx: Processes | None = None) -> bytes:
    """Process 0's ``data`` on every process (``broadcast_one_to_all``; the other
    processes pass None)."""
    ctx = ctx or context()
    if ctx.count == 1:
        return data or b""
    from jax.experimental import multihost_utils

    data = data if ctx.writer else b""
    size = multihost_utils.broadcast_one_to_all(
        np.int64(len(data)), is_source=ctx.writer
    )
    size = int(np.asarray(size))
    buf = np.zeros(_bucket(size), np.uint8)
    buf[: len(data)] = np.frombuffer(data, np.uint8)
    out = multihost_utils.broadcast_one_to_all(buf, is_source=ctx.writer)
    return bytes(np.asarray(out)[:size])


def gather_bytes(data: bytes, ctx: Processes | None = None) -> list[bytes]:
    """Every process's ``data``, in process order (``process_allgather``)."""
    ctx = ctx or context()
    if ctx.count == 1:
        return [data]
    from jax.experimental import multihost_utils

    sizes = np.asarray(multihost_utils.process_allgather(np.int64(len(data))))
    buf = np.zeros(_bucket(int(sizes.max())), np.uint8)
    buf[: len(data)] = np.frombuffer(data, np.uint8)
    rows = np.asarray(multihost_utils.process_allgather(buf))
    return [bytes(rows[i, : int(sizes[i])]) for i in range(ctx.count)]


def gather(result, ctx: Processes | None = None) -> list:
    """Every process's JSON-ready ``result`` (or None), in process order.

    Examples:
        >>> gather({"x": 1.5}, Processes())
        [{'x': 1.5}]
    """
    ctx = ctx or context()
    if ctx.count == 1:
        return [result]
    rows = gather_bytes(json.dumps(result).encode(), ctx)
    return [json.loads(row) for row in rows]


def decide(
    units: list[str], done, error: str | None = None, ctx: Processes | None = None
) -> list[str]:
    """The units left, as process 0 decides them, on every process.

    Args:
        units: the unit ids in order.
        done: ``unit -> bool`` from process 0's results store (not called on the
            other processes).
        error: process 0's bad-input message (its results store holds another
            config), raised on every process.
        ctx: the :class:`Processes` (default: :func:`context`).

    Examples:
        >>> decide(["a", "b"], {"a"}.__contains__, ctx=Processes())
        ['b']
    """
    ctx = ctx or context()
    plan = None
    if ctx.writer:
        todo = [] if error else [u for u in units if not done(u)]
        plan = {"error": error, "todo": todo}
    if ctx.count > 1:
        raw = broadcast_bytes(json.dumps(plan).encode() if ctx.writer else None, ctx)
        plan = json.loads(raw)
    if plan["error"]:
        where = "" if ctx.writer else "process 0: "
        raise BadInput(where + plan["error"])
    unknown = sorted(set(plan["todo"]) - set(units))
    if unknown:  # the processes were not given the same flags
        raise BadInput(f"process 0 runs units this process lacks: {unknown[:3]}")
    return plan["todo"]


def run_units(todo: list, save, compute, ctx: Processes | None = None, progress=""):
    """Computes ``todo`` over every process; process 0 saves each result.

    Args:
        todo: the units left (:func:`decide`), the same list on every process.
        save: ``save(unit, payload)``, called on process 0 only, in ``todo``'s order.
        compute: ``unit -> payload`` (JSON-ready: it crosses processes as JSON).
        ctx: the :class:`Processes` (default: :func:`context`).
        progress: a progress bar's label (``theorycheck._progress``), "" for none.
    """
    from theorycheck._progress import bar

    ctx = ctx or context()
    rounds = assign(todo, ctx)
    if progress:
        rounds = bar(rounds, desc=progress, unit="round" if ctx.count > 1 else "unit")
    for batch in rounds:
        mine = batch[ctx.index]
        out = None if mine is None else compute(mine)
        for unit, got in zip(batch, gather(out, ctx)):
            if unit is not None and ctx.writer:
                save(unit, got)


def add_flags(parser) -> None:
    """``--distributed``, ``--coordinator``, ``--num-processes``, ``--process-id``."""
    parser.add_argument(
        "--distributed",
        action="store_true",
        help="spread the units over several processes/hosts "
        "(jax.distributed.initialize; docs/distributed.md)",
    )
    parser.add_argument(
        "--coordinator",
        default=None,
        metavar="HOST:PORT",
        help="with --distributed: process 0's address (default: from the "
        "environment, e.g. SLURM_* under srun)",
    )
    parser.add_argument(
        "--num-processes",
        type=int,
        default=None,
        help="with --distributed: the process count (default: from the environment)",
    )
    parser.add_argument(
        "--process-id",
        type=int,
        default=None,
        help="with --distributed: this process's index (default: from the environment)",
    )


def _settings(args) -> dict:
    return {
        "coordinator": args.coordinator,
        "num_processes": args.num_processes,
        "process_id": args.process_id,
    }


def check_args(args) -> None:
    """Bad :func:`add_flags` flags (a setting without ``--distributed``, a process
    id outside the count, an address that is not host:port), before connecting."""
    if not args.distributed:
        for name, value in _settings(args).items():
            if value is not None:
                raise BadInput(f"--{name.replace('_', '-')} needs --distributed")
    check(**_settings(args))


def from_args(args) -> Processes:
    """Initializes from parsed :func:`add_flags` flags (one process without
    ``--distributed``)."""
    check_args(args)
    if not args.distributed:
        return context()
    return initialize(**_settings(args))


__all__ = [
    "Processes",
    "add_flags",
    "assign",
    "broadcast_bytes",
    "check",
    "check_args",
    "context",
    "decide",
    "from_args",
    "gather",
    "gather_bytes",
    "initialize",
    "run_units",
]


def data_sharding(devices: int):
    """Row sharding over the first ``devices`` devices of this process (None for
    one device).

    The batch's leading (sequence) axis is split over a 1-D ``"data"`` mesh of
    ``jax.local_devices()`` (under ``--distributed`` every process computes its own
    units, so a unit never spans another process's devices); weights stay
    replicated, so gradients are reduced across devices by XLA.
    """
    if devices <= 1:
        return None
    import jax
    from jax.sharding import AxisType, NamedSharding, PartitionSpec

    if jax.local_device_count() < devices:
        raise BadInput(
            f"devices = {devices} but this process has only "
            f"{jax.local_device_count()} (CPU: "
            "XLA_FLAGS=--xla_force_host_platform_device_count=N)"
        )
    mesh = jax.make_mesh(
        (devices,),
        ("data",),
        devices=jax.local_devices()[:devices],  # this process's own (addressable)
        axis_types=(AxisType.Auto,),  # XLA propagates the row sharding itself
    )
    return NamedSharding(mesh, PartitionSpec("data"))

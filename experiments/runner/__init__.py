"""The machinery every experiment shares, one concern per module.

An experiment is a module with a frozen ``Config`` (extending
``theorycheck.rl.RolloutConfig`` and, for trainer experiments,
``theorycheck.rl.TrainConfig``: one flag per field), ``units(cfg)`` (the
:class:`Unit` list), ``generate(ctx, seed, engine)`` (its sampler),
``run_unit(ctx, cfg, unit)`` (one JSON-ready dict), optionally
``reads_anchor(result)`` (whether a finished unit read the anchor; every unit does
where it is absent) and a ``report`` module with ``summarize(data)``,
``markdown(data, timings)``, ``figures(out, data)`` and ``section(data)``.
:func:`main` owns the rest:

* :mod:`.flags`: ``--field-name VALUE`` flags from the dataclass, ``--tiny``.
* :mod:`.store`: ``results.json`` written atomically after every finished unit
  (a killed run restarted with the same config skips the finished units).
* :mod:`.bank`: each seed's rollouts recorded in ``rollouts.npz``.
* :mod:`.context`: the model and rollouts the units of one run share.
* :mod:`.stats`: mean, standard error and bootstrap interval over seeds.
* :mod:`.loop`: the run loop (run, report only, recompute).
* :mod:`.replay`: ``--replay DIR`` recomputes every unit from the recorded
  rollouts and reports every number that differs.
* :mod:`.distributed`: ``--distributed``, the units over several processes or hosts
  (docs/distributed.md); :mod:`.allocator`: jemalloc where the machine has it.
* :mod:`.provenance`: the library's one record plus the config and seeds.
"""

from experiments.runner.bank import RolloutBank
from experiments.runner.context import Context, Unit, log, setup_jax
from experiments.runner.distributed import data_sharding
from experiments.runner.flags import Parser
from experiments.runner.loop import guarded, main, run, write_report
from experiments.runner.provenance import commit, provenance, versions
from experiments.runner.replay import compare_units, flatten, replay, unit_sha
from experiments.runner.reporting import savefig, unfinished_line
from experiments.runner.stats import bootstrap_ci, stat
from experiments.runner.store import (
    ResultStore,
    jsonable,
    make_out,
    prune_replay,
    recorded_config,
    write_json,
)
from theorycheck.rl import RolloutConfig

__all__ = [
    "Context",
    "Parser",
    "ResultStore",
    "RolloutBank",
    "RolloutConfig",
    "Unit",
    "bootstrap_ci",
    "commit",
    "compare_units",
    "data_sharding",
    "flatten",
    "guarded",
    "jsonable",
    "log",
    "main",
    "make_out",
    "provenance",
    "prune_replay",
    "recorded_config",
    "replay",
    "run",
    "savefig",
    "setup_jax",
    "stat",
    "unfinished_line",
    "unit_sha",
    "versions",
    "write_json",
    "write_report",
]

"""The experiments: one entry point each (``python -m experiments.NAME``), a config
dataclass, ``--tiny``, and a report module that renders its results file.

:data:`EXPERIMENTS` is the declared list the library reads (``theorycheck
reproduce`` runs an experiment and renders its section through
``python -m experiments section NAME RUN_DIR``, in a child process from the
repository root; it never imports this package itself).
"""

from __future__ import annotations

import importlib

#: every experiment, by name: the module of its report (``section(data)``,
#: ``markdown``, ``figures``, ``summarize``).
EXPERIMENTS = {
    "rollout_analysis": "experiments._rollout_report",
    "sign_agreement": "experiments._sign_report",
    "linearization": "experiments._linearization_report",
    "gradient_bounds": "experiments._gradient_report",
}


def report(name: str):
    """The report module of the experiment ``name`` (KeyError: not declared)."""
    return importlib.import_module(EXPERIMENTS[name])

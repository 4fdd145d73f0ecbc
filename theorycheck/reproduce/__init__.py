"""``theorycheck reproduce``: the main job's report on the embedded checkpoint.

:data:`SECTIONS` lists the report's parts in order; each is a
:class:`Section` whose ``run(out_dir, quick)`` returns markdown plus JSON data. New
experiments join by appending a section. :func:`reproduce` runs them and writes
``index.md`` and ``index.json`` with the provenance of every number.
"""

from theorycheck import _provenance
from theorycheck._provenance import git_state, load_average, provenance
from theorycheck.reproduce._core import Section, SectionResult, run_sections
from theorycheck.reproduce._linearization import linearization_section
from theorycheck.reproduce._probes import probe_section
from theorycheck.reproduce._sections import (
    convexity_section,
    proofs_dir,
    prove_section,
    rollout_section,
)
from theorycheck.reproduce._subprocess import repository

#: Distributions whose versions every report records.
PACKAGES = _provenance.PACKAGES

#: The report's sections, in order.
SECTIONS: tuple[Section, ...] = (
    Section("proofs", "Do the paper propositions hold?", prove_section),
    Section("convexity", "Logits convexity of every registry rule", convexity_section),
    Section("rollouts", "Rollout analysis on SmolLM2", rollout_section),
    Section(
        "probes",
        "Where first-order ΔD predictions break (SmolLM2)",
        probe_section,
        "Where first-order ΔD predictions break (the tiny random model, --quick)",
    ),
    Section(
        "linearization",
        "NTK linearization and gradient-norm bounds (LCO, SmolLM2)",
        linearization_section,
        "NTK linearization and gradient-norm bounds (LCO, the tiny random model,"
        " --quick)",
    ),
)


#: the sections that run the repository's experiments (not in an installed package).
EXPERIMENT_SECTIONS = ("rollouts", "probes", "linearization")


def reproduce(out_dir, *, quick: bool = False, sections=SECTIONS) -> dict:
    """Runs ``sections`` into ``out_dir``; returns the ``index.json`` object.

    Raises:
        BadInput: an experiment section is chosen but the repository's
            ``experiments/`` is not beside the package (one line saying so).
    """
    if any(s.name in EXPERIMENT_SECTIONS for s in sections):
        repository()
    return run_sections(out_dir, quick=quick, sections=sections)


__all__ = [
    "PACKAGES",
    "EXPERIMENT_SECTIONS",
    "SECTIONS",
    "Section",
    "SectionResult",
    "convexity_section",
    "git_state",
    "load_average",
    "linearization_section",
    "proofs_dir",
    "probe_section",
    "prove_section",
    "provenance",
    "repository",
    "reproduce",
    "rollout_section",
    "run_sections",
]

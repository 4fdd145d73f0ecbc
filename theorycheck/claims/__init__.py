"""The claim harness: a proposition, the checks that test it, its computed status.

Write claims as module-level :class:`Claim` objects in a ``.py`` file; ``theorycheck
prove PATH`` discovers them (:func:`discover`) and evaluates each (:func:`evaluate`).
The status (:class:`Status`) is computed from the checks' outcomes, never written by
hand:

* ``holds``: every check passes and they span at least two method kinds;
* ``fails``: a check found a re-checked counterexample and no correction holds;
* ``holds_with_correction``: the statement fails and its :class:`Correction` holds
  (every check passes, at least two kinds);
* ``unknown`` otherwise. A check that raises is UNKNOWN, never a pass.

The status is for the statement *as written, under its assumptions*; read with the
claim's :class:`Kind` it gives the verdict (:func:`verdict_of`): only the source's own
statements can fail *as stated*, an assumption holds or fails at its stated setting,
and an extension or a reviewer objection is never the paper failing. Every check runs
in :func:`float64` (scoped). An expensive real-checkpoint measurement is made once
by ``theorycheck prove --remeasure`` and read back from its committed file
(:func:`measured`), the check saying which it used.
"""

from theorycheck.claims._discover import Collected, discover, select
from theorycheck.claims._evaluate import (
    ClaimResult,
    CorrectionResult,
    MethodResult,
    evaluate,
    run_check,
    status_of,
)
from theorycheck.claims._helpers import (
    compare,
    exact,
    failed,
    float64,
    from_proof,
    passed,
    property_check,
    require_float64,
    seeded_settings,
    sympy_identity,
    undecided,
    with_data,
)
from theorycheck.claims._measured import (
    REMEASURE_COMMAND,
    Measured,
    measured,
    remeasuring,
)
from theorycheck.claims._report import (
    SECTIONS,
    counts,
    markdown,
    run_claims,
    sections,
    table_lines,
    verdict_counts,
    write_report,
)
from theorycheck.claims._types import (
    PROVENANCES,
    VERDICTS,
    Check,
    CheckResult,
    Claim,
    Correction,
    Kind,
    Method,
    Outcome,
    Status,
    verdict_of,
)

__all__ = [
    "PROVENANCES",
    "REMEASURE_COMMAND",
    "SECTIONS",
    "VERDICTS",
    "Check",
    "CheckResult",
    "Claim",
    "ClaimResult",
    "Collected",
    "Correction",
    "CorrectionResult",
    "Kind",
    "Measured",
    "Method",
    "MethodResult",
    "Outcome",
    "Status",
    "discover",
    "evaluate",
    "compare",
    "counts",
    "exact",
    "failed",
    "float64",
    "from_proof",
    "markdown",
    "measured",
    "passed",
    "property_check",
    "remeasuring",
    "require_float64",
    "seeded_settings",
    "run_check",
    "run_claims",
    "sections",
    "select",
    "status_of",
    "sympy_identity",
    "table_lines",
    "undecided",
    "verdict_counts",
    "verdict_of",
    "with_data",
    "write_report",
]

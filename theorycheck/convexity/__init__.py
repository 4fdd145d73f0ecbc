"""Logits-convexity checker: stages (structure, vocabulary invariance, formal, search,
float64 re-check) that each return a ``StageRecord``, and one pure combiner."""

from theorycheck.convexity._check import (
    ConvexityResult,
    check_convexity,
    local_check,
    sanity_check,
)
from theorycheck.convexity._combine import Decision, combine
from theorycheck.convexity._report import write_report
from theorycheck.convexity._types import (
    Scope,
    Stage,
    StageRecord,
    StageStatus,
    StructureFamily,
    Verdict,
)

__all__ = [
    "ConvexityResult",
    "Decision",
    "StructureFamily",
    "StageRecord",
    "Scope",
    "Stage",
    "StageStatus",
    "Verdict",
    "check_convexity",
    "combine",
    "local_check",
    "sanity_check",
    "write_report",
]

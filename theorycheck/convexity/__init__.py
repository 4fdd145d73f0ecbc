"""Logits-convexity checker: stages (structure, vocabulary invariance, formal, search,
float64 re-check) that each return a ``MethodResult``, and one pure combiner."""

from theorycheck.convexity._check import (
    ConvexityResult,
    check_convexity,
    local_check,
    sanity_check,
)
from theorycheck.convexity._combine import Decision, combine
from theorycheck.convexity._report import write_report
from theorycheck.convexity._types import (
    Family,
    MethodResult,
    Scope,
    Stage,
    Status,
    Verdict,
)

__all__ = [
    "ConvexityResult",
    "Decision",
    "Family",
    "MethodResult",
    "Scope",
    "Stage",
    "Status",
    "Verdict",
    "check_convexity",
    "combine",
    "local_check",
    "sanity_check",
    "write_report",
]

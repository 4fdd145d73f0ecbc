"""Logits-convexity checker: structure → symbolic → formal (z3) → numeric search."""

from theorycheck.convexity._check import (
    ConvexityResult,
    check_convexity,
    local_check,
    sanity_check,
)

__all__ = ["ConvexityResult", "check_convexity", "local_check", "sanity_check"]

"""Formal engines (never import jax): z3 for polynomial claims in probability
coordinates, validated interval bisection for one-variable transcendental ones."""

from theorycheck.formal._bisect import (
    LINE,
    UNIT,
    CellProof,
    Certificate,
    Chart,
    IntervalResult,
    prove_nonnegative,
)
from theorycheck.formal._certificate import verify_certificate
from theorycheck.formal._encode import encode
from theorycheck.formal._prove import ProofResult, prove
from theorycheck.formal._regions import Segment, intersect, region_text, sign_regions
from theorycheck.formal._theorems import (
    TheoremClaim,
    prove_sampled_token_theorem,
    sampled_token_claims,
)

__all__ = [
    "LINE",
    "UNIT",
    "CellProof",
    "Certificate",
    "Chart",
    "IntervalResult",
    "ProofResult",
    "Segment",
    "TheoremClaim",
    "encode",
    "intersect",
    "prove_nonnegative",
    "region_text",
    "sign_regions",
    "prove",
    "prove_sampled_token_theorem",
    "sampled_token_claims",
    "verify_certificate",
]

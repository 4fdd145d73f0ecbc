"""z3 engine (never imports jax): claims in probability coordinates, proved or
refuted."""

from theorycheck.formal._encode import encode
from theorycheck.formal._prove import ProofResult, prove
from theorycheck.formal._theorems import (
    TheoremClaim,
    prove_sampled_token_theorem,
    sampled_token_claims,
)

__all__ = [
    "ProofResult",
    "TheoremClaim",
    "encode",
    "prove",
    "prove_sampled_token_theorem",
    "sampled_token_claims",
]

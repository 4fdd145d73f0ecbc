r"""The sampled-token structure theorem, proved with z3 in reduced coordinates.

For :math:`L = f(\log\pi_k)` with :math:`H = f''vv^\top - f'S`, the quadratic form
reduces
(law of total variance; the identity is checked symbolically by
:func:`theorycheck.symbolic.total_variance_gap`) to

.. math::
    Q(a, \sigma^2) = a^2\Big(f'' - f'\tfrac{p}{1-p}\Big) - f'(1-p)\,\sigma^2,
    \qquad p = \pi_k \in (0, 1),\ \sigma^2 \ge 0 ,

with :math:`\sigma^2` free for :math:`V \ge 3` and :math:`\sigma^2 = 0` for
:math:`V = 2`. The claims below are the two directions of the PSD characterisation, in
the variables ``p, a, s`` (= σ²), ``f1`` (= f'), ``f2`` (= f''), everything multiplied
by the positive factors :math:`p` and :math:`1-p`.
"""

from __future__ import annotations

import dataclasses

import sympy as sp

from theorycheck.formal._prove import ProofResult, prove

__all__ = ["TheoremClaim", "prove_sampled_token_theorem", "sampled_token_claims"]


@dataclasses.dataclass(frozen=True)
class TheoremClaim:
    """One claim: ``assumptions ⇒ claim`` for all real ``variables``."""

    id: str
    statement: str
    claim: sp.Basic
    variables: tuple[sp.Symbol, ...]
    assumptions: tuple[sp.Basic, ...]


def sampled_token_claims() -> list[TheoremClaim]:
    """The claims that make up the sampled-token PSD theorem (V ≥ 3 and V = 2).

    Returns:
        A list of :class:`TheoremClaim`.

    Examples:
        >>> [c.id for c in sampled_token_claims()][:2]
        ['v3_sufficient', 'v3_needs_fprime_nonpositive']
    """
    p, a, s, f1, f2 = sp.symbols("p a s f1 f2", real=True)
    # (1 - p) * Q, cleared of the denominator 1 - p > 0.
    q_scaled = a**2 * (f2 * (1 - p) - f1 * p) - f1 * (1 - p) ** 2 * s
    margin = f2 * (1 - p) - f1 * p  # = p * (-f' + f''(1-p)/p)
    box = (p > 0, p < 1)
    xs = (p, a, s, f1, f2)
    return [
        TheoremClaim(
            "v3_sufficient",
            "f' <= 0 and -f' + f''(1-p)/p >= 0 imply Q >= 0 for all a, s >= 0",
            q_scaled >= 0,
            xs,
            box + (s >= 0, f1 <= 0, margin >= 0),
        ),
        TheoremClaim(
            "v3_needs_fprime_nonpositive",
            "f' > 0 gives Q(a=0, s=1) < 0 (a direction with a = 0, V >= 3)",
            q_scaled.subs({a: 0, s: 1}) < 0,
            xs,
            box + (f1 > 0,),
        ),
        TheoremClaim(
            "v3_needs_margin",
            "-f' + f''(1-p)/p < 0 gives Q(a=1, s=0) < 0",
            q_scaled.subs({a: 1, s: 0}) < 0,
            xs,
            box + (margin < 0,),
        ),
        TheoremClaim(
            "v2_sufficient",
            "V = 2: f''(1-p) - f' p >= 0 implies Q(a, 0) >= 0",
            q_scaled.subs(s, 0) >= 0,
            xs,
            box + (margin >= 0,),
        ),
        TheoremClaim(
            "v2_necessary",
            "V = 2: f''(1-p) - f' p < 0 gives Q(1, 0) < 0",
            q_scaled.subs({a: 1, s: 0}) < 0,
            xs,
            box + (margin < 0,),
        ),
    ]


def prove_sampled_token_theorem(timeout_ms: int = 10_000) -> dict[str, ProofResult]:
    r"""Proves every claim of :func:`sampled_token_claims` with z3.

    Args:
        timeout_ms: per-claim timeout.

    Returns:
        claim id -> :class:`ProofResult` (all ``"proved"`` when the theorem holds).

    Examples:
        >>> {r.status for r in prove_sampled_token_theorem().values()}
        {'proved'}
    """
    return {
        c.id: prove(
            c.claim, c.variables, assumptions=c.assumptions, timeout_ms=timeout_ms
        )
        for c in sampled_token_claims()
    }

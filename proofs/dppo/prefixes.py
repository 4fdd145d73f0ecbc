r"""A token ratio alone does not correct the distribution of earlier prefixes.

The survey's sentence, read with DPPO's Theorem 3.1 (``dppo.theorem3_1``):

.. math::
    J(\pi) - J(\mu) = \underbrace{E_{y\sim\mu}\big[R(y)\textstyle\sum_t (r_t - 1)\big]}
        _{L'_\mu(\pi):\ \text{token ratios only}} - \Delta(\mu, \pi), \quad
    \Delta = E_{y\sim\mu}\Big[R(y) \sum_t (r_t - 1)
        \big(1 - \textstyle\prod_{j>t} r_j\big)\Big]

At T = 1 there is no earlier prefix and Δ ≡ 0; from T = 2 on Δ is not identically 0,
so the token-ratio surrogate misses J's change by Δ: the shift of the prefixes'
distribution that the later ratios would weigh.
"""

from __future__ import annotations

import random
from fractions import Fraction

import sympy as sp

from theorycheck.claims import (
    Check,
    CheckResult,
    Claim,
    Kind,
    Method,
    failed,
    passed,
)

from ._common import SOURCE
from .theorems import (
    _symbolic_tree,
    decomposition,
    prefixes,
    random_policy,
    sequences,
)


def _enumeration(quick: bool = False) -> CheckResult:
    rng = random.Random(3)
    trees = 5 if quick else 40
    seen = {1: [], 2: []}
    for horizon in (1, 2):
        seqs = sequences(2, horizon, False)
        prefs = prefixes(seqs)
        for _ in range(trees):
            mu, pi = (random_policy(rng, prefs, 2) for _ in "mp")
            reward = {y: Fraction(rng.randint(-5, 5), 2) for y in seqs}
            diff, lp, delta = decomposition(mu, pi, reward, seqs)
            if diff != lp - delta:
                return failed(
                    "J(pi) - J(mu) != L' - Delta (Theorem 3.1's identity broken)",
                    {"horizon": horizon, "diff": str(diff), "lp": str(lp)},
                )
            seen[horizon].append(delta)
    if any(d != 0 for d in seen[1]):
        return failed(
            "Delta != 0 at T = 1 (no earlier prefix)",
            {"delta": [str(d) for d in seen[1] if d != 0][:1]},
        )
    nonzero = sum(d != 0 for d in seen[2])
    if not nonzero:
        return failed(
            f"Delta = 0 on all {trees} random trees at T = 2",
            {"trees": trees, "horizon": 2},
        )
    example = next(d for d in seen[2] if d != 0)
    return passed(
        f"exact enumeration, V = 2: Delta = 0 on all {trees} random trees at T = 1; "
        f"at T = 2, J(pi) - J(mu) = L' - Delta with Delta != 0 on {nonzero} of {trees} "
        f"(e.g. Delta = {example}): the token-ratio surrogate L' misses it",
        nonzero=nonzero,
        trees=trees,
    )


def _symbolic(quick: bool = False) -> CheckResult:
    out = {}
    for horizon in (1, 2):
        mu, pi, reward, seqs, _, _ = _symbolic_tree(2, horizon)
        out[horizon] = sp.factor(sp.together(decomposition(mu, pi, reward, seqs)[2]))
    if out[1] != 0:
        return failed("sympy: Delta is not 0 at T = 1", {"delta": str(out[1])})
    if out[2] == 0:
        return failed("sympy: Delta is identically 0 at T = 2", {"horizon": 2})
    terms = len(sp.Add.make_args(sp.expand(out[2])))
    return passed(
        "sympy, symbolic mu, pi, R, V = 2: Delta simplifies to 0 at T = 1 and to a "
        f"nonzero rational function at T = 2 ({terms} terms)",
    )


TOKEN_RATIO_MISSES_PREFIX_SHIFT = Claim(
    id="dppo.token_ratio_misses_prefix_shift",
    source="seed 000 (survey), the denominator paragraph; read with "
    f"{SOURCE}, Theorem 3.1's Delta",
    provenance="PAPER",
    quote=(
        '"A token ratio alone does not fully correct the distribution of earlier '
        "prefixes.\" (survey); J(pi) - J(mu) = L'_mu(pi) - Delta(mu, pi) (DPPO Thm. "
        "3.1)"
    ),
    location="survey: 'the denominator must be explicit' paragraph; DPPO Theorem "
    "3.1, Eq. (6)",
    kind=Kind.REMARK,
    assumptions=(
        "sequence reward, gamma = 1, horizon T, full-support mu",
        "'corrects' read as: the token-ratio surrogate L' equals J(pi) - J(mu)",
    ),
    statement=(
        "The token-ratio surrogate L'_mu(pi) = E_mu[R sum_t (r_t - 1)] misses J(pi) - "
        "J(mu) by Delta(mu, pi), which is 0 at T = 1 (no earlier prefix) but not "
        "identically 0 from T = 2 on: token ratios alone do not correct the shift of "
        "the earlier prefixes' distribution."
    ),
    checks=(
        Check("exact enumeration, V = 2, T = 1 and 2", Method.NUMERIC, _enumeration),
        Check("sympy, symbolic tree, V = 2", Method.SYMBOLIC, _symbolic),
    ),
)

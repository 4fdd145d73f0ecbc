r"""The ratio direction and the Ḋ direction can disagree in sign (abstract; §4.2).

.. math::
    \mathrm{sign}\big(\hat A(r-1)\big) \ne \mathrm{sign}\big(\hat A\,\dot D\big)
    \iff \mathrm{sign}(\pi_k - \mu_k) \ne \mathrm{sign}\big(\pi_k - \mu_k
        + \textstyle\sum_i \pi_i(\mu_i - \pi_i)\big)

A z3 witness on the simplex (V = 3), and the measured rate on SmolLM2: the probability,
under mu, that the sampled token's two directions disagree.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import sympy as sp

from theorycheck.claims import (
    Check,
    CheckResult,
    Claim,
    Kind,
    Method,
    passed,
    require_float64,
    undecided,
)

from ._common import SOURCE, precision_pair, simplex


def ddot_kl(mu, pi, k):
    """Prop. 1's Ḋ (local + global)."""
    return pi[k] - mu[k] + sum(pi[i] * (mu[i] - pi[i]) for i in range(len(pi)))


def global_rows(mu: np.ndarray, pi: np.ndarray) -> np.ndarray:
    """Prop. 1's global term per row, ``[N, 1]`` (the same for every sampled k)."""
    return np.sum(pi * (mu - pi), axis=-1, keepdims=True)


def _sign(x) -> int:
    return (x > 0) - (x < 0)


def _z3_witness() -> CheckResult:
    from theorycheck.formal import prove

    p = sp.symbols("p0:3", real=True)
    m = sp.symbols("m0:3", real=True)
    agree = (p[0] - m[0]) * ddot_kl(m, p, 0) >= 0
    res = prove(agree, [*p, *m], assumptions=[*simplex(p), *simplex(m)])
    if res.status != "refuted":
        return undecided(f"z3 found no disagreement ({res.status}): {res.detail}")
    pt = {s: Fraction(res.counterexample[s.name]) for s in [*p, *m]}
    pv, mv = [pt[s] for s in p], [pt[s] for s in m]
    local, dd = pv[0] - mv[0], ddot_kl(mv, pv, 0)
    ok = _sign(local) != _sign(dd) and sum(pv) == 1 == sum(mv)
    witness = {"pi": [str(x) for x in pv], "mu": [str(x) for x in mv], "k": 0}
    witness.update({"local": str(local), "ddot": str(dd), "adv": 1})
    return (passed if ok else undecided)(
        f"z3 witness (re-checked in exact rationals): sign(r - 1) = {_sign(local)}, "
        f"sign(Ḋ) = {_sign(dd)} at mu = {witness['mu']}, pi = {witness['pi']}, k = 0",
        data={"witness": witness},
    )


def _measure(quick: bool = False) -> CheckResult:
    from theorycheck.numeric import ddot

    require_float64()
    mu, z, pi = precision_pair(quick)
    glob = global_rows(mu, pi)
    local = pi - mu
    disagree = np.sign(local) != np.sign(local + glob)
    rate = np.sum(mu * disagree, axis=-1)  # P_{k ~ mu}(the two signs disagree)
    # Second route: the library's Ḋ at the most likely disagreeing token per position.
    rechecked, examples = 0, []
    for pos in range(len(mu)):
        cand = np.flatnonzero(disagree[pos])
        if cand.size == 0:
            continue
        k = int(cand[np.argmax(mu[pos, cand])])
        res = ddot(np.log(mu[pos]), z[pos], k)
        if np.sign(float(res.local)) != np.sign(float(res.ddot)):
            rechecked += 1
            if len(examples) < 3:
                examples.append(
                    {
                        "position": pos,
                        "token": k,
                        "mu_k": float(mu[pos, k]),
                        "local": float(res.local),
                        "ddot": float(res.ddot),
                    }
                )
    kl = np.sum(mu * (np.log(mu) - np.log(pi)), axis=-1)
    data = {
        "perturbation": "rollout engine in bfloat16 (mu) vs trainer in float32 (pi), "
        "same SmolLM2-135M weights, teacher-forced text",
        "positions": len(mu),
        "mean_disagreement_rate": float(rate.mean()),
        "max_disagreement_rate": float(rate.max()),
        "positions_with_disagreement": int(np.sum(rate > 0)),
        "rechecked_with_numeric_ddot": rechecked,
        "median_kl": float(np.median(kl)),
        "examples": examples,
    }
    ok = rechecked > 0 and bool(np.all(rate >= 0))
    return (passed if ok else undecided)(
        f"SmolLM2, bfloat16 rollout vs float32 trainer, {len(mu)} positions: a token "
        f"sampled from mu has sign(r - 1) != sign(Ḋ) with probability "
        f"{rate.mean():.3f} on average (max {rate.max():.3f}); {rechecked} positions "
        f"re-checked with theorycheck.numeric.ddot; median KL {np.median(kl):.2e}",
        data=data,
    )


SIGN_DISAGREEMENT_EXISTS = Claim(
    id="pdm.sign_disagreement_exists",
    source=f"{SOURCE}, abstract and §4.2 (research notes §1.1, §1.11)",
    provenance="PAPER",
    quote=(
        '"We observe that this ratio-based direction criterion is a single-sample '
        "proxy that can disagree in sign with the change of the divergence that "
        'defines the proximity criterion." (abstract)'
    ),
    location="abstract; §4.2",
    kind=Kind.PROPOSITION,
    assumptions=(
        "forward KL, v = e_k - pi",
        "mu_k > 0",
    ),
    statement=(
        "The ratio direction sign(A (r - 1)) and the divergence direction sign(A Ḋ) "
        "(forward KL, v = e_k - pi) can disagree; on real next-token distributions "
        "they do, at a measurable rate."
    ),
    objection=(
        "Major comment 1: only ~82 of 1435 out-of-region tokens per seed (~5.7%) "
        "disagree in the paper's analysis."
    ),
    checks=(
        Check("z3 witness on the simplex, V = 3", Method.Z3, _z3_witness),
        Check(
            "SmolLM2 next-token distributions, bfloat16 vs float32",
            Method.MEASUREMENT,
            _measure,
        ),
    ),
)

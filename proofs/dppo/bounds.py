r"""DPPO Eqs. (13)-(16): the binary and top-K divergences are lower bounds of the full
divergence.

.. math::
    D_{Bin}(\mu_k \| \pi_k) \le D(\mu\|\pi), \qquad
    D_{TopK}(\mu\|\pi) \le D(\mu\|\pi) \qquad (D = \mathrm{TV}\ \text{or KL})

Both are coarse-grainings (the data-processing inequality). For KL the gap is exact:
:math:`D - D_{coarse} = \sum_{B} \mu_B\,\mathrm{KL}(\mu|_B \,\|\, \pi|_B) \ge 0`
over the merged buckets B. The paper states the bounds [PAPER]; its proof (App. C)
is NOT FOUND.
"""

from __future__ import annotations

import random

import numpy as np
import sympy as sp

from theorycheck.claims import (
    Check,
    CheckResult,
    Claim,
    Kind,
    Method,
    failed,
    from_proof,
    passed,
    require_float64,
    sympy_identity,
)

from ._common import SOURCE, kl_terms, random_pairs, simplex, sym_abs


def _positive_points(*symbols):
    """Exact positive rational substitutions (for refuting a broken identity)."""

    def gen():
        rng = random.Random(0)
        while True:
            yield {s: sp.Rational(rng.randint(1, 9), 10) for s in symbols}

    return gen


def tv(m, p):
    return sum(sym_abs(a - b) for a, b in zip(m, p)) / 2


def binary_tv(mk, pk):
    """Eq. 13."""
    return sym_abs(mk - pk)


def _z3_binary_tv() -> CheckResult:
    from theorycheck.formal import prove

    p, m = sp.symbols("p0:4", real=True), sp.symbols("m0:4", real=True)
    return from_proof(
        lambda: prove(
            binary_tv(m[0], p[0]) <= tv(m, p),
            [*p, *m],
            assumptions=[*simplex(p), *simplex(m)],
        ),
        "|mu_k - pi_k| <= 1/2 sum_i |mu_i - pi_i| on the open simplex, V = 4",
    )


def _symbolic_binary_kl() -> CheckResult:
    p = sp.symbols("p0:3", positive=True)
    m = sp.symbols("m0:3", positive=True)
    full = kl_terms(m, p)
    rest_m, rest_p = m[1] + m[2], p[1] + p[2]
    binary = kl_terms([m[0], rest_m], [p[0], rest_p])  # Eq. 14
    within = kl_terms([m[1] / rest_m, m[2] / rest_m], [p[1] / rest_p, p[2] / rest_p])
    gap = sp.expand_log(full - binary - rest_m * within, force=True)
    return sympy_identity(
        sp.expand(gap),
        what="KL - binary KL = mu_rest * KL(mu|rest || pi|rest) (chain rule, V = 3), "
        ">= 0 by Gibbs' inequality",
        points=_positive_points(*p, *m),
    )


def _numeric_binary(quick: bool = False) -> CheckResult:
    from theorycheck.numeric import binary_kl, divergence
    from theorycheck.numeric import binary_tv as bin_tv

    require_float64()
    n = 50 if quick else 400
    mu, z, k = random_pairs(n, 500, seed=29)
    worst = np.inf
    for mi, zi, ki in zip(mu, z, k):
        pi = np.exp(zi - zi.max())
        pi /= pi.sum()
        lb = np.log(mi)
        gaps = (
            float(divergence(lb, zi, ki, kind="kl")) - float(binary_kl(pi[ki], mi[ki])),
            float(divergence(lb, zi, ki, kind="tv")) - float(bin_tv(pi[ki], mi[ki])),
        )
        worst = min(worst, *gaps)
        if min(gaps) < -1e-12:
            return failed(
                f"binary divergence exceeds the full one by {-min(gaps):.3g}",
                counterexample={"mu": mi.tolist(), "logits": zi.tolist(), "k": int(ki)},
            )
    return passed(
        f"theorycheck.numeric: full - binary >= 0 for KL and TV at {n} points, V = 500 "
        f"(smallest gap {worst:.3g})",
        data={"points": n, "smallest_gap": worst},
    )


BINARY_DIVERGENCE_LOWER_BOUND = Claim(
    id="dppo.binary_divergence_lower_bound",
    source=f"{SOURCE}, Eq. (13)-(14); proof in App. C (NOT FOUND)",
    provenance="PAPER",
    quote=(
        "D_Bin_TV(t) = |mu(a_t|s_t) - pi(a_t|s_t)| (13); D_Bin_KL(t) = mu_k "
        "log(mu_k/pi_k) + (1 - mu_k) log((1 - mu_k)/(1 - pi_k)) (14); both are lower "
        "bounds of the true divergence (proof in App. C, NOT FOUND)."
    ),
    location="Eqs. (13)-(14); App. C",
    kind=Kind.PROPOSITION,
    assumptions=("pi_k > 0 wherever mu_k > 0 (finite KL)",),
    statement=(
        "The binary divergences never exceed the full ones: |mu_k - pi_k| <= "
        "TV(mu, pi) and KL(Bern(mu_k) || Bern(pi_k)) <= KL(mu || pi)."
    ),
    checks=(
        Check("z3, binary TV, V = 4", Method.Z3, _z3_binary_tv),
        Check(
            "sympy chain rule, binary KL, V = 3", Method.SYMBOLIC, _symbolic_binary_kl
        ),
        Check("numeric core, V = 500", Method.NUMERIC, _numeric_binary),
    ),
)


def _z3_topk_tv() -> CheckResult:
    from theorycheck.formal import prove

    p, m = sp.symbols("p0:5", real=True), sp.symbols("m0:5", real=True)
    coarse = tv([m[0], m[1], m[2] + m[3] + m[4]], [p[0], p[1], p[2] + p[3] + p[4]])
    return from_proof(
        lambda: prove(
            coarse <= tv(m, p), [*p, *m], assumptions=[*simplex(p), *simplex(m)]
        ),
        "top-K TV (Eq. 15; S = {0, 1}, tail {2, 3, 4}) <= TV, open simplex, V = 5",
    )


def _symbolic_topk_kl() -> CheckResult:
    p = sp.symbols("p0:4", positive=True)
    m = sp.symbols("m0:4", positive=True)
    mt, pt = m[2] + m[3], p[2] + p[3]
    coarse = kl_terms([m[0], m[1], mt], [p[0], p[1], pt])  # Eq. 16
    within = kl_terms([m[2] / mt, m[3] / mt], [p[2] / pt, p[3] / pt])
    gap = sp.expand_log(kl_terms(m, p) - coarse - mt * within, force=True)
    return sympy_identity(
        sp.expand(gap),
        what="KL - top-K KL = mu_T * KL(mu|tail || pi|tail) (chain rule, S = {0, 1}, "
        "V = 4), >= 0 by Gibbs' inequality",
        points=_positive_points(*p, *m),
    )


def _numeric_topk(quick: bool = False) -> CheckResult:
    from theorycheck.numeric import divergence

    require_float64()
    n = 50 if quick else 400
    mu, z, k = random_pairs(n, 500, seed=31)
    lb = np.log(mu)
    worst, count = np.inf, 0
    for kind in ("kl", "tv"):
        full = np.asarray(divergence(lb, z, k, kind=kind))
        for topk in (5, 20):
            for support in ("union", "k_slots"):
                part = np.asarray(
                    divergence(
                        lb, z, k, kind=f"topk_{kind}", topk=topk, support=support
                    )
                )
                gap = full - part
                count += gap.size
                worst = min(worst, float(gap.min()))
                if gap.min() < -1e-12:
                    i = int(np.argmin(gap))
                    return failed(
                        f"top-K {kind} exceeds the full one by {-gap[i]:.3g}",
                        counterexample={
                            "mu": mu[i].tolist(),
                            "logits": z[i].tolist(),
                            "k": int(k[i]),
                            "topk": topk,
                            "support": support,
                        },
                    )
    return passed(
        f"theorycheck.numeric: full - top-K >= 0 in {count} cases (KL and TV, K in "
        f"5/20, supports union and k_slots, V = 500; smallest gap {worst:.3g})",
        data={"cases": count, "smallest_gap": worst},
    )


TOPK_DIVERGENCE_LOWER_BOUND = Claim(
    id="dppo.topk_divergence_lower_bound",
    source=f"{SOURCE}, Eq. (15)-(16); proof in App. C (NOT FOUND)",
    provenance="PAPER",
    quote=(
        "A'_t = TopK(mu(.|s_t), K) ∪ {a_t}, A''_t = A'_t ∪ {other}, p(other) = 1 - "
        "sum_{a in A'_t} p(a); D_TopK_TV(t) = 1/2 sum_{a in A''_t} |p^mu(a) - p^pi(a)|"
        " (15); D_TopK_KL(t) = sum_{a in A''_t} p^mu(a) log(p^mu(a)/p^pi(a)) (16); "
        "lower bounds of the true divergence (proof in App. C, NOT FOUND)."
    ),
    location="Eqs. (15)-(16); App. C",
    kind=Kind.PROPOSITION,
    assumptions=(
        (
            "support TopK(mu, K) plus the sampled token, one 'other' bucket (and the "
            "official code's K-slot support)"
        ),
        "pi > 0 wherever mu > 0 (finite KL)",
    ),
    statement=(
        "The top-K divergences (support TopK(mu, K) with k, plus one 'other' bucket) "
        "never exceed the full TV and KL."
    ),
    checks=(
        Check("z3, top-K TV, V = 5", Method.Z3, _z3_topk_tv),
        Check("sympy chain rule, top-K KL, V = 4", Method.SYMBOLIC, _symbolic_topk_kl),
        Check("numeric core, V = 500", Method.NUMERIC, _numeric_topk),
    ),
)

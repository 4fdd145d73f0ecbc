r"""The numeric core's divergences are DPPO's formulas (two-sided: equal, not bounded).

.. math::
    D_{TV} = \tfrac12 \textstyle\sum_i |\mu_i - \pi_i|, \quad
    D_{Bin\,TV} = |\mu_k - \pi_k| \ (13), \quad
    D_{Bin\,KL} = \mu_k \log\tfrac{\mu_k}{\pi_k}
        + (1-\mu_k)\log\tfrac{1-\mu_k}{1-\pi_k} \ (14),

    D_{TopK\,TV} = \tfrac12 \textstyle\sum_{a \in A''} |p^\mu(a) - p^\pi(a)| \ (15),
    \quad
    D_{TopK\,KL} = \textstyle\sum_{a \in A''} p^\mu(a) \log\tfrac{p^\mu(a)}{p^\pi(a)}
    \ (16),

with :math:`A' = \mathrm{TopK}(\mu, K) \cup \{k\}` and :math:`A'' = A' \cup
\{\text{other}\}`. The lower-bound claims (``dppo.binary_divergence_lower_bound``,
``dppo.topk_divergence_lower_bound``) are one-sided: a core that doubled TV (the ½
dropped) would still pass them. This claim pins the core to the formulas both ways.
"""

from __future__ import annotations

import random
from fractions import Fraction

import mpmath
import numpy as np

from theorycheck.claims import (
    Check,
    CheckResult,
    Claim,
    Kind,
    Method,
    compare,
    property_check,
    require_float64,
)

from ._common import SOURCE, softmax

#: The factor of D_TV in front of the L1 distance (Eq. (4)'s TV, Eq. (15)).
TV_FACTOR = Fraction(1, 2)
#: The sizes of the exact points: vocabulary V and K (top-K).
VOCAB, TOPK = 7, 2
#: The vocabulary sizes of the property run.
PROPERTY_VOCABS = (5, 16)
KINDS = ("tv", "kl", "binary_tv", "binary_kl", "topk_tv", "topk_kl")


def _reduced(mu, pi, k, topk):
    """(p^mu, p^pi) on A'' = TopK(mu, K) ∪ {k} ∪ {other} (Eq. (15)-(16))."""
    order = sorted(range(len(mu)), key=lambda i: (-mu[i], i))
    keep = sorted(set(order[:topk]) | {k})
    pm = [mu[i] for i in keep]
    pp = [pi[i] for i in keep]
    return [*pm, 1 - sum(pm)], [*pp, 1 - sum(pp)]


def _tv(m, p):
    return TV_FACTOR * sum(abs(a - b) for a, b in zip(m, p))


def _kl(m, p):
    return mpmath.fsum(_kl_term(a, b) for a, b in zip(m, p))


def _kl_term(a: Fraction, b: Fraction):
    if a == 0:
        return mpmath.mpf(0)
    fa = mpmath.mpf(a.numerator) / a.denominator
    fb = mpmath.mpf(b.numerator) / b.denominator
    return fa * mpmath.log(fa / fb)


def paper_divergence(mu, pi, k: int, kind: str, topk: int = TOPK):
    """Eqs. (4), (13)-(16) on exact rationals (TV exact, KL at 50 digits)."""
    if kind.startswith("binary"):
        m, p = [mu[k], 1 - mu[k]], [pi[k], 1 - pi[k]]
        return abs(mu[k] - pi[k]) if kind == "binary_tv" else _kl(m, p)
    if kind.startswith("topk"):
        mu, pi = _reduced(mu, pi, k, topk)
    return _tv(mu, pi) if kind.endswith("tv") else _kl(mu, pi)


def _exact_points(n: int):
    """n exact (mu, pi, k): random positive rationals on the simplex, V = 7."""
    rng = random.Random(5)
    for _ in range(n):
        raw = [[Fraction(rng.randint(1, 40)) for _ in range(VOCAB)] for _ in "mp"]
        mu, pi = ([x / sum(r) for x in r] for r in raw)
        yield mu, pi, rng.randrange(VOCAB)


def _core(mu, pi, k, kind, topk=TOPK) -> np.ndarray:
    """theorycheck.numeric.divergence on rows ``mu``, ``pi`` ([..., V]), ``k``."""
    from theorycheck.numeric import divergence

    lm = np.log(np.asarray(mu, dtype=np.float64))
    lp = np.log(np.asarray(pi, dtype=np.float64))
    return np.asarray(divergence(lm, lp, np.asarray(k), kind=kind, topk=topk))


def _exact(quick: bool = False) -> CheckResult:
    require_float64()
    points = list(_exact_points(4 if quick else 24))
    rows = [[[float(x) for x in p[i]] for p in points] for i in (0, 1)]
    ks = [p[2] for p in points]
    got, want = [], []
    with mpmath.workdps(50):
        for kind in KINDS:  # one batched call per kind
            got += _core(rows[0], rows[1], ks, kind).tolist()
            want += [float(paper_divergence(m, p, k, kind)) for m, p, k in points]
    return compare(
        f"theorycheck.numeric.divergence (float64) vs Eqs. (4), (13)-(16) in exact "
        f"rationals (TV) and 50 digits (KL), {len(points)} points, kinds "
        f"{', '.join(KINDS)}, V = {VOCAB}, K = {TOPK}, support TopK(mu) ∪ {{k}} ∪ "
        "{other}",
        got,
        want,
        rtol=1e-12,
        atol=1e-15,
    )


def _positive_part(m, p) -> float:
    """TV by another route: max_A mu(A) - pi(A) = sum_i (mu_i - pi_i)_+ (no ½)."""
    return float(np.maximum(np.asarray(m) - np.asarray(p), 0).sum())


def _property(quick: bool = False) -> CheckResult:
    from hypothesis import strategies as st

    require_float64()

    def dist(v):
        return st.lists(st.floats(-6, 6), min_size=v, max_size=v).map(
            lambda x: softmax(np.array(x))
        )

    # two vocabulary sizes and one K: each new shape is a new compilation
    case = st.sampled_from(PROPERTY_VOCABS).flatmap(
        lambda v: st.tuples(dist(v), dist(v), st.integers(0, v - 1))
    )

    def prop(c):
        mu, pi, k = c
        rm, rp = _reduced(list(mu), list(pi), k, TOPK)
        full_tv = float(_core(mu, pi, k, "tv"))
        top_tv = float(_core(mu, pi, k, "topk_tv"))
        bin_tv = float(_core(mu, pi, k, "binary_tv"))
        assert abs(full_tv - _positive_part(mu, pi)) <= 1e-12, (full_tv, "tv")
        assert abs(top_tv - _positive_part(rm, rp)) <= 1e-12, (top_tv, "topk_tv")
        assert abs(bin_tv - abs(mu[k] - pi[k])) <= 1e-12, (bin_tv, "binary_tv")
        assert bin_tv <= top_tv + 1e-12 <= full_tv + 2e-12  # coarse-graining order

    return property_check(
        prop,
        case,
        what="core TV = max_A mu(A) - pi(A) = sum (mu - pi)_+ on the full, top-K "
        f"(A'') and binary supports, and binary <= top-K <= full, V in "
        f"{PROPERTY_VOCABS}, K = {TOPK}",
        examples=100,
        quick_examples=20,
        describe=lambda c: {
            "mu": c[0].tolist(),
            "pi": c[1].tolist(),
            "k": c[2],
            "K": TOPK,
        },
    )


CORE_DIVERGENCES_MATCH_THE_PAPER = Claim(
    id="dppo.core_divergences_match_the_paper",
    source=f"{SOURCE}, Eqs. (4), (13)-(16); theorycheck.numeric.divergence",
    provenance="PAPER",
    quote=(
        "D_Bin_TV(t) = |mu(a_t|s_t) - pi(a_t|s_t)| (13); D_Bin_KL(t) = mu_k "
        "log(mu_k/pi_k) + (1 - mu_k) log((1 - mu_k)/(1 - pi_k)) (14); D_TopK_TV(t) = "
        "1/2 sum_{a in A''_t} |p^mu(a) - p^pi(a)| (15); D_TopK_KL(t) = sum_{a in "
        "A''_t} p^mu(a) log(p^mu(a)/p^pi(a)) (16); Pinsker D_TV^2 <= 1/2 D_KL (4)."
    ),
    location="Eqs. (4), (13)-(16)",
    kind=Kind.EQUATION,
    assumptions=(
        "full-support mu and pi",
        "top-K support A' = TopK(mu, K) ∪ {k} (the paper's union; support='union')",
    ),
    statement=(
        "theorycheck.numeric.divergence computes the paper's formulas: full TV = "
        "1/2 sum |mu - pi| and KL, binary TV and KL (Eqs. 13-14), top-K TV and KL "
        "over A'' (Eqs. 15-16), equal (not only bounded) within float64."
    ),
    checks=(
        Check("exact rationals, V = 7, every kind", Method.SYMBOLIC, _exact),
        Check("hypothesis, TV by max_A mu(A) - pi(A)", Method.PROPERTY, _property),
    ),
)

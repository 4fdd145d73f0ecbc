r"""Eq. 10-11: the two top-K estimators of Ḋ, and what each is exact for.

Support :math:`S = \mathrm{TopK}(\mu, K) \cup \{k\}`, tail masses
:math:`\mu_T = 1 - \sum_S \mu_i`, :math:`\pi_T = 1 - \sum_S \pi_i`:

.. math::
    \dot D_{agg} = (\pi_k - \mu_k) + \sum_{i\in S}\pi_i(\mu_i-\pi_i)
                   + \pi_T(\mu_T - \pi_T), \qquad
    \dot D_{unif} = \dots + \frac{\pi_T(\mu_T - \pi_T)}{V - |S|}

The paper's text is NOT FOUND; the estimators are INFERRED from third-party code and
what each is exact for is DERIVED (research notes §1.7).
"""

from __future__ import annotations

import numpy as np
import sympy as sp

from theorycheck.claims import (
    Check,
    CheckResult,
    Claim,
    Kind,
    Method,
    compare,
    require_float64,
    sympy_identity,
    with_data,
)

from ._common import SOURCE, random_points, rational_points, softmax


def aggregated(mu, pi, k, support):
    """Eq. 10 (aggregated tail)."""
    mu_t = 1 - sum(mu[i] for i in support)
    pi_t = 1 - sum(pi[i] for i in support)
    inside = sum(pi[i] * (mu[i] - pi[i]) for i in support)
    return pi[k] - mu[k] + inside + pi_t * (mu_t - pi_t)


def uniform(mu, pi, k, support, vocab):
    """Eq. 11 (uniform tail)."""
    mu_t = 1 - sum(mu[i] for i in support)
    pi_t = 1 - sum(pi[i] for i in support)
    inside = sum(pi[i] * (mu[i] - pi[i]) for i in support)
    return pi[k] - mu[k] + inside + pi_t * (mu_t - pi_t) / (vocab - len(support))


def _support(mu: np.ndarray, k: int, topk: int) -> list[int]:
    top = list(np.argsort(-mu, kind="stable")[:topk])
    return sorted(set(int(i) for i in top) | {int(k)})


def _symbolic_aggregated() -> CheckResult:
    # Reduced distribution on S = {0, 1} plus the tail bucket: logits y, q = softmax(y).
    y = sp.symbols("y0:3", real=True)
    m0, m1 = sp.symbols("m0 m1", positive=True)
    m = [m0, m1, 1 - m0 - m1]
    t = sp.Symbol("t", real=True)
    q = [sp.exp(yi) / sum(sp.exp(yj) for yj in y) for yi in y]
    v = [(1 if i == 0 else 0) - q[i] for i in range(3)]
    lse = sp.log(sum(sp.exp(y[j] + t * v[j]) for j in range(3)))
    d = sum(m[i] * (sp.log(m[i]) - (y[i] + t * v[i] - lse)) for i in range(3))
    exact = sp.diff(d, t).subs(t, 0)
    # The estimator sees S = {0, 1}; the tail bucket's masses are q2 and m2.
    estimate = aggregated(m[:2] + [0], q[:2] + [0], 0, [0, 1])

    def points():
        return rational_points(
            y,
            lambda rng: {
                m0: sp.Rational(rng.randint(1, 4), 10),
                m1: sp.Rational(rng.randint(1, 4), 10),
            },
        )

    return sympy_identity(
        exact - estimate,
        what="Eq. 10 = d/dt KL(mu~ || softmax(y + t(e_k - q))) at 0 on the reduced "
        "(|S|+1)-category distribution (S = {k, 1}, from the definition)",
        points=points,
    )


def _numeric_aggregated(quick: bool = False) -> CheckResult:
    import jax
    import jax.numpy as jnp

    from theorycheck.numeric import ddot

    require_float64()
    n = 20 if quick else 200
    mu, z, k = random_points(n, 200, seed=5)
    lib, formula, truth, full = [], [], [], []
    for i, (mi, zi, ki) in enumerate(zip(mu, z, k)):
        topk = 5 if i % 2 else 20
        pi = softmax(zi)
        s = _support(mi, ki, topk)
        pos = s.index(int(ki))
        mr = np.append(mi[s], 1 - mi[s].sum())
        pr = np.append(pi[s], 1 - pi[s].sum())
        v = np.eye(len(pr))[pos] - pr

        def kl(y, mr=mr):
            return jnp.sum(mr * (jnp.log(mr) - jax.nn.log_softmax(y)))

        _, dd = jax.jvp(kl, (jnp.log(jnp.asarray(pr)),), (jnp.asarray(v),))
        truth.append(float(dd))
        formula.append(aggregated(mi, pi, ki, s))
        res = ddot(np.log(mi), zi, ki, estimator="topk_aggregated", topk=topk)
        lib.append(float(res.ddot))
        full.append(float(ddot(np.log(mi), zi, ki).ddot))
    truth_arr = np.array(truth + truth)
    result = compare(
        f"Eq. 10 (module formula and theorycheck.numeric.ddot) vs jax.jvp on the "
        f"reduced distribution, {n} points, V = 200, K in (5, 20)",
        np.array(formula + lib),
        truth_arr,
        rtol=1e-9,
        atol=1e-13,
    )
    agree = float(np.mean(np.sign(truth) == np.sign(full)))
    data = {**result.data, "sign_agreement_with_full_ddot": agree}
    return with_data(result, data)


TOPK_AGGREGATED_EXACT_ON_REDUCED = Claim(
    id="pdm.topk_aggregated_exact_on_reduced",
    source=f"{SOURCE}, Eq. (10) (research notes §1.7)",
    provenance="INFERRED",
    quote=(
        "NOT FOUND (Eq. 10; research notes §1.7, INFERRED from a third-party "
        'implementation): "Ddot_agg = (pi_k - mu_k) + sum_{i in S} pi_i (mu_i - pi_i) '
        '+ pi_T (mu_T - pi_T)". The review: "two lightweight top-K estimators '
        '(aggregated-tail and uniform-tail)".'
    ),
    location="§3.3, Eq. (10)",
    kind=Kind.EQUATION,
    assumptions=(
        "support S = TopK(mu, K) ∪ {k}",
        "one aggregated tail bucket",
    ),
    statement=(
        "The aggregated-tail estimator (Eq. 10) is the exact Ḋ of the reduced "
        "(|S|+1)-category distribution (top-K support plus one tail bucket) moved "
        "along its own direction e_k - p~ (not the full-vocabulary direction)."
    ),
    checks=(
        Check(
            "sympy from the definition, S = {k, 1}",
            Method.SYMBOLIC,
            _symbolic_aggregated,
        ),
        Check(
            "jax.jvp on the reduced distribution, V = 200",
            Method.NUMERIC,
            _numeric_aggregated,
        ),
    ),
)


def _symbolic_uniform() -> CheckResult:
    n = sp.Symbol("n", positive=True, integer=True)
    i = sp.Symbol("i", positive=True, integer=True)
    p0, m0 = sp.symbols("p0 m0", positive=True)
    pt, mt = 1 - p0, 1 - m0
    # The exact tail sum when both tails are spread evenly over n tail tokens.
    tail_sum = sp.summation((pt / n) * (mt / n - pt / n), (i, 1, n))
    # Eq. 11 on S = {k} (V = n + 1), minus its local and support terms.
    tail_term = uniform([m0], [p0], 0, [0], n + 1) - (p0 - m0 + p0 * (m0 - p0))
    return sympy_identity(
        tail_sum - tail_term,
        what="with both tails uniform over n = V - |S| tokens, sum_{i in tail} "
        "pi_i (mu_i - pi_i) = Eq. 11's tail term pi_T (mu_T - pi_T) / n (symbolic n)",
        points=lambda: (
            {n: sp.Integer(j + 2), p0: sp.Rational(j + 1, 10), m0: sp.Rational(3, 10)}
            for j in range(8)
        ),
    )


def _numeric_uniform(quick: bool = False) -> CheckResult:
    from theorycheck.numeric import ddot

    require_float64()
    rng = np.random.default_rng(7)
    n, vocab, topk = (10 if quick else 100), 300, 10
    got, want, formula = [], [], []
    off = []
    for _ in range(n):
        head_mu, head_pi = rng.dirichlet(np.ones(topk)), rng.dirichlet(np.ones(topk))
        mt, pt = rng.uniform(0.05, 0.6), rng.uniform(0.05, 0.6)
        tail = vocab - topk
        mu = np.concatenate([head_mu * (1 - mt), np.full(tail, mt / tail)])
        pi = np.concatenate([head_pi * (1 - pt), np.full(tail, pt / tail)])
        k = int(rng.integers(0, topk))
        if mu[:topk].min() <= mt / tail:  # keep the top-K support = the head
            continue
        z = np.log(pi)
        got.append(
            float(ddot(np.log(mu), z, k, estimator="topk_uniform", topk=topk).ddot)
        )
        want.append(float(ddot(np.log(mu), z, k).ddot))
        formula.append(uniform(mu, pi, k, list(range(topk)), vocab))
        bumpy = pi * rng.uniform(0.5, 1.5, size=vocab)
        bumpy /= bumpy.sum()
        off.append(
            abs(
                float(
                    ddot(
                        np.log(mu),
                        np.log(bumpy),
                        k,
                        estimator="topk_uniform",
                        topk=topk,
                    ).ddot
                )
                - float(ddot(np.log(mu), np.log(bumpy), k).ddot)
            )
        )
    result = compare(
        f"Eq. 11 (theorycheck.numeric.ddot and the module formula) vs the exact full "
        f"Ḋ on uniform tails, {len(want)} points, V = {vocab}, K = {topk}",
        np.array(got + formula),
        np.array(want + want),
        rtol=1e-9,
        atol=1e-13,
    )
    data = {
        **result.data,
        "median_abs_error_on_nonuniform_tails": float(np.median(off)),
    }
    return with_data(result, data)


TOPK_UNIFORM_EXACT_ON_UNIFORM_TAIL = Claim(
    id="pdm.topk_uniform_exact_on_uniform_tail",
    source=f"{SOURCE}, Eq. (11) (research notes §1.7)",
    provenance="INFERRED",
    quote=(
        'NOT FOUND (Eq. 11; research notes §1.7, INFERRED): "Ddot_unif = (pi_k - mu_k)'
        ' + sum_{i in S} pi_i (mu_i - pi_i) + pi_T (mu_T - pi_T) / (V - |S|)".'
    ),
    location="§3.3, Eq. (11)",
    kind=Kind.EQUATION,
    assumptions=(
        "both tails (mu and pi outside S) uniform over the V - |S| tail tokens",
    ),
    statement=(
        "The uniform-tail estimator (Eq. 11) equals the exact full-vocabulary Ḋ when "
        "both tails (mu and pi outside S) are uniform over the V - |S| tail tokens."
    ),
    checks=(
        Check("sympy, symbolic tail size n", Method.SYMBOLIC, _symbolic_uniform),
        Check(
            "exact full Ḋ on uniform tails, V = 300", Method.NUMERIC, _numeric_uniform
        ),
    ),
)

r"""Appendix C (binary-KL reduction) and Appendix D (the TV extension, Eq. 34).

Appendix C (content NOT FOUND; DERIVED candidates, research notes §1.9): Prop. 1 on the
two categories {k, rest} gives :math:`\dot D_{bin} = 2(1-\pi_k)(\pi_k-\mu_k)`; the
binary KL of the full-vocabulary pi moves along v = e_k - pi at the rate
:math:`(\pi_k-\mu_k)(1-2\pi_k+\lVert\pi\rVert^2)/(1-\pi_k)`. Both have the sign of
r - 1, so the predictive mask on binary KL is DPPO's binary-KL mask.

Appendix D, Eq. (34), as quoted in the seed's extracted text (research notes §1.10 lists
it NOT FOUND), with :math:`s_i = \mathrm{sign}(\mu_i - \pi_i)`:

.. math::
    \dot D_{TV} = -\tfrac12 \sum_i s_i\, \pi_i \Big(v_i - \sum_j \pi_j v_j\Big)
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
    Outcome,
    compare,
    failed,
    from_proof,
    passed,
    require_float64,
    sympy_identity,
)

from ._common import (
    SOURCE,
    random_points,
    rational_points,
    simplex,
    softmax,
)


def binary_two_category(mu_k, pi_k):
    """Prop. 1 on {k, rest}."""
    return 2 * (1 - pi_k) * (pi_k - mu_k)


def binary_full(mu_k, pi, k):
    """Rate of the binary KL of the full pi along v = e_k - pi."""
    norm2 = sum(p * p for p in pi)
    return (pi[k] - mu_k) * (1 - 2 * pi[k] + norm2) / (1 - pi[k])


def _symbolic_binary() -> CheckResult:
    from theorycheck.symbolic import ddot_binary_kl

    y = sp.symbols("y0:2", real=True)
    m = sp.Symbol("m", positive=True)
    t = sp.Symbol("t", real=True)
    q = [sp.exp(yi) / (sp.exp(y[0]) + sp.exp(y[1])) for yi in y]
    v = [1 - q[0], -q[1]]
    lse = sp.log(sp.exp(y[0] + t * v[0]) + sp.exp(y[1] + t * v[1]))
    mm = [m, 1 - m]
    d = sum(mm[i] * (sp.log(mm[i]) - (y[i] + t * v[i] - lse)) for i in range(2))
    two = sp.diff(d, t).subs(t, 0) - binary_two_category(m, q[0])
    p = sp.symbols("p0:3", positive=True)
    rate_k = p[0] * (1 - 2 * p[0] + sum(x * x for x in p))  # Lemma 4 along e_k - pi
    full = ddot_binary_kl(m, p[0], rate_k) - binary_full(m, p, 0)

    def points():
        rng = random.Random(0)
        while True:
            sub = {s: sp.Rational(rng.randint(-5, 5), rng.randint(1, 3)) for s in y}
            sub.update({s: sp.Rational(rng.randint(1, 3), 10) for s in p})
            sub[m] = sp.Rational(rng.randint(1, 9), 10)
            yield sub

    return sympy_identity(
        [two, full],
        what="Prop. 1 on {k, rest} = 2(1-pi_k)(pi_k-mu_k) (from the definition), and "
        "the full-vocabulary binary-KL rate (chain rule of theorycheck.symbolic) = "
        "(pi_k-mu_k)(1-2pi_k+|pi|^2)/(1-pi_k)",
        points=points,
    )


def _z3_binary() -> CheckResult:
    from theorycheck.formal import prove

    p = sp.symbols("p0:3", real=True)
    m = sp.Symbol("m", real=True)
    rate = binary_full(m, p, 0)
    two = binary_two_category(m, p[0])
    claim = sp.And(
        (p[0] - m) * rate >= 0,
        sp.Implies(sp.Eq(rate, 0), sp.Eq(p[0], m)),
        (p[0] - m) * two >= 0,
        sp.Implies(sp.Eq(two, 0), sp.Eq(p[0], m)),
    )
    return from_proof(
        lambda: prove(claim, [*p, m], assumptions=[*simplex(p), m > 0, m < 1]),
        "both binary rates have the sign of pi_k - mu_k (= sign(r - 1)), "
        "open simplex, V = 3",
    )


def _numeric_binary(quick: bool = False) -> CheckResult:
    import jax

    from theorycheck.numeric import binary_kl, dppo_mask, predictive_mask

    require_float64()
    n = 50 if quick else 500
    mu, z, k = random_points(n, 50, seed=11)
    rows = np.arange(n)
    pi = softmax(z)
    v = np.eye(50)[k] - pi
    mk = mu[rows, k]

    @jax.jit
    def rates(zz, vv, mm, kk):  # one compiled jvp for every point
        def one(zi, vi, mi, ki):
            return jax.jvp(
                lambda x: binary_kl(jax.nn.softmax(x)[ki], mi), (zi,), (vi,)
            )[1]

        return jax.vmap(one)(zz, vv, mm, kk)

    got = [float(x) for x in np.asarray(rates(z, v, mk, k))]
    want = [binary_full(mk[i], pi[i], int(k[i])) for i in rows]
    div = np.asarray(binary_kl(pi[rows, k], mk))
    adv = np.where(rows % 2 == 1, 1.0, -1.0)
    pred = np.asarray(predictive_mask(div, np.array(want), adv, delta=0.05))
    ratio = np.asarray(dppo_mask(div, pi[rows, k] / mk, adv, delta=0.05))
    same = int(np.sum(pred == ratio))
    masked = int(np.sum(ratio == 0.0))
    result = compare(
        f"jax.jvp of theorycheck.numeric.binary_kl along v vs the rate, {n} points",
        got,
        want,
        rtol=1e-9,
        atol=1e-13,
    )
    if result.outcome is not Outcome.PASS:
        return result
    if same != n:
        return failed(
            f"predictive and DPPO binary-KL masks differ on {n - same} of {n} points",
            counterexample={"points_differing": n - same},
        )
    return passed(
        f"{result.detail}; predictive mask on binary KL = DPPO binary-KL mask on all "
        f"{n} points ({masked} of them masked; delta = 0.05, A = +-1)",
        data={**result.data, "mask_agreement": same, "masked": masked},
    )


BINARY_REDUCTION = Claim(
    id="pdm.binary_reduction",
    source=f"{SOURCE}, Appendix C (research notes §1.9)",
    provenance="NOT FOUND",
    quote=(
        'NOT FOUND (Appendix C; research notes §1.9, DERIVED/INFERRED): "Ddot_bin = 2 '
        "(1 - pi_k)(pi_k - mu_k) ... under the binary reduction the predictive "
        "direction coincides with PPO/DPPO's ratio direction, and the predictive mask "
        'reduces to the DPPO-Binary-KL mask". The review: "the binary-KL reduction '
        'check (Appendix C)".'
    ),
    location="Appendix C",
    kind=Kind.PROPOSITION,
    assumptions=(
        "forward KL",
        "the two-category distribution {k, rest}",
    ),
    statement=(
        "Under the binary reduction {k, rest}, Ḋ = 2(1 - pi_k)(pi_k - mu_k); the "
        "binary KL of the full pi moves along v at "
        "(pi_k - mu_k)(1 - 2pi_k + |pi|^2)/(1 - pi_k). "
        "Both have the sign of r - 1, so the predictive mask on binary KL is exactly "
        "DPPO's binary-KL mask (Appendix C's content is NOT FOUND; derived statement)."
    ),
    checks=(
        Check("sympy from the definition", Method.SYMBOLIC, _symbolic_binary),
        Check("z3 sign, open simplex, V = 3", Method.Z3, _z3_binary),
        Check("jax.jvp and the two masks, V = 50", Method.NUMERIC, _numeric_binary),
    ),
)


# --- Appendix D: TV ----------------------------------------------------------------


def eq34(mu, pi, v, sign=None):
    """Eq. 34 with s_i = sign(mu_i - pi_i) (or the given signs)."""
    s = sign if sign is not None else [np.sign(m - p) for m, p in zip(mu, pi)]
    mean = sum(pi[j] * v[j] for j in range(len(pi)))
    return -sp.Rational(1, 2) * sum(
        s[i] * pi[i] * (v[i] - mean) for i in range(len(pi))
    )


def _symbolic_tv() -> CheckResult:
    z = sp.symbols("z0:3", real=True)
    s = sp.symbols("s0:3", real=True)  # any fixed signs away from ties
    t = sp.Symbol("t", real=True)
    pi = [sp.exp(zi) / sum(sp.exp(zj) for zj in z) for zi in z]
    v = [(1 if i == 0 else 0) - pi[i] for i in range(3)]
    moved = [sp.exp(z[i] + t * v[i]) for i in range(3)]
    # TV = 1/2 sum_i |mu_i - pi_i(t)| = 1/2 sum_i s_i (mu_i - pi_i(t)) between ties.
    rate = [sp.diff(mi / sum(moved), t).subs(t, 0) for mi in moved]
    truth = -sp.Rational(1, 2) * sum(s[i] * rate[i] for i in range(3))
    derived = sp.Rational(1, 2) * (
        pi[0] * (-s[0] + sum(s[j] * pi[j] for j in range(3)))
        - sum(
            pi[j] ** 2 * (-s[j] + sum(s[i] * pi[i] for i in range(3))) for j in range(3)
        )
    )

    def points():
        return rational_points(z, lambda rng: {x: rng.choice([-1, 1]) for x in s})

    return sympy_identity(
        [truth - eq34(None, pi, v, sign=s), derived - eq34(None, pi, v, sign=s)],
        what="Eq. 34 = d/dt of 1/2 sum |mu_i - softmax(z + tv)_i| between ties (from "
        "the definition, any signs s, V = 3), = the derived 1/2[pi_k(s'_k - S') - "
        "sum pi_j^2 (s'_j - S')] with s' = -s",
        points=points,
    )


def _numeric_tv(quick: bool = False) -> CheckResult:
    import jax
    import jax.numpy as jnp

    from theorycheck.numeric import ddot

    require_float64()
    n = 30 if quick else 300
    mu, z, k = random_points(n, 100, seed=13)
    pis = softmax(z)
    vs = np.eye(100)[k] - pis

    @jax.jit
    def rates(zz, vv, mm):  # one compiled jvp for every point
        def one(zi, vi, mi):
            return jax.jvp(
                lambda x: 0.5 * jnp.sum(jnp.abs(mi - jax.nn.softmax(x))), (zi,), (vi,)
            )[1]

        return jax.vmap(one)(zz, vv, mm)

    got = [float(x) for x in np.asarray(rates(z, vs, mu))]
    lib = [float(x) for x in np.asarray(ddot(np.log(mu), z, k, kind="tv").ddot)]
    want = [float(eq34(mi, pi, v)) for mi, pi, v in zip(mu, pis, vs)]
    return compare(
        f"jax.jvp of TV and theorycheck.numeric.ddot(kind='tv') vs Eq. 34, {n} points, "
        "V = 100 (random points have no ties)",
        np.array(got + lib),
        np.array(want + want),
        rtol=1e-9,
        atol=1e-13,
    )


TV_EXTENSION = Claim(
    id="pdm.tv_extension",
    source=f"{SOURCE}, Appendix D, Eq. (34) (quoted in the seed's extracted text; "
    "research notes §1.10 list it NOT FOUND)",
    provenance="PAPER",
    quote=(
        '"On any fixed support, Lemma 4 gives the directional derivative of TV along '
        "the unit policy-gradient direction: Ḋ_TV = -1/2 sum_i s_i pi_i (v_i - sum_j "
        "pi_j v_j), where s_i = sign(mu_i - pi_i). (34)\" (the seed's extracted text)."
    ),
    location="Appendix D, Eq. (34)",
    kind=Kind.EQUATION,
    assumptions=(
        "a fixed support",
        "no pi_i = mu_i (TV differentiable there)",
    ),
    statement=(
        "Where no pi_i = mu_i, the TV divergence moves along v = e_k - pi at "
        "Ḋ_TV = -1/2 sum_i s_i pi_i (v_i - sum_j pi_j v_j), s_i = sign(mu_i - pi_i) "
        "(Eq. 34), equal to the derived "
        "1/2[pi_k (s'_k - S') - sum_j pi_j^2 (s'_j - S')]."
    ),
    checks=(
        Check("sympy from the definition, V = 3", Method.SYMBOLIC, _symbolic_tv),
        Check("jax.jvp and the numeric core, V = 100", Method.NUMERIC, _numeric_tv),
    ),
)

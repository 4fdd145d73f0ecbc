r"""Lemma 4 (softmax directional derivative): how pi moves along a logit direction v.

.. math::
    \frac{d\pi_i}{dt} = \pi_i\Big(v_i - \sum_j \pi_j v_j\Big), \qquad
    v = e_k - \pi:\
    \frac{d\pi_k}{dt} = \pi_k\Big((1-\pi_k)^2 + \sum_{i\ne k}\pi_i^2\Big) > 0

The Lemma's own text is NOT FOUND (research notes §1.4); the statement is DERIVED.
"""

from __future__ import annotations

import random

import numpy as np
import sympy as sp

from theorycheck.claims import (
    Check,
    Claim,
    Kind,
    Method,
    compare,
    from_proof,
    require_float64,
    sympy_identity,
)

from ._common import SOURCE, random_points, simplex, softmax


def rate(pi, v):
    """The lemma's dπ/dt along v (works on SymPy lists and numpy rows)."""
    mean = sum(pi[j] * v[j] for j in range(len(pi)))
    return [pi[i] * (v[i] - mean) for i in range(len(pi))]


def rate_k_factored(pi, k):
    """The lemma's positive form of dπ_k/dt along v = e_k - pi."""
    rest = sum(pi[i] ** 2 for i in range(len(pi)) if i != k)
    return pi[k] * ((1 - pi[k]) ** 2 + rest)


def _symbolic() -> object:
    z = sp.symbols("z0:3", real=True)
    v = sp.symbols("v0:3", real=True)
    t = sp.Symbol("t", real=True)
    moved = [sp.exp(z[i] + t * v[i]) for i in range(3)]
    total = sum(moved)
    truth = [sp.diff(m / total, t).subs(t, 0) for m in moved]
    pi = [sp.exp(zi) / sum(sp.exp(zj) for zj in z) for zi in z]
    general = [a - b for a, b in zip(truth, rate(pi, v))]
    p = sp.symbols("p0:4", positive=True)
    direction = [(1 if i == 0 else 0) - p[i] for i in range(4)]
    factored = sp.expand(rate(p, direction)[0] - rate_k_factored(p, 0))

    def points():
        rng = random.Random(0)
        while True:
            sub = {s: sp.Rational(rng.randint(-9, 9), rng.randint(1, 5)) for s in z + v}
            sub.update({s: sp.Rational(rng.randint(1, 9), 10) for s in p})
            yield sub

    return sympy_identity(
        [*general, factored],
        what="d softmax(z+tv)_i/dt at t=0 = pi_i(v_i - pi.v) (V=3, any v), and "
        "along v=e_k-pi: pi_k(1-2pi_k+|pi|^2) = "
        "pi_k((1-pi_k)^2+sum_{i!=k} pi_i^2) (V=4)",
        points=points,
    )


def _z3() -> object:
    from theorycheck.formal import prove

    p = sp.symbols("p0:4", real=True)
    return from_proof(
        lambda: prove(rate_k_factored(p, 0) > 0, p, assumptions=simplex(p)),
        "pi_k((1-pi_k)^2 + sum_{i!=k} pi_i^2) > 0 on the open simplex, V = 4",
    )


def _numeric(quick: bool = False) -> object:
    import jax
    import jax.numpy as jnp

    require_float64()
    n = 20 if quick else 200
    _, z, k = random_points(n, 64, seed=1)
    rng = np.random.default_rng(2)
    got, want = [], []
    for zi, ki in zip(z, k):
        pi = softmax(zi)
        for v in (rng.normal(size=64), np.eye(64)[ki] - pi):
            _, jvp = jax.jvp(jax.nn.softmax, (jnp.asarray(zi),), (jnp.asarray(v),))
            got.append(np.asarray(jvp))
            want.append(np.asarray(rate(pi, v)))
        want.append([rate_k_factored(pi, ki)])
        got.append([np.asarray(rate(pi, np.eye(64)[ki] - pi))[ki]])
    return compare(
        f"jax.jvp of softmax vs the lemma, {n} points, V = 64 (random v and e_k - pi)",
        np.concatenate([np.ravel(g) for g in got]),
        np.concatenate([np.ravel(w) for w in want]),
        rtol=1e-10,
        atol=1e-14,
    )


LEMMA_SOFTMAX_DIRECTION = Claim(
    id="pdm.lemma_softmax_direction",
    source=f"{SOURCE}, Lemma 4 / Appendix B (research notes §1.4)",
    provenance="NOT FOUND",
    quote=(
        'NOT FOUND (Lemma 4; research notes §1.4, DERIVED): "d pi_i/dt = pi_i (v_i - '
        "sum_j pi_j v_j); with v = e_k - pi: d pi_k/dt = pi_k ((1 - pi_k)^2 + sum_{i "
        '!= k} pi_i^2) > 0". The review: the closed form follows "by ordinary '
        'differentiation of the softmax (Lemma 4)".'
    ),
    location="Lemma 4, Appendix B",
    kind=Kind.LEMMA,
    assumptions=("pi = softmax(z)",),
    statement=(
        "Along a logit direction v, d pi_i/dt = pi_i (v_i - sum_j pi_j v_j); along the "
        "policy-gradient direction v = e_k - pi, d pi_k/dt = pi_k((1 - pi_k)^2 + "
        "sum_{i != k} pi_i^2) > 0 (the lemma's text is NOT FOUND; this derived "
        "statement is the spec)."
    ),
    checks=(
        Check("sympy identity, V = 3 (any v) and V = 4", Method.SYMBOLIC, _symbolic),
        Check("z3 positivity on the open simplex, V = 4", Method.Z3, _z3),
        Check("jax.jvp vs the lemma, float64, V = 64", Method.NUMERIC, _numeric),
    ),
)

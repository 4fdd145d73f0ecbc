r"""Ḋ along the unit policy-gradient direction (the paper's normalisation).

Every other claim of this folder differentiates along v = e_k - pi. Along the unit
direction u = v / ||v||,

.. math::
    \dot D_u = \frac{\dot D_v}{\|v\|}, \qquad
    \|e_k - \pi\|^2 = 1 - 2\pi_k + \textstyle\sum_i \pi_i^2 \in (0, 2]

so the sign (what the mask decides on) is the same and the magnitude, and with it any
radius stated in Ḋ's units (Remark 2's), scales by 1/||v|| >= 1/sqrt 2.
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

from ._common import SOURCE, random_points, softmax

#: The vocabulary of the exact identity and of the float64 points.
SYM_VOCAB, VOCAB = 4, 100


def _symbolic() -> CheckResult:
    p = sp.symbols(f"p0:{SYM_VOCAB}", positive=True)
    k = 1
    v = [(1 if i == k else 0) - p[i] for i in range(SYM_VOCAB)]
    norm2 = sum(x**2 for x in v)
    closed = 1 - 2 * p[k] + sum(x**2 for x in p)
    return sympy_identity(
        norm2 - closed,
        what=f"||e_k - pi||^2 = 1 - 2 pi_k + sum_i pi_i^2 (V = {SYM_VOCAB}, k = {k}); "
        "with sum pi = 1 it is (1 - pi_k)^2 + sum_{i != k} pi_i^2 <= 2(1 - pi_k)^2 "
        "<= 2, and 0 only at pi = e_k",
    )


def _numeric(quick: bool = False) -> CheckResult:
    import jax
    import jax.numpy as jnp

    from theorycheck.numeric import ddot

    require_float64()
    n = 20 if quick else 200
    mu, z, k = random_points(n, VOCAB, seed=8)
    v = np.eye(VOCAB)[k] - softmax(z)
    norms = np.linalg.norm(v, axis=-1)
    u = v / norms[:, None]

    def jvp(zi, ui, mi):
        def kl(x):
            return jnp.sum(mi * (jnp.log(mi) - jax.nn.log_softmax(x)))

        return jax.jvp(kl, (zi,), (ui,))[1]

    along_u = np.asarray(jax.jit(jax.vmap(jvp))(z, u, mu))
    core = np.asarray(ddot(np.log(mu), z, k, kind="kl").ddot)
    res = compare(
        f"jax.jvp of KL along the unit u = (e_k - pi)/||e_k - pi|| vs the core's Ḋ "
        f"(along e_k - pi) / ||e_k - pi||, {n} points, V = {VOCAB}",
        along_u,
        core / norms,
        rtol=1e-9,
        atol=1e-13,
    )
    same_sign = int(np.sum(np.sign(along_u) == np.sign(core)))
    return with_data(
        res,
        same_sign=same_sign,
        norm_min=float(norms.min()),
        norm_max=float(norms.max()),
    )


DDOT_ALONG_UNIT_DIRECTION = Claim(
    id="pdm.ddot_along_unit_direction",
    source=f"{SOURCE}, Prop. 1 with the unit policy-gradient direction",
    provenance="DERIVED",
    quote=(
        '"On any fixed support, Lemma 4 gives the directional derivative of TV along '
        "the unit policy-gradient direction\" (Appendix D, Eq. (34), the seed's "
        "extracted text); Prop. 1's own text is NOT FOUND (research notes §1.3)"
    ),
    location="Appendix D, Eq. (34) (the direction's normalisation); Prop. 1",
    kind=Kind.PROPOSITION,
    assumptions=("forward KL D(mu || pi)", "pi = softmax(z) != e_k"),
    statement=(
        "Along the unit direction u = (e_k - pi)/||e_k - pi||, D-dot_u = D-dot_v / "
        "||e_k - pi|| with ||e_k - pi||^2 = 1 - 2 pi_k + sum_i pi_i^2 in (0, 2]: the "
        "same sign as along v = e_k - pi (every other claim's direction), a "
        "magnitude (and any radius in its units) scaled by 1/||v|| >= 1/sqrt 2."
    ),
    checks=(
        Check("sympy, ||e_k - pi||^2", Method.SYMBOLIC, _symbolic),
        Check("float64 jax.jvp along u vs the core", Method.NUMERIC, _numeric),
    ),
)

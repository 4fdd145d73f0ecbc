r"""Prop. 1 / Eq. 7-9: the closed form of Ḋ for forward KL, and its local term.

.. math::
    \dot D = \frac{d}{dt} \mathrm{KL}\big(\mu \,\|\, \mathrm{softmax}(z + t v)\big)
    \Big|_{t=0} = \underbrace{(\pi_k - \mu_k)}_{\text{local}=\partial_{z_k} D}
    + \underbrace{\textstyle\sum_i \pi_i(\mu_i - \pi_i)}_{
        \text{global}=-\pi\cdot\nabla D},
    \quad v = e_k - \pi

The paper's text is NOT FOUND; the closed form is DERIVED (research notes §1.3) and
matches the secondary sources term for term.
"""

from __future__ import annotations

import numpy as np
import sympy as sp
from hypothesis import strategies as st

from theorycheck.claims import (
    Check,
    CheckResult,
    Claim,
    Kind,
    Method,
    compare,
    from_proof,
    passed,
    property_check,
    require_float64,
    sympy_identity,
    undecided,
    with_data,
)

from ._common import SOURCE, random_points, rational_points, softmax


def local_term(mu, pi, k):
    """Prop. 1's local (sampled-token) term."""
    return pi[k] - mu[k]


def global_term(mu, pi):
    """Prop. 1's global (softmax-coupling) term."""
    return sum(pi[i] * (mu[i] - pi[i]) for i in range(len(pi)))


def _kl_line(mu, z, k):
    """KL(mu || softmax(z + t v)) as a SymPy function of t, v = e_k - softmax(z)."""
    t = sp.Symbol("t", real=True)
    pi = [sp.exp(zi) / sum(sp.exp(zj) for zj in z) for zi in z]
    v = [(1 if i == k else 0) - pi[i] for i in range(len(z))]
    lse = sp.log(sum(sp.exp(z[j] + t * v[j]) for j in range(len(z))))
    d = sum(mu[i] * (sp.log(mu[i]) - (z[i] + t * v[i] - lse)) for i in range(len(z)))
    return d, t, pi


def _symbolic() -> CheckResult:
    z = sp.symbols("z0:3", real=True)
    m0, m1 = sp.symbols("m0 m1", positive=True)
    mu = [m0, m1, 1 - m0 - m1]
    d, t, pi = _kl_line(mu, z, 0)
    ddot = sp.diff(d, t).subs(t, 0)
    at0 = d.subs(t, 0)
    grad = [sp.diff(at0, zj) for zj in z]
    diffs = [
        ddot - (local_term(mu, pi, 0) + global_term(mu, pi)),
        grad[0] - local_term(mu, pi, 0),
        -sum(pi[j] * grad[j] for j in range(3)) - global_term(mu, pi),
    ]

    def points():
        return rational_points(
            z,
            lambda rng: {
                m0: sp.Rational(rng.randint(1, 4), 10),
                m1: sp.Rational(rng.randint(1, 4), 10),
            },
        )

    return sympy_identity(
        diffs,
        what="d/dt KL(mu||softmax(z+tv)) at 0 = local + global, local = dD/dz_k, "
        "global = -pi.grad D (V = 3, from the definition)",
        points=points,
    )


def _autodiff(quick: bool = False) -> CheckResult:
    import jax
    import jax.numpy as jnp

    require_float64()
    n = 20 if quick else 300
    mu, z, k = random_points(n, 100, seed=3)
    pis = softmax(z)
    vs = np.eye(100)[k] - pis

    @jax.jit
    def derivatives(zz, vv, mm, kk):  # one compiled jvp and grad for every point
        def one(zi, vi, mi, ki):
            def kl(x):
                return jnp.sum(mi * (jnp.log(mi) - jax.nn.log_softmax(x)))

            _, dd = jax.jvp(kl, (zi,), (vi,))
            g = jax.grad(kl)(zi)
            return jnp.stack([dd, g[ki], -jnp.dot(jax.nn.softmax(zi), g)])

        return jax.vmap(one)(zz, vv, mm, kk)

    from theorycheck.numeric import ddot

    autodiff = np.asarray(derivatives(z, vs, mu, k)).reshape(-1)
    want = []
    for mi, pi, ki in zip(mu, pis, k):
        want += [
            local_term(mi, pi, ki) + global_term(mi, pi),
            local_term(mi, pi, ki),
            global_term(mi, pi),
        ]
    core = ddot(np.log(mu), z, k, kind="kl")  # the library's Ḋ (numeric core)
    core = np.stack([core.ddot, core.local, core.global_], axis=-1).reshape(-1)
    return compare(
        f"jax.jvp / jax.grad of KL vs Prop. 1's closed form and vs the numeric core's "
        f"ddot (Ḋ, local, global), {n} points, V = 100",
        np.concatenate([autodiff, autodiff]),
        np.concatenate([np.asarray(want), np.asarray(core)]),
        rtol=1e-9,
        atol=1e-13,
    )


def _finite_differences(quick: bool = False) -> CheckResult:
    def kl_at(mu, z):
        logp = z - np.log(np.sum(np.exp(z)))
        return float(np.sum(mu * (np.log(mu) - logp)))

    def prop(raw_mu, z, k):
        mu = np.asarray(raw_mu) / np.sum(raw_mu)
        z = np.asarray(z)
        pi = softmax(z)
        v = np.eye(len(z))[k] - pi
        h = 1e-5
        fd = (kl_at(mu, z + h * v) - kl_at(mu, z - h * v)) / (2 * h)
        closed = local_term(mu, pi, k) + global_term(mu, pi)
        return abs(fd - closed) <= 1e-7 + 1e-6 * abs(closed)

    return property_check(
        prop,
        st.lists(st.floats(0.01, 1.0), min_size=5, max_size=5),
        st.lists(st.floats(-8, 8), min_size=5, max_size=5),
        st.integers(0, 4),
        what="central differences (h = 1e-5) of KL along v = Prop. 1 within 1e-6 rel",
        quick=quick,
    )


PROP1_DDOT_CLOSED_FORM = Claim(
    id="pdm.prop1_ddot_closed_form",
    source=f"{SOURCE}, Prop. 1, Eq. (7)-(9) (research notes §1.3)",
    provenance="NOT FOUND",
    quote=(
        'NOT FOUND (Prop. 1 / Eq. 7; research notes §1.3, DERIVED). The review: "For '
        "softmax policies, the first-order change of forward KL under a policy-"
        "gradient step has a closed form that splits into a local sampled-token gap "
        "(exactly the quantity the ratio-based direction test already uses) and a "
        'global softmax-coupling term that a single sample cannot see."'
    ),
    location="§3.2, Prop. 1, Eqs. (7)-(9)",
    kind=Kind.PROPOSITION,
    assumptions=(
        "forward KL D(mu || pi)",
        "pi = softmax(z)",
        "v = e_k - pi, the policy-gradient direction in logit space, not normalised "
        "(along the unit direction: pdm.ddot_along_unit_direction)",
    ),
    statement=(
        "For pi = softmax(z) and v = e_k - pi, dD/dt of D = KL(mu || pi) along v is "
        "(pi_k - mu_k) + sum_i pi_i (mu_i - pi_i): a local term equal to dD/dz_k and a "
        "global term equal to -pi . grad_z D (paper text NOT FOUND; the derived form "
        "is the spec)."
    ),
    checks=(
        Check("sympy from the definition, V = 3", Method.SYMBOLIC, _symbolic),
        Check("jax.jvp and jax.grad, float64, V = 100", Method.NUMERIC, _autodiff),
        Check(
            "hypothesis: central differences, V = 5",
            Method.PROPERTY,
            _finite_differences,
        ),
    ),
)


# --- the local term and the ratio direction -----------------------------------------


def _z3_sign() -> CheckResult:
    from theorycheck.formal import prove

    p, m = sp.symbols("p m", real=True)
    r = p / m
    claim = sp.And(
        sp.Implies(p - m > 0, r > 1),
        sp.Implies(r > 1, p - m > 0),
        sp.Implies(p - m < 0, r < 1),
        sp.Implies(r < 1, p - m < 0),
    )
    main = prove(claim, [p, m], assumptions=[p > 0, p <= 1, m > 0, m <= 1])
    result = from_proof(main, "sign(pi_k - mu_k) = sign(pi_k/mu_k - 1) for mu_k > 0")
    edge = prove(p - m > 0, [p, m], assumptions=[p > 0, p <= 1, m >= 0, m <= 1])
    data = {
        "edge_mu_k_zero": "at mu_k = 0 the ratio is undefined (float: +inf, or e^20 "
        "under a log-ratio clamp) while local = pi_k > 0",
        "z3_local_positive_without_mu_assumption": edge.status,
    }
    return with_data(result, data)


def _property_sign(quick: bool = False) -> CheckResult:
    from theorycheck.numeric import ddot

    require_float64()

    def prop(raw_mu, z, k, kind):
        mu = np.asarray(raw_mu) / np.sum(raw_mu)
        z = np.asarray(z)
        pi = softmax(z)
        if abs(pi[k] - mu[k]) < 1e-9 * mu[k]:
            return True  # r = 1 (a TV kink): excluded by the statement
        local = float(ddot(np.log(mu), z, k, kind=kind).local)
        return np.sign(local) == np.sign(pi[k] / mu[k] - 1)

    return property_check(
        prop,
        st.lists(st.floats(0.01, 1.0), min_size=5, max_size=5),
        st.lists(st.floats(-6, 6), min_size=5, max_size=5),
        st.integers(0, 4),
        st.sampled_from(["kl", "tv"]),
        what="sign(local term of theorycheck.numeric.ddot) = sign(r - 1), KL and TV",
        quick=quick,
        examples=150,
    )


def _edge_numeric() -> CheckResult:
    from theorycheck import BadInput
    from theorycheck.numeric import ddot

    require_float64()
    z = np.array([0.0, 0.3, -1.0])
    pi = softmax(z)
    with np.errstate(divide="ignore"):
        zero = np.log(np.array([0.5, 0.5, 0.0]))  # mu_k = 0 at k = 2
    try:
        ddot(zero, z, 2)
        refused = "accepted"
    except BadInput as err:
        refused = f"BadInput: {err}"
    tiny = np.array([0.5, 0.5 - 1e-300, 1e-300])  # mu_k > 0, as small as float64 goes
    local = float(ddot(np.log(tiny), z, 2).local)
    r = float(np.exp(np.log(pi[2]) - np.log(tiny[2])))
    ok = refused.startswith("BadInput") and np.sign(local) == np.sign(r - 1) == 1
    return (passed if ok else undecided)(
        f"mu_k = 0 is refused by the numeric core ({refused}); at mu_k = 1e-300: "
        f"local = {local:.6g}, r = {r:.3g}, same sign",
        data={"mu_k_zero": refused, "local_at_tiny_mu": local, "ratio_at_tiny_mu": r},
    )


LOCAL_TERM_IS_RATIO_SIGN = Claim(
    id="pdm.local_term_is_ratio_sign",
    source=f"{SOURCE}, Eq. (8) and minor comment 1 (research notes §1.3)",
    provenance="DERIVED",
    quote=(
        'NOT FOUND (Eq. 8). The review (minor 1): "Eq. (8) and the surrounding text '
        "correctly note that the ratio criterion is the local term; a short explicit "
        "statement that sign(pi_k - mu_k) = sign(r - 1) only when mu_k > 0 (already "
        'implicit) would avoid edge-case confusion".'
    ),
    location="§3.2, Eq. (8); review minor 1",
    kind=Kind.EQUATION,
    assumptions=("mu_k > 0",),
    statement=(
        "For mu_k > 0 the local term pi_k - mu_k = mu_k (r - 1) has the sign of r - 1, "
        "so the ratio direction test sees exactly the local term (KL; also TV's local "
        "term where pi_k != mu_k). At mu_k = 0 the ratio is undefined; the "
        "numeric core refuses such a token (it cannot have been sampled)."
    ),
    objection=("Minor comment 1: sign(pi_k - mu_k) = sign(r - 1) only when mu_k > 0."),
    checks=(
        Check("z3, 0 < p, m <= 1", Method.Z3, _z3_sign),
        Check(
            "hypothesis on theorycheck.numeric.ddot", Method.PROPERTY, _property_sign
        ),
        Check("the mu_k = 0 edge in float64", Method.NUMERIC, _edge_numeric),
    ),
)

r"""Remark 2: when does the first-order sign of Ḋ predict the realized change ΔD?

Along the line :math:`z(t) = z + t v` (v = e_k - pi held fixed), a step of size eta on
:math:`\hat A\,w\log\pi_k` has :math:`t = \eta\hat A w`. Remark 2's text is NOT FOUND;
the seed's reading is that the O(eta^2) remainder does not flip the sign and that the
mask needs neither eta nor |r|. Checked here as stated (any t), it fails; the
correction is the first-order radius (``theorycheck.numeric.first_order_radius``):

.. math::
    |t| < \rho:\ \mathrm{sign}(\Delta D) = \mathrm{sign}(t\dot D), \quad
    \rho_{KL} = \frac{8|\dot D|}{R^2},\
    \rho_{TV} = \min\Big(\frac{4|\dot D|}{R^2}, \tau\Big),\
    R = 1 - \pi_k + \max_{i\ne k}\pi_i

and, for forward KL only, convexity along the line (:math:`D'' = \mathrm{Var}_\pi(v)
\ge 0`) makes every predicted increase right at every t. TV is not convex along v.
"""

from __future__ import annotations

import numpy as np
import sympy as sp

from theorycheck.claims import (
    Check,
    CheckResult,
    Claim,
    Correction,
    Method,
    failed,
    from_proof,
    passed,
    sympy_identity,
    undecided,
)

from ._common import (
    SOURCE,
    ddot_of,
    random_points,
    rational_points,
    recheck,
    sgd_sign_flips,
    simplex,
    softmax,
    x64,
)


def _kl_decrease_flips(quick: bool = False) -> CheckResult:
    x64()
    mu, z, k = random_points(50, 8, seed=17)
    for mi, zi, ki in zip(mu, z, k):
        dd = ddot_of(mi, zi, ki, "kl")
        if dd >= -1e-3:
            continue
        for t in (1.0, 2.0, 4.0, 8.0, 16.0, 32.0):
            pred, real = recheck(mi, zi, ki, t, "kl")
            if pred < 0 and real > 0:
                return failed(
                    f"KL: a predicted decrease t*Ḋ = {pred:.4g} is realized as an "
                    f"increase ΔD = {real:.4g} at t = {t:g} (re-checked at 50 digits)",
                    counterexample={
                        "kind": "kl",
                        "mu": mi.tolist(),
                        "logits": zi.tolist(),
                        "k": int(ki),
                        "t": t,
                        "predicted": pred,
                        "realized": real,
                    },
                )
    return undecided("no KL sign flip found on 50 points, t <= 32")


#: The TV point of README Finding 2 (random search; logits and behavior log-probs).
TV_POINT = {
    "behavior_logits": [-1.477704, -2.341526, -2.351323, -0.544011],
    "logits": [-0.79956, 2.602138, -0.957623, 2.668778],
    "k": 2,
    "t": -1.0,
}


def _tv_increase_flips() -> CheckResult:
    x64()
    mu = softmax(np.array(TV_POINT["behavior_logits"]))
    z = np.array(TV_POINT["logits"])
    k, t = TV_POINT["k"], TV_POINT["t"]
    pred, real = recheck(mu, z, k, t, "tv")
    if pred > 0 and real < 0:
        return failed(
            f"TV: a predicted increase t*Ḋ = {pred:.4g} is realized as a decrease "
            f"ΔD = {real:.4g} at t = {t:g} (re-checked at 50 digits)",
            counterexample={
                "kind": "tv",
                "mu": mu.tolist(),
                "logits": z.tolist(),
                "k": k,
                "t": t,
                "predicted": pred,
                "realized": real,
            },
        )
    return undecided(f"TV point did not flip: {pred:.3g}, {real:.3g}")


# --- the correction ------------------------------------------------------------------


def line_curvature(pi, v):
    """d²/dt² KL(mu || softmax(z + t v)) at t = 0: Var_pi(v) (mu-free)."""
    mean = sum(pi[i] * v[i] for i in range(len(pi)))
    return sum(pi[i] * v[i] ** 2 for i in range(len(pi))) - mean**2


def _symbolic_convexity() -> CheckResult:
    z = sp.symbols("z0:3", real=True)
    m0, m1 = sp.symbols("m0 m1", positive=True)
    mu = [m0, m1, 1 - m0 - m1]
    t = sp.Symbol("t", real=True)
    pi = [sp.exp(zi) / sum(sp.exp(zj) for zj in z) for zi in z]
    v = [(1 if i == 0 else 0) - pi[i] for i in range(3)]
    lse = sp.log(sum(sp.exp(z[j] + t * v[j]) for j in range(3)))
    d = sum(mu[i] * (sp.log(mu[i]) - (z[i] + t * v[i] - lse)) for i in range(3))
    second = sp.diff(d, t, 2).subs(t, 0)

    def points():
        return rational_points(
            z, lambda rng: {m0: sp.Rational(1, 5), m1: sp.Rational(3, 10)}
        )

    return sympy_identity(
        second - line_curvature(pi, v),
        what="d²/dt² KL(mu || softmax(z + tv)) = Var_pi(v) >= 0 (from the definition, "
        "V = 3; a variance, so KL is convex along the line and ΔD >= tḊ)",
        points=points,
    )


def _z3_popoviciu() -> CheckResult:
    from theorycheck.formal import prove

    p = sp.symbols("p0:3", real=True)
    x = sp.symbols("x0:3", real=True)
    var = (
        sum(p[i] * x[i] ** 2 for i in range(3))
        - sum(p[i] * x[i] for i in range(3)) ** 2
    )
    return from_proof(
        prove(
            sp.And(var >= 0, var <= (x[2] - x[0]) ** 2 / 4),
            [*p, *x],
            assumptions=[*simplex(p), x[0] <= x[1], x[1] <= x[2]],
            timeout_ms=30_000,
        ),
        "0 <= Var_p(x) <= (max x - min x)^2/4 for 3 outcomes (Popoviciu), so "
        "|D''| <= R^2/4 along the line and sign(ΔD) = sign(tḊ) for |t| < 8|Ḋ|/R^2",
    )


def _numeric_radius(quick: bool = False) -> CheckResult:
    from theorycheck.numeric import first_order_radius

    x64()
    n = 15 if quick else 120
    mu, z, k = random_points(n, 6, seed=19)
    rng = np.random.default_rng(23)
    checked, increases = 0, 0
    for mi, zi, ki in zip(mu, z, k):
        for kind in ("kl", "tv"):
            rho = float(first_order_radius(np.log(mi), zi, ki, kind=kind))
            if not np.isfinite(rho) or rho <= 0:
                continue
            for frac in rng.uniform(0.02, 0.98, size=2):
                for t in (frac * rho, -frac * rho):
                    pred, real = recheck(mi, zi, ki, t, kind)
                    checked += 1
                    if np.sign(pred) != np.sign(real):
                        return failed(
                            f"{kind}: inside the radius the sign flipped",
                            counterexample={
                                "kind": kind,
                                "mu": mi.tolist(),
                                "logits": zi.tolist(),
                                "k": int(ki),
                                "t": float(t),
                                "rho": rho,
                                "predicted": pred,
                                "realized": real,
                            },
                        )
        for t in (-40.0, -5.0, 5.0, 40.0):
            pred, real = recheck(mi, zi, ki, t, "kl")
            if pred > 0:
                increases += 1
                if real < pred * (1 - 1e-12):  # convexity: ΔD >= tḊ
                    return failed(
                        "KL: a predicted increase was not realized",
                        counterexample={
                            "mu": mi.tolist(),
                            "logits": zi.tolist(),
                            "k": int(ki),
                            "t": t,
                            "predicted": pred,
                            "realized": real,
                        },
                    )
    return passed(
        f"no sign flip at {checked} steps |t| = f*rho (f in [0.02, 0.98], KL and TV, "
        f"V = 6), and ΔD >= tḊ at all {increases} KL predicted increases with "
        "|t| <= 40 "
        "(50-digit re-evaluation)",
        data={"steps_inside_radius": checked, "kl_predicted_increases": increases},
    )


FIRST_ORDER_SIGN = Claim(
    id="pdm.first_order_sign",
    source=f"{SOURCE}, Remark 2 and major comment 2 (research notes §1.8)",
    provenance="NOT FOUND",
    statement=(
        "The sign of the first-order prediction t*Ḋ is the sign of the realized change "
        "ΔD = D(z + t v) - D(z) at any step t (the mask needs neither eta nor |r|), "
        "for forward KL and for TV (Remark 2's text is NOT FOUND; this reading is "
        "the spec)."
    ),
    objection=(
        "Major comment 2: the O(eta^2) remainder may flip the sign at training step "
        "sizes."
    ),
    checks=(
        Check("KL predicted decrease at large t", Method.NUMERIC, _kl_decrease_flips),
        Check(
            "TV predicted increase (README Finding 2)",
            Method.NUMERIC,
            _tv_increase_flips,
        ),
        Check("one optax SGD step, eta in 0.1..2", Method.SIMULATION, sgd_sign_flips),
    ),
    correction=Correction(
        statement=(
            "sign(ΔD) = sign(t Ḋ) whenever |t| < rho, with rho_KL = 8|Ḋ|/R^2 and "
            "rho_TV = min(4|Ḋ|/R^2, tau), R = 1 - pi_k + max_{i != k} pi_i, tau the "
            "log-distance to the nearest TV kink over R; for forward KL a predicted "
            "increase is right at every t (KL is convex along v), for TV it is not."
        ),
        checks=(
            Check(
                "sympy: KL curvature along v = Var_pi(v)",
                Method.SYMBOLIC,
                _symbolic_convexity,
            ),
            Check("z3: Popoviciu's bound, 3 outcomes", Method.Z3, _z3_popoviciu),
            Check(
                "steps inside the radius, 50 digits", Method.NUMERIC, _numeric_radius
            ),
        ),
    ),
)

r"""Remark 2: when does the first-order sign of Ḋ predict the realized change ΔD?

Along the line :math:`z(t) = z + t v` (v = e_k - pi held fixed), a step of size eta on
:math:`\hat A\,w\log\pi_k` has :math:`t = \eta\hat A w`. Remark 2's text is NOT FOUND;
the seed's reading is that the O(eta^2) remainder does not flip the sign and that the
mask needs neither eta nor |r|. As stated, under its small-step premise, it holds with
the first-order radius (``theorycheck.numeric.first_order_radius``):

.. math::
    |t| < \rho:\ \mathrm{sign}(\Delta D) = \mathrm{sign}(t\dot D), \quad
    \rho_{KL} = \frac{8|\dot D|}{R^2},\
    \rho_{TV} = \min\Big(\frac{4|\dot D|}{R^2}, \tau\Big),\
    R = 1 - \pi_k + \max_{i\ne k}\pi_i

and, for forward KL only, convexity along the line (:math:`D'' = \mathrm{Var}_\pi(v)
\ge 0`) makes every predicted increase right at every t. TV is not convex along v.
Read "at any step" (an extension) it fails; the premise itself is measured on SmolLM2
at the paper's learning rate (an assumption claim).
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
    failed,
    from_proof,
    passed,
    require_float64,
    sympy_identity,
    undecided,
)

from ._common import (
    PREMISE_FULL,
    PREMISE_QUICK,
    PREMISE_REPLAY_TOLERANCE,
    SOURCE,
    ddot_of,
    premise_measurement,
    premise_replay_gap,
    random_points,
    rational_points,
    recheck,
    sgd_sign_flips,
    simplex,
    softmax,
)


def _kl_decrease_flips(quick: bool = False) -> CheckResult:
    require_float64()
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
    require_float64()
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
        lambda: prove(
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

    require_float64()
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


def _premise_rows(quick):
    """(rows, setting line, data common to both checks, the replay's failure or
    None): the committed rows (a full run) or rows measured now (a quick run), and
    their recomputation route (:func:`premise_replay_gap`)."""
    m = premise_measurement(quick)
    rows = m.data["rows"]
    gap = premise_replay_gap(rows, quick)
    settings = PREMISE_QUICK if quick else PREMISE_FULL
    setting = (
        f"SmolLM2-135M, {len(rows)} tokens of the measurement text, one token per "
        f"update, Adam's first step at lr = {settings['lr']:g} on the last "
        f"{settings['trainable_blocks']} blocks + final norm (float64), mu = the "
        f"bfloat16 forward; {m.source}; re-scored now: max |Δ log pi_k| "
        f"{gap['max_abs_logp_trainer']:.2g}, max |Δ log mu_k| "
        f"{gap['max_abs_logp_engine']:.2g}"
    )
    common = {"setting": setting, "measurement": m.source, "replay": gap}
    bad = None
    if not gap["within_tolerance"]:
        bad = undecided(
            f"{setting}: the rows do not re-score within "
            f"{PREMISE_REPLAY_TOLERANCE} (tokens match: {gap['tokens_match']}) on "
            "this checkpoint and text",
            data=common,
        )
    return rows, setting, common, bad


def premise_verdict(rows, setting: str, common=None) -> CheckResult:
    """The measured check's verdict from the rows: FAIL when the remainder flips the
    first-order sign on a token and the flip survives the 50-digit re-evaluation."""
    flips = [r for r in rows if np.sign(r["first_order"]) != np.sign(r["realized"])]
    agree = sum(np.sign(r["mask_prediction"]) == np.sign(r["realized"]) for r in rows)
    figures = {
        **(common or {"setting": setting}),
        "tokens": len(rows),
        "sign_flips": len(flips),
        "mask_sign_agreement": int(agree),
        "max_logit_change": max(r["logit_change_max"] for r in rows),
        "median_divergence": float(np.median([r["divergence"] for r in rows])),
    }
    line = (
        f"{setting}: the remainder flips sign(<grad_z D, Δz>) vs the realized ΔD on "
        f"{len(flips)} of {len(rows)} tokens (max |Δz| "
        f"{figures['max_logit_change']:.3g}, median D "
        f"{figures['median_divergence']:.2g}); the mask's A·Ḋ has the realized "
        f"sign on {agree} of {len(rows)}"
    )
    confirmed = [
        r
        for r in flips
        if r["realized_50"] is not None
        and np.sign(r["realized_50"]) == np.sign(r["realized"])
    ]
    if confirmed:
        return failed(line, counterexample=confirmed[0], data=figures)
    if flips:
        return undecided(line + " (a flip did not survive 50 digits)", data=figures)
    return passed(line, data=figures)


def _premise_measured(quick: bool = False) -> CheckResult:
    rows, setting, common, bad = _premise_rows(quick)
    return bad or premise_verdict(rows, setting, common)


def _premise_certified(quick: bool = False) -> CheckResult:
    rows, setting, common, bad = _premise_rows(quick)
    if bad is not None:
        return bad
    sure = [r for r in rows if abs(r["first_order"]) > r["remainder_bound"]]
    line = (
        f"{setting}: Popoviciu's bound |ΔD - <grad_z D, Δz>| <= (max Δz - min Δz)^2/8 "
        f"certifies the first-order sign on {len(sure)} of {len(rows)} tokens"
    )
    data = {**common, "certified": len(sure), "tokens": len(rows)}
    if len(sure) == len(rows):
        return passed(line, data=data)
    return undecided(line + "; the bound cannot decide the rest", data=data)


FIRST_ORDER_SIGN = Claim(
    id="pdm.first_order_sign",
    source=f"{SOURCE}, Remark 2 and major comment 2 (research notes §1.8)",
    provenance="NOT FOUND",
    statement=(
        "Under Remark 2's small-step premise, the sign of the first-order prediction "
        "t*Ḋ is the sign of the realized change ΔD = D(z + t v) - D(z) (forward KL "
        "and TV, free logits, v = e_k - pi): sign(ΔD) = sign(t Ḋ) whenever |t| < rho, "
        "with rho_KL = 8|Ḋ|/R^2 and rho_TV = min(4|Ḋ|/R^2, tau), R = 1 - pi_k + "
        "max_{i != k} pi_i, tau the log-distance to the nearest TV kink over R; for "
        "forward KL a predicted increase is right at every t (KL is convex along v)."
    ),
    quote=(
        "NOT FOUND (Remarks 2-3, research notes §1.8). The seed's reading (axiom "
        'ledger, Remark 2): "The sign of the first-order term in D(pi_eta) ~ D + '
        "eta Ḋ dominates higher-order O(eta^2) remainder for the effective step sizes "
        'used in training"; and the mask "never needs eta or |r| (Remark 2)".'
    ),
    location="§3.2-3.4, Remark 2",
    kind=Kind.REMARK,
    assumptions=(
        "small step: the O(eta^2) remainder is dominated (here made exact: |t| below "
        "the first-order radius rho)",
        "free logits (tabular): the step moves z along v = e_k - pi",
        "one token updated at a time (multi-token updates are Remark 3)",
    ),
    objection=(
        "Major comment 2: the O(eta^2) remainder may flip the sign at training step "
        "sizes."
    ),
    checks=(
        Check(
            "sympy: KL curvature along v = Var_pi(v)",
            Method.SYMBOLIC,
            _symbolic_convexity,
        ),
        Check("z3: Popoviciu's bound, 3 outcomes", Method.Z3, _z3_popoviciu),
        Check("steps inside the radius, 50 digits", Method.NUMERIC, _numeric_radius),
    ),
)

FIRST_ORDER_SIGN_ANY_STEP = Claim(
    id="pdm.first_order_sign_any_step",
    source=f"{SOURCE}, Remark 2 read without its small-step premise",
    provenance="DERIVED",
    statement=(
        "The sign of the first-order prediction t*Ḋ is the sign of the realized change "
        "ΔD = D(z + t v) - D(z) at any step t, for forward KL and for TV."
    ),
    quote=(
        'Extension, not the paper\'s claim: Remark 2 read "at any step" (free-logit '
        "steps of 0.1-2 logit units, outside its small-step premise)."
    ),
    location="§3.2-3.4, Remark 2",
    kind=Kind.EXTENSION,
    extends="pdm.first_order_sign",
    assumptions=("free logits (tabular)", "any step size t"),
    checks=(
        Check("KL predicted decrease at large t", Method.NUMERIC, _kl_decrease_flips),
        Check(
            "TV predicted increase (README Finding 2)",
            Method.NUMERIC,
            _tv_increase_flips,
        ),
        Check("one optax SGD step, eta in 0.1..2", Method.SIMULATION, sgd_sign_flips),
    ),
)

REMARK2_SMALL_STEP_PREMISE = Claim(
    id="pdm.remark2_small_step_premise",
    source=f"{SOURCE}, Remark 2's premise, measured on SmolLM2-135M",
    provenance="NOT FOUND",
    statement=(
        "Remark 2's premise at the paper's learning rate (lr = 1e-6): on SmolLM2-135M "
        "(last 2 blocks + final norm trained in float64, Adam's first step, one token "
        "per update, mu = the bfloat16 forward, the measurement text), the O(eta^2) "
        "remainder does not flip the sign of the first-order change: sign(ΔD) = "
        "sign(<grad_z D, Δz>) at every measured token, Δz the step's real logit "
        "change."
    ),
    quote=(
        "NOT FOUND (research notes §1.8). The seed's reading of Remark 2: the first-"
        'order term "dominates higher-order O(eta^2) remainder for the effective '
        'step sizes used in training" (ledger: lr = 1e-6).'
    ),
    location="§3.2-3.4, Remark 2 (premise); seed ledger: lr = 1e-6",
    kind=Kind.ASSUMPTION,
    assumptions=(
        "the stated setting: SmolLM2-135M, lr = 1e-6, Adam's first step, last 2 "
        "blocks trained, one token per update",
    ),
    checks=(
        Check(
            "SmolLM2: realized ΔD vs the first-order term",
            Method.MEASUREMENT,
            _premise_measured,
        ),
        Check(
            "Popoviciu certificate of the first-order sign",
            Method.NUMERIC,
            _premise_certified,
        ),
    ),
)

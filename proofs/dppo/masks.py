r"""Eq. 10 (PPO's ratio as a single-sample TV estimate) and Eq. 12 (DPPO's mask).

.. math::
    D_{TV}(\mu\|\pi) = \tfrac12\,\mathbb E_{a\sim\mu}\,|r(a) - 1| \quad (10)

    M = 0 \iff D > \delta \wedge \big((\hat A > 0 \wedge r > 1) \vee
    (\hat A < 0 \wedge r < 1)\big) \quad (12)

Eq. 10 needs every token pi can emit to be one mu can emit: with a truncated rollout
sampler (top-k / top-p: mu_i = 0 on the tail, while softmax pi_i > 0 everywhere) the
single-sample estimate misses the tail's mass. In general
:math:`\tfrac12\mathbb E_\mu|r-1| = D_{TV} - \tfrac12\pi(\{\mu = 0\})` (DERIVED here).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import sympy as sp

from theorycheck.claims import (
    Check,
    CheckResult,
    Claim,
    Correction,
    Kind,
    Method,
    failed,
    from_proof,
    passed,
    require_float64,
    sympy_identity,
    undecided,
)

from ._common import SOURCE, sym_abs


def single_sample_tv(mu, pi):
    """1/2 E_{a~mu} |r(a) - 1| (only tokens with mu_a > 0 are ever sampled)."""
    return sum(m * abs(p / m - 1) for m, p in zip(mu, pi) if m > 0) / 2


def tv(mu, pi):
    return sum(abs(m - p) for m, p in zip(mu, pi)) / 2


def unseen_mass(mu, pi):
    """pi's mass where mu = 0 (the correction's term)."""
    return sum(p for m, p in zip(mu, pi) if m == 0)


def _exact_counterexample() -> CheckResult:
    mu = [Fraction(1), Fraction(0)]
    pi = [Fraction(1, 2), Fraction(1, 2)]
    lhs, rhs = tv(mu, pi), single_sample_tv(mu, pi)
    if lhs != rhs:
        return failed(
            f"exact rationals: mu = (1, 0), pi = (1/2, 1/2): TV = {lhs}, "
            f"1/2 E_mu|r - 1| = {rhs}",
            counterexample={
                "mu": ["1", "0"],
                "pi": ["1/2", "1/2"],
                "tv": str(lhs),
                "single_sample": str(rhs),
            },
        )
    return undecided("the two sides agree at this point")


def _monte_carlo(mu, pi, n, rng):
    draws = rng.choice(len(mu), size=n, p=mu)
    vals = 0.5 * np.abs(pi[draws] / mu[draws] - 1)
    return float(vals.mean()), float(vals.std(ddof=1) / np.sqrt(n))


def _truncated(quick: bool, rng):
    """A top-p sampler's mu (a perturbed, renormalized 0.9 nucleus) and a softmax pi."""
    z = rng.normal(scale=2.0, size=200)
    pi = np.exp(z - z.max())
    pi /= pi.sum()
    order = np.argsort(-pi)
    keep = order[: int(np.searchsorted(np.cumsum(pi[order]), 0.9)) + 1]
    mu = np.zeros_like(pi)
    mu[keep] = pi[keep] * np.exp(0.3 * rng.normal(size=keep.size))  # engine mismatch
    mu[keep] /= mu[keep].sum()
    return mu, pi


def _statement_mc(quick: bool = False) -> CheckResult:
    rng = np.random.default_rng(37)
    n = 20_000 if quick else 200_000
    mu, pi = _truncated(quick, rng)
    est, se = _monte_carlo(mu, pi, n, rng)
    exact = tv(mu, pi)
    if abs(est - exact) > 6 * se + 1e-12:
        return failed(
            f"top-p (0.9) rollout sampler, V = 200: 1/2 mean |r - 1| over {n} samples "
            f"= {est:.4f} +- {se:.1e}, TV = {exact:.4f} ({abs(est - exact) / se:.0f} "
            "standard errors apart; the exact expectation re-checked in float64)",
            counterexample={
                "sampler": "top-p 0.9",
                "vocab": 200,
                "samples": n,
                "estimate": est,
                "standard_error": se,
                "tv": exact,
                "exact_single_sample": single_sample_tv(mu, pi),
            },
        )
    return passed(f"agree: {est:.4f} vs {exact:.4f}")


def _z3_single_sample(closed: bool):
    """z3 on 1/2 E_mu|r - 1| = TV - 1/2 pi(mu = 0) for pi > 0, V = 3: with mu on the
    open simplex (``closed=False``: full support, pi(mu = 0) = 0, so this is Eq. 10
    itself) or on the closed one (zeros allowed: the truncated case)."""
    from theorycheck.formal import prove

    p = sp.symbols("p0:3", real=True)
    m = sp.symbols("m0:3", real=True)
    lhs = (
        sum(
            sp.Piecewise((m[i] * sym_abs(p[i] / m[i] - 1), m[i] > 0), (0, True))
            for i in range(3)
        )
        / 2
    )
    unseen = sum(sp.Piecewise((p[i], sp.Eq(m[i], 0)), (0, True)) for i in range(3))
    tv_sym = sum(sym_abs(m[i] - p[i]) for i in range(3)) / 2
    support = (x >= 0 for x in m) if closed else (x > 0 for x in m)
    target = tv_sym - unseen_mass_weight() * unseen if closed else tv_sym
    return prove(
        sp.Eq(lhs, target),
        [*p, *m],
        assumptions=[
            *(x > 0 for x in p),
            sp.Eq(sum(p), 1),
            *support,
            sp.Eq(sum(m), 1),
        ],
    )


def unseen_mass_weight():
    """The factor of pi(mu = 0) in the correction (1/2)."""
    return sp.Rational(1, 2)


def _z3_full_support() -> CheckResult:
    return from_proof(
        lambda: _z3_single_sample(closed=False),
        "1/2 E_mu|r - 1| = TV(mu, pi) for every mu with full support (mu_i > 0) "
        "and pi > 0 on the simplex, V = 3",
    )


def _z3_correction() -> CheckResult:
    return from_proof(
        lambda: _z3_single_sample(closed=True),
        "1/2 E_mu|r - 1| = TV - 1/2 pi(mu = 0) for every mu on the closed simplex "
        "and pi > 0, V = 3",
    )


def _sympy_full_support() -> CheckResult:
    m, p = sp.symbols("m p", positive=True)
    return sympy_identity(
        sp.Abs(sp.Abs(m * (p / m - 1)) - sp.Abs(p - m)),
        what="mu_a |pi_a/mu_a - 1| = |pi_a - mu_a| for mu_a > 0 (each token's term "
        "of 1/2 E_mu|r - 1| is its term of TV; summed over a full support, Eq. 10)",
    )


def _full_support_case(rng):
    z = rng.normal(scale=2.0, size=200)
    pi = np.exp(z - z.max())
    pi /= pi.sum()
    mu = np.exp(z + rng.normal(size=200))
    mu /= mu.sum()
    return mu, pi


def _mc_full_support(quick: bool = False) -> CheckResult:
    rng = np.random.default_rng(43)
    n = 20_000 if quick else 200_000
    mu, pi = _full_support_case(rng)
    est, se = _monte_carlo(mu, pi, n, rng)
    exact = tv(mu, pi)
    if abs(est - exact) > 6 * se + 1e-12:
        return failed(
            f"full-support softmax mu, V = 200: 1/2 mean |r - 1| = {est:.4f} +- "
            f"{se:.1e} vs TV = {exact:.4f}",
            counterexample={"estimate": est, "standard_error": se, "tv": exact},
        )
    return passed(
        f"full-support softmax mu (V = 200, {n} samples): 1/2 mean |r - 1| = "
        f"{est:.4f} +- {se:.1e}, TV = {exact:.4f} (within 6 standard errors)",
        estimate=est,
        standard_error=se,
        tv=exact,
    )


def _mc_correction(quick: bool = False) -> CheckResult:
    rng = np.random.default_rng(41)
    n = 20_000 if quick else 200_000
    rows = []
    for label in ("full support", "top-p 0.9"):
        if label == "full support":
            mu, pi = _full_support_case(rng)
        else:
            mu, pi = _truncated(quick, rng)
        est, se = _monte_carlo(mu, pi, n, rng)
        want = tv(mu, pi) - unseen_mass(mu, pi) / 2
        rows.append((label, est, se, want))
        if abs(est - want) > 6 * se + 1e-12:
            return failed(
                f"{label}: Monte Carlo {est:.4f} +- {se:.1e} vs {want:.4f}",
                counterexample={"case": label, "estimate": est, "expected": want},
            )
    text = "; ".join(f"{lab}: {e:.4f} +- {s:.1e} vs {w:.4f}" for lab, e, s, w in rows)
    return passed(
        f"Monte Carlo ({n} samples from mu, V = 200) within 6 standard errors of "
        f"TV - 1/2 pi(mu = 0): {text}",
        data={
            "cases": [
                dict(zip(("case", "estimate", "se", "expected"), r)) for r in rows
            ]
        },
    )


PPO_RATIO_IS_SINGLE_SAMPLE_TV = Claim(
    id="dppo.ppo_ratio_is_single_sample_tv",
    source=f"{SOURCE}, Eq. (10)",
    provenance="PAPER",
    statement=(
        "For a behavior policy mu with full support (mu_a > 0 for every token, as a "
        "softmax has): D_TV(mu(.|s) || pi(.|s)) = 1/2 E_{a ~ mu} |r(a) - 1| (Eq. 10)."
    ),
    quote=(
        "D_TV(mu(.|s_t) || pi(.|s_t)) = 1/2 E_{y_t~mu} |r_t - 1|: PPO constrains a "
        "single-sample estimate of it."
    ),
    location="Eq. (10)",
    kind=Kind.EQUATION,
    assumptions=(
        "mu(.|s_t) is a softmax policy: mu_a > 0 for every token (the ratio "
        "r = pi/mu is defined everywhere pi has mass)",
    ),
    checks=(
        Check("sympy: per-token terms", Method.SYMBOLIC, _sympy_full_support),
        Check("z3, open simplex for mu, V = 3", Method.Z3, _z3_full_support),
        Check("Monte Carlo, full-support mu", Method.NUMERIC, _mc_full_support),
    ),
)

EQ10_TRUNCATED_SAMPLING = Claim(
    id="dppo.eq10_truncated_sampling",
    source=f"{SOURCE}, Eq. (10), under a truncated rollout sampler",
    provenance="DERIVED",
    statement=(
        "Eq. 10 also holds when the rollout sampler truncates (top-k / top-p: mu_a = 0 "
        "off the kept set while the trainer's softmax pi_a > 0): "
        "D_TV(mu || pi) = 1/2 E_{a ~ mu} |r(a) - 1|."
    ),
    quote=(
        "Extension, not the paper's claim: Eq. (10) read for the behavior policy a "
        "top-k / top-p rollout engine actually samples from."
    ),
    location="Eq. (10)",
    kind=Kind.EXTENSION,
    extends="dppo.ppo_ratio_is_single_sample_tv",
    assumptions=("mu is a truncated sampler: mu_a = 0 on a tail where pi_a > 0",),
    checks=(
        Check("exact rationals, V = 2", Method.SYMBOLIC, _exact_counterexample),
        Check("Monte Carlo, top-p rollout sampler", Method.NUMERIC, _statement_mc),
    ),
    correction=Correction(
        statement=(
            "1/2 E_{a ~ mu} |r(a) - 1| = D_TV - 1/2 pi({mu = 0}): the single-sample "
            "estimate misses half the trainer's mass on the truncated tail, so it "
            "equals D_TV exactly when pi puts no mass where mu = 0."
        ),
        checks=(
            Check("z3, closed simplex for mu, V = 3", Method.Z3, _z3_correction),
            Check("Monte Carlo, full and top-p mu", Method.NUMERIC, _mc_correction),
        ),
    ),
)


# --- Eq. 12 and the survey's gate ---------------------------------------------------


def eq12_masked(div, p, q, adv, delta):
    """Eq. 12: masked iff D > delta and A moves r away from 1."""
    r = p / q
    return sp.And(div > delta, sp.Or(sp.And(adv > 0, r > 1), sp.And(adv < 0, r < 1)))


def survey_masked(p, q, adv, delta):
    """The survey's DPPO (binary TV) gate."""
    return sp.Or(sp.And(adv > 0, p - q > delta), sp.And(adv < 0, q - p > delta))


def _z3_gate() -> CheckResult:
    from theorycheck.formal import prove

    p, q, a, d = sp.symbols("p q adv delta", real=True)
    eq12 = eq12_masked(sym_abs(p - q), p, q, a, d)
    survey = survey_masked(p, q, a, d)
    return from_proof(
        lambda: prove(
            sp.And(sp.Implies(eq12, survey), sp.Implies(survey, eq12)),
            [p, q, a, d],
            assumptions=[p > 0, p <= 1, q > 0, q <= 1, d >= 0],
        ),
        "Eq. 12 with D = |p - q| <=> the survey's gate (A > 0, p - q > delta) or "
        "(A < 0, q - p > delta), for all p, q in (0, 1], A, delta >= 0",
    )


def _registry_gate(quick: bool = False) -> CheckResult:
    from theorycheck.losses import LOSSES
    from theorycheck.numeric import binary_kl, binary_tv, dppo_mask

    require_float64()
    grid = np.linspace(0.05, 1.0, 12 if quick else 40)
    p, q, adv = (a.ravel() for a in np.meshgrid(grid, grid, np.array([-1.0, 1.0])))
    cases, masked, bad = 0, 0, None
    for name, div_fn, delta in (
        ("dppo_binary_tv", binary_tv, 0.15),
        ("dppo_binary_kl", binary_kl, 0.05),
    ):
        c, gated = LOSSES[name].coefficient(p, q, adv, delta=delta)
        c, gated = np.asarray(c), np.asarray(gated)
        eq12 = np.asarray(dppo_mask(div_fn(p, q), p / q, adv, delta=delta)) == 0.0
        want_c = np.where(eq12, 0.0, adv * p / q)
        wrong = (gated != eq12) | (np.abs(c - want_c) > 1e-12)
        cases += p.size
        masked += int(eq12.sum())
        if wrong.any():
            i = int(np.argmax(wrong))
            bad = {
                "rule": name,
                "p": float(p[i]),
                "q": float(q[i]),
                "adv": float(adv[i]),
                "registry_gated": bool(gated[i]),
                "eq12_masked": bool(eq12[i]),
            }
            break
    if bad:
        return failed("registry gate != Eq. 12", counterexample=bad)
    return passed(
        f"registry dppo_binary_tv / dppo_binary_kl gate and c = A r m equal Eq. 12 "
        f"(theorycheck.numeric.dppo_mask) on {cases} grid points ({masked} masked)",
        data={"cases": cases, "masked": masked},
    )


MASK_DIRECTION_RULE = Claim(
    id="dppo.mask_direction_rule",
    source=f"{SOURCE}, Eq. (12); survey 'DPPO (binary TV)'",
    provenance="PAPER",
    quote=(
        "M_t^DPPO = 0 if (A_t > 0 and r_t > 1 and D > delta) or (A_t < 0 and r_t < 1 "
        "and D > delta), 1 otherwise (12); the survey's gate: m = 0 if A > 0 and p - q"
        " > delta, 0 if A < 0 and q - p > delta, else 1."
    ),
    location="Eq. (12); survey 'DPPO (binary TV)'",
    kind=Kind.EQUATION,
    assumptions=(
        "D = binary TV |p - q|",
        "p, q in (0, 1], delta >= 0",
    ),
    statement=(
        "Eq. 12's direction rule (mask only when D > delta and A moves r away from 1) "
        "with D = binary TV is exactly the survey's gate: masked iff (A > 0 and "
        "p - q > delta) or (A < 0 and q - p > delta); the registry's binary TV and "
        "binary KL rules implement Eq. 12."
    ),
    checks=(
        Check("z3 equivalence, all p, q, A, delta", Method.Z3, _z3_gate),
        Check(
            "registry vs numeric.dppo_mask on a grid", Method.NUMERIC, _registry_gate
        ),
    ),
)

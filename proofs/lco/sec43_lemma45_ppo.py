r"""LCO §4.3 (seed 004): Lemma 4.5, PPO's clipped surrogate is not logits-convex,
and the exact region where its logit Hessian is PSD.

The paper's text is NOT FOUND; the statement is the seed review's reading (with its
minor point 2), the Hessian DERIVED (papers.md §2.5) and derived again from the
registry's ``is_pg`` spec (PPO's active branch).
"""

from __future__ import annotations

import numpy as np
import sympy as sp

from theorycheck.claims import (
    Check,
    Claim,
    Correction,
    Method,
    failed,
    passed,
    undecided,
)
from theorycheck.formal import prove_sampled_token_theorem
from theorycheck.losses import LOSSES
from theorycheck.symbolic import fit_sampled_token, logit_gradient, to_probability

from ._common import (
    TOL,
    min_curvature,
    probability_hessian,
    registry_fn,
    second_difference,
    z3_psd,
)

# --- PPO (Lemma 4.5) ------------------------------------------------------------------


def ppo_psd_states(*, quick: bool = False, name: str = "ppo") -> object:
    """float64: the registry ppo Hessian is PSD at a clipped and at an active state."""
    states = {  # (pi_k, mu_k, adv): clipped r = 5/3 > 1.2; active r = 13/12, pi_k > 1/2
        "clipped": (0.5, 0.3, 1.0),
        "active_pi_k_ge_half": (0.65, 0.6, 1.0),
    }
    found = {}
    for label, (p_k, q_k, adv) in states.items():
        z = np.log([p_k, (1 - p_k) / 2, (1 - p_k) / 2])
        mu = np.log([q_k, (1 - q_k) / 2, (1 - q_k) / 2])
        f = registry_fn(name, sampled=0, adv=adv, behavior_logp=mu)
        lam, _ = min_curvature(f, z)
        rng = np.random.default_rng(1)
        fd = min(second_difference(f, z, u) for u in rng.normal(size=(8, 3)))
        if lam >= -TOL and fd >= -1e-6:
            found[label] = {
                "pi": np.exp(z).tolist(),
                "mu_k": q_k,
                "adv": adv,
                "min_eigenvalue": lam,
                "min_second_difference": fd,
            }
    if found:
        return failed(
            "PSD logit Hessian at "
            + ", ".join(
                f"{k} (min eig {v['min_eigenvalue']:.3g})" for k, v in found.items()
            )
            + "; re-checked by second differences along 8 directions",
            found,
        )
    return passed("the Hessian had a negative eigenvalue at both probe states")


def _is_pg_hessian(vocab: int = 3):
    """The active-region PPO Hessian: the registry is_pg spec, guard off."""
    z = sp.symbols(f"z0:{vocab}", real=True)
    a, q = sp.symbols("A q", positive=True)
    mu = [sp.log(q)] + [sp.log((1 - q) / (vocab - 1))] * (vocab - 1)
    expr = LOSSES["is_pg"].symbolic(
        list(z), 0, adv=a, behavior_logp=mu, log_ratio_clamp=sp.oo
    )
    h, p = probability_hessian(expr, z)
    grad = to_probability(sp.Matrix(logit_gradient(expr, z)), z).expr
    return h, p, a, q, list(grad)


def ppo_z3_region(*, quick: bool = False) -> object:
    """z3: the active-region Hessian is PSD on the whole region A > 0, pi_k >= 1/2."""
    h, p, a, q = _is_pg_hessian()[:4]
    ra, rq, rp0 = (sp.Symbol(s.name, real=True) for s in (a, q, p[0]))
    region = [ra > 0, rq > 0, rp0 >= sp.Rational(1, 2)]
    res = z3_psd(h, p, extra=(a, q), assumptions=region)
    if res.status != "proved":
        return undecided(f"z3 did not prove the PSD region: {res.status} {res.detail}")
    pt = {p[0]: sp.Rational(2, 3), p[1]: sp.Rational(1, 6), p[2]: sp.Rational(1, 6)}
    pt.update({a: 1, q: sp.Rational(3, 5)})  # r = 10/9 < 1.2: unclipped for PPO 0.2
    eig = [sp.nsimplify(e) for e in h.xreplace(pt).eigenvals()]
    if min(eig) < 0:
        return undecided(f"the witness point is not PSD: {eig}")
    return failed(
        "z3 proved u^T H u >= 0 for all p in simplex(3), u, A > 0, pi_k >= 1/2 (active "
        "region); witness unclipped at r = 10/9, exact eigenvalues "
        + ", ".join(str(e) for e in eig),
        {
            "pi": ["2/3", "1/6", "1/6"],
            "mu_k": "3/5",
            "adv": 1,
            "eigenvalues": [str(e) for e in eig],
        },
    )


def ppo_symbolic_condition(*, quick: bool = False) -> object:
    """sympy: f' = f'' = -A r, and the structure theorem's condition."""
    h, p, a, q, grad = _is_pg_hessian()
    fit = fit_sampled_token(grad, h, p, 0)
    if fit is None:
        return undecided("the active-region Hessian is not of sampled-token form")
    r = p[0] / q
    if sp.simplify(fit.fprime + a * r) != 0 or sp.simplify(fit.fsecond + a * r) != 0:
        return failed(
            f"f' = {fit.fprime}, f'' = {fit.fsecond}, not -A r",
            {"fprime": str(fit.fprime), "fsecond": str(fit.fsecond)},
        )
    # V >= 3 condition: f' <= 0 and -f' + f''(1-p)/p >= 0  <=>  A >= 0 and p >= 1/2.
    margin = sp.factor(-fit.fprime + fit.fsecond * (1 - p[0]) / p[0])
    expected = a * (2 * p[0] - 1) / q
    if sp.simplify(margin - expected) != 0:
        return failed(f"margin {margin} != A(2p-1)/q", {"margin": str(margin)})
    return passed(
        "registry is_pg (PPO's active branch) has f' = f'' = -A p_k/q; PSD (V >= 3) "
        "iff "
        f"-f' = A r >= 0 and -f' + f''(1-p)/p = {margin} >= 0, i.e. A >= 0 and pi_k >= "
        f"1/2"
    )


def ppo_z3_theorem(*, quick: bool = False) -> object:
    """z3: the sampled-token PSD theorem that the condition rests on."""
    res = prove_sampled_token_theorem()
    bad = {k: r.status for k, r in res.items() if r.status != "proved"}
    if bad:
        return undecided(f"not proved: {bad}")
    return passed(f"z3 proved all {len(res)} parts of the sampled-token PSD theorem")


def ppo_numeric_region(*, quick: bool = False, name: str = "ppo") -> object:
    """float64: PSD-ness of the registry ppo Hessian matches the predicted region."""
    rng = np.random.default_rng(2)
    n, skipped, agree = (60 if quick else 400), 0, 0
    for _ in range(n):
        pi = rng.dirichlet(np.full(5, 0.6))
        mu = rng.dirichlet(np.full(5, 0.6))
        adv = float(rng.choice([-1.5, -0.4, 0.4, 1.5]))
        r = pi[0] / mu[0]
        clipped = (adv > 0 and r > 1.2) or (adv < 0 and r < 0.8)
        if min(abs(r - 1.2), abs(r - 0.8), abs(pi[0] - 0.5)) < 1e-2 or pi.min() < 1e-6:
            skipped += 1
            continue
        predicted = clipped or (adv > 0 and pi[0] >= 0.5)
        f = registry_fn(name, sampled=0, adv=adv, behavior_logp=np.log(mu))
        lam, vec = min_curvature(f, np.log(pi))
        scale = abs(adv) * r
        psd = lam >= -TOL * max(scale, 1.0)
        if psd != predicted:
            return failed(
                f"predicted PSD={predicted} but min eigenvalue {lam:.3g}",
                {
                    "pi": pi.tolist(),
                    "mu": mu.tolist(),
                    "adv": adv,
                    "min_eigenvalue": lam,
                },
            )
        agree += 1
    return passed(
        f"{agree} random states (V=5): PSD exactly when clipped or (A > 0 and pi_k >= "
        f"1/2); {skipped} within 1e-2 of a boundary skipped",
        agree=agree,
        skipped=skipped,
    )


ppo_not_logits_convex = Claim(
    id="lco.ppo_not_logits_convex",
    source="seed 004 (LCO), Lemma 4.5, Eqs. (39)-(42)",
    provenance="NOT FOUND",
    statement=(
        "Lemma 4.5 (as the review reads it): the PPO clipped surrogate is not "
        "logits-convex at any time step, i.e. its logit Hessian is not PSD at any "
        "state."
    ),
    objection=(
        "minor 2: in clipped regions the gradient and Hessian are zero (PSD); the "
        "correct statement is that the Hessian is indefinite at some states of the "
        "active region"
    ),
    checks=(
        Check(
            "float64 Hessian at a clipped and an active state",
            Method.NUMERIC,
            ppo_psd_states,
        ),
        Check("z3: PSD region of the active branch, V=3", Method.Z3, ppo_z3_region),
    ),
    correction=Correction(
        statement=(
            "PPO's token loss has zero Hessian where clipped; on the active region its "
            "Hessian is -A r [v v^T - (diag pi - pi pi^T)], v = e_k - pi, which for V "
            ">= 3 is PSD iff A >= 0 and pi_k >= 1/2. So the Hessian is PSD exactly on "
            "{clipped} U {A > 0, pi_k >= 1/2}: PPO is not convex in z for any A != 0, "
            "but not because every state has negative curvature."
        ),
        checks=(
            Check(
                "sympy: f' = f'' = -A r and the condition",
                Method.SYMBOLIC,
                ppo_symbolic_condition,
            ),
            Check("z3: the sampled-token PSD theorem", Method.Z3, ppo_z3_theorem),
            Check(
                "float64 eigenvalues vs the region, V=5",
                Method.NUMERIC,
                ppo_numeric_region,
            ),
        ),
    ),
)

r"""LCO §4.3 (seed 004): Lemma 4.5, PPO's clipped surrogate is not logits-convex,
and the exact region where its logit Hessian is PSD.

The paper's text is NOT FOUND. As stated (for every A != 0, not convex in the usual
sense) the lemma holds; the exact PSD region is the review's refinement (minor
point 2), its own claim. The Hessian is DERIVED (research notes §2.5) and derived again
from the registry's ``is_pg`` spec (PPO's active branch).
"""

from __future__ import annotations

import numpy as np
import sympy as sp

from theorycheck.claims import (
    Check,
    Claim,
    Kind,
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

#: An active (unclipped) state for every A != 0 and every PPO epsilon: pi = mu
#: uniform over V = 3, so r = 1.
UNIFORM = [sp.Rational(1, 3)] * 3


def ppo_indefinite_every_advantage(*, quick: bool = False) -> object:
    """sympy: at pi = mu = uniform (r = 1, unclipped for every epsilon) the active-
    branch Hessian is A * M with M exact; M has eigenvalues of both signs, so for every
    A > 0 (A * lambda_min(M) < 0) and every A < 0 (A * lambda_max(M) < 0) the Hessian
    has a negative eigenvalue: not PSD, hence not convex in z."""
    h, p, a, q = _is_pg_hessian()[:4]
    at = {**dict(zip(p, UNIFORM)), q: sp.Rational(1, 3)}
    m = sp.simplify(h.xreplace(at) / a)
    if m.has(a):
        return undecided(f"the Hessian at r = 1 is not linear in A: {m}")
    eig = sorted(sp.nsimplify(e) for e in m.eigenvals())
    lo, hi = eig[0], eig[-1]
    if lo < 0 < hi:
        return passed(
            "registry is_pg (PPO's active branch) at pi = mu = (1/3, 1/3, 1/3), "
            f"r = 1: Hessian = A * M, exact eigenvalues of M {[str(e) for e in eig]}: "
            f"negative curvature A*{lo} for every A > 0 and A*{hi} for every A < 0",
            eigenvalues_of_M=[str(e) for e in eig],
        )
    return failed(
        f"M has eigenvalues {eig}: the Hessian is PSD for one sign of A",
        {"pi": ["1/3"] * 3, "mu_k": "1/3", "eigenvalues_of_M": [str(e) for e in eig]},
    )


def ppo_negative_curvature(*, quick: bool = False, name: str = "ppo") -> object:
    """float64: the registry ppo loss has a negative logit eigenvalue at an unclipped
    state for each A in a range of magnitudes and both signs, re-checked by a second
    difference along its eigenvector."""
    advs = (-100.0, -1.0, -0.01, 0.01, 1.0, 100.0)
    z = np.log([0.3, 0.5, 0.2])
    mu = np.log([0.28, 0.52, 0.2])  # r = 15/14: unclipped for epsilon = 0.2
    rows = []
    for adv in advs:
        f = registry_fn(name, sampled=0, adv=adv, behavior_logp=mu)
        lam, vec = min_curvature(f, z)
        fd = second_difference(f, z, vec)
        rows.append({"adv": adv, "min_eigenvalue": lam, "second_difference": fd})
        if not (lam < -TOL * abs(adv) and fd < 0):
            return failed(
                f"no negative curvature at A = {adv}: min eigenvalue {lam:.3g}, "
                f"second difference {fd:.3g}",
                {"pi": np.exp(z).tolist(), "mu": np.exp(mu).tolist(), **rows[-1]},
            )
    return passed(
        f"registry ppo at pi = (0.3, 0.5, 0.2), mu_k = 0.28 (r = 1.07, unclipped): "
        f"negative logit eigenvalue for every A in {list(advs)} (smallest "
        f"{min(r['min_eigenvalue'] for r in rows):.3g}), second differences agree",
        rows=rows,
    )


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
    if len(found) == len(states):
        return passed(
            "PSD logit Hessian at "
            + ", ".join(
                f"{k} (min eig {v['min_eigenvalue']:.3g})" for k, v in found.items()
            )
            + "; re-checked by second differences along 8 directions",
            states=found,
        )
    missing = sorted(set(states) - set(found))
    return failed(
        f"no PSD Hessian at {missing}, where the region predicts one",
        {"states": missing},
    )


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
    """z3: the active-region Hessian is PSD on the whole region A > 0, pi_k >= 1/2,
    with an exact unclipped witness."""
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
        return failed(
            f"the witness point is not PSD: {eig}",
            {"pi": ["2/3", "1/6", "1/6"], "eigenvalues": [str(e) for e in eig]},
        )
    return passed(
        "z3 proved u^T H u >= 0 for all p in simplex(3), u, A > 0, pi_k >= 1/2 (active "
        "region); witness unclipped at r = 10/9, exact eigenvalues "
        + ", ".join(str(e) for e in eig),
        witness={
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
    at_zero = sp.simplify(h.subs(a, 0))
    if not at_zero.is_zero_matrix:
        return failed(f"the Hessian at A = 0 is {at_zero}, not 0", {"adv": 0})
    return passed(
        "registry is_pg (PPO's active branch) has f' = f'' = -A p_k/q; PSD (V >= 3) "
        "iff "
        f"-f' = A r >= 0 and -f' + f''(1-p)/p = {margin} >= 0, i.e. A = 0 (Hessian 0) "
        "or A > 0 and pi_k >= 1/2"
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
        adv = float(rng.choice([-1.5, -0.4, 0.0, 0.4, 1.5]))
        r = pi[0] / mu[0]
        clipped = (adv > 0 and r > 1.2) or (adv < 0 and r < 0.8)
        if min(abs(r - 1.2), abs(r - 0.8), abs(pi[0] - 0.5)) < 1e-2 or pi.min() < 1e-6:
            skipped += 1
            continue
        predicted = clipped or adv == 0 or (adv > 0 and pi[0] >= 0.5)
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
        f"{agree} random states (V=5, A in -1.5, -0.4, 0, 0.4, 1.5): PSD exactly when "
        f"clipped, A = 0, or (A > 0 and pi_k >= 1/2); {skipped} within 1e-2 of a "
        "boundary skipped",
        agree=agree,
        skipped=skipped,
    )


PPO_NOT_LOGITS_CONVEX = Claim(
    id="lco.ppo_not_logits_convex",
    source="seed 004 (LCO), Lemma 4.5, Eqs. (39)-(42)",
    provenance="NOT FOUND",
    statement=(
        "For every advantage A != 0, PPO's clipped surrogate (token loss, epsilon = "
        "0.2) is not convex in the logits z: its logit Hessian is not PSD at every "
        "z (there are unclipped states with negative curvature)."
    ),
    quote=(
        "NOT FOUND (the paper's text); the seed review's reading: the PPO clipped "
        'surrogate is "not logits convex at any time step"; docs/papers.md §2.5 '
        "(DERIVED): the active-branch Hessian -A r [(e_k - pi)(e_k - pi)^T - "
        "(diag(pi) - pi pi^T)] is generally indefinite."
    ),
    location="§4.3, Lemma 4.5, Eqs. (39)-(42)",
    kind=Kind.LEMMA,
    assumptions=(
        "A != 0 (at A = 0 the token loss is 0 for every z)",
        "convexity in the usual sense: the Hessian PSD at every z",
        "PPO clip epsilon = 0.2, behavior probability mu_k > 0",
    ),
    checks=(
        Check(
            "sympy: exact Hessian at r = 1, every A != 0",
            Method.SYMBOLIC,
            ppo_indefinite_every_advantage,
        ),
        Check(
            "float64 negative curvature, A from -100 to 100",
            Method.NUMERIC,
            ppo_negative_curvature,
        ),
    ),
)

PPO_PSD_REGION = Claim(
    id="lco.ppo_psd_region",
    source="seed 004 (LCO), Lemma 4.5, the review's minor comment 2",
    provenance="DERIVED",
    statement=(
        "PPO's token loss has Hessian 0 where clipped and at A = 0; on the active "
        "region its Hessian is -A r [v v^T - (diag pi - pi pi^T)], v = e_k - pi, which "
        "for V >= 3 is PSD iff A = 0 or (A > 0 and pi_k >= 1/2). So the logit Hessian "
        "is PSD exactly on {clipped} U {A = 0} U {A > 0, pi_k >= 1/2}: there are "
        "states, clipped and unclipped, where it is PSD."
    ),
    quote=(
        "Review, minor 2: \"The statement that PPO is 'not logits convex at any time "
        "step' is too strong. ... in clipped regions the gradient is zero and the "
        "Hessian is PSD (zero). The correct statement is that the PPO surrogate is "
        "not convex in general on the active region; there exist states where the "
        'Hessian is indefinite."'
    ),
    location="§4.3, Lemma 4.5; review minor comment 2",
    kind=Kind.REVIEWER,
    extends="lco.ppo_not_logits_convex",
    objection=(
        "minor 2: in clipped regions the gradient and Hessian are zero (PSD); the "
        "correct statement is that the Hessian is indefinite at some states of the "
        "active region"
    ),
    assumptions=("V >= 3", "PPO clip epsilon = 0.2"),
    checks=(
        Check(
            "sympy: f' = f'' = -A r and the condition",
            Method.SYMBOLIC,
            ppo_symbolic_condition,
        ),
        Check("z3: the sampled-token PSD theorem", Method.Z3, ppo_z3_theorem),
        Check("z3: PSD region of the active branch, V=3", Method.Z3, ppo_z3_region),
        Check(
            "float64 Hessian at a clipped and an active state",
            Method.NUMERIC,
            ppo_psd_states,
        ),
        Check(
            "float64 eigenvalues vs the region, V=5",
            Method.NUMERIC,
            ppo_numeric_region,
        ),
    ),
)

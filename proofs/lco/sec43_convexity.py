r"""LCO §4.3 (seed 004): which losses are convex in the logits (Lemmas 4.5, 4.6).

Logits convexity = the logit Hessian (frozen targets and weights held constant) is
PSD at every z (the paper's Definition, from secondary sources: papers.md §2.1).
The paper's text is NOT FOUND; the statements are the seed review's, the Hessians are
DERIVED (papers.md §2.5) and derived again here from the registry's SymPy specs.
"""

from __future__ import annotations

import numpy as np
import sympy as sp
from _lco_common import (
    TOL,
    failed,
    min_curvature,
    passed,
    probability_hessian,
    rational_point,
    registry_fn,
    second_difference,
    undecided,
    variance_gap,
    z3_psd,
)

from theorycheck.claims import Check, Claim, Correction, Method
from theorycheck.formal import prove_sampled_token_theorem
from theorycheck.losses import LOSSES
from theorycheck.symbolic import fit_sampled_token, logit_gradient, to_probability

LCO_FORMS = (
    "lco_mse",
    "lco_lch",
    "lco_kld",
    "lco_mse_code",
    "lco_lch_code",
    "lco_kld_code",
)


# --- SFT ------------------------------------------------------------------------------


def sft_symbolic(*, quick: bool = False, spec=None) -> object:
    """sympy: the SFT Hessian is diag(p) - pp^T (variance identity), V = 3, 4."""
    spec = spec or LOSSES["sft"].symbolic
    for vocab in (3,) if quick else (3, 4):
        z = sp.symbols(f"z0:{vocab}", real=True)
        h, p = probability_hessian(spec(list(z), 0), z)
        gap = variance_gap(h, p)
        if gap != 0:
            u = sp.symbols(f"u0:{vocab}", real=True)
            pt = dict(zip(p, rational_point(vocab, 1)))
            pt.update({u[0]: 1, u[1]: -1, **{ui: 0 for ui in u[2:]}})
            quad = (sp.Matrix(u).T * h * sp.Matrix(u))[0, 0].xreplace(pt)
            if quad < 0:
                return failed(
                    f"V={vocab}: u^T H u = {quad} < 0 (exact)",
                    {"p": [str(pt[x]) for x in p], "u": [1, -1], "quad": str(quad)},
                )
            return undecided(f"V={vocab}: H is not diag(p) - pp^T; gap {gap}")
    return passed(
        "the registry sft spec's Hessian in p is diag(p) - pp^T: u^T H u - "
        "sum_i p_i (u_i - <p,u>)^2 expands to 0 on sum p = 1 (V = 3, 4), so H >= 0"
    )


def sft_z3(*, quick: bool = False, spec=None) -> object:
    """z3 over the simplex, V = 3: u^T H u >= 0 for the registry spec's Hessian."""
    spec = spec or LOSSES["sft"].symbolic
    z = sp.symbols("z0:3", real=True)
    h, p = probability_hessian(spec(list(z), 0), z)
    res = z3_psd(h, p)
    if res.status == "proved":
        return passed("z3: forall p in simplex(3), u: u^T H(p) u >= 0 proved")
    if res.status == "refuted":
        cex = {k: str(v) for k, v in res.counterexample.items()}
        return failed("z3: u^T H u < 0 at a point (re-checked exactly)", cex)
    return undecided(f"z3: {res.detail}")


def sft_numeric(*, quick: bool = False, fn=None) -> object:
    """float64 autodiff Hessian eigenvalues of the registry sft loss, V = 6."""
    rng = np.random.default_rng(0)
    worst = np.inf
    for _ in range(20 if quick else 200):
        z = rng.normal(scale=rng.uniform(0.1, 8.0), size=6)
        f = fn or registry_fn("sft", sampled=int(rng.integers(6)))
        lam, vec = min_curvature(f, z)
        worst = min(worst, lam)
        if lam < -TOL and second_difference(f, z, vec) < -TOL:
            return failed(
                f"negative curvature {lam:.3g} (second difference agrees)",
                {"logits": z.tolist(), "direction": vec.tolist(), "eigenvalue": lam},
            )
    n = 20 if quick else 200
    return passed(
        f"{n} random logits (V=6, scale <= 8): min eigenvalue {worst:.3g} >= -{TOL}",
        min_eigenvalue=worst,
        samples=n,
    )


sft_logits_convex = Claim(
    id="lco.sft_logits_convex",
    source="seed 004 (LCO), §4.3: SFT's NLL is logits-convex",
    provenance="DERIVED",
    statement=(
        "The SFT loss -log pi_k(z) has logit Hessian diag(pi) - pi pi^T, PSD for every "
        "z (paper text NOT FOUND; the derived statement is the spec)."
    ),
    checks=(
        Check("sympy variance identity, V=3,4", Method.SYMBOLIC, sft_symbolic),
        Check("z3 over the simplex, V=3", Method.Z3, sft_z3),
        Check("float64 autodiff eigenvalues, V=6", Method.NUMERIC, sft_numeric),
    ),
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


# --- LCO losses (Lemma 4.6) -----------------------------------------------------------


def _lco_inputs(vocab: int, dense: bool, rng):
    adv = (
        rng.normal(size=vocab).round(2).tolist()
        if dense
        else float(rng.choice([-1.2, 0.8]))
    )
    return {"adv": adv, "old_logits": rng.normal(size=vocab).round(2).tolist()}


def lco_symbolic(*, quick: bool = False, forms=LCO_FORMS) -> object:
    """sympy: MSE/LCH Hessians are positive diagonal, KLD's is diag(p) - pp^T."""
    rng = np.random.default_rng(3)
    z = sp.symbols("z0:3", real=True)
    found = []
    for name in forms:
        for dense in (False,) if quick else (False, True):
            expr = LOSSES[name].symbolic(list(z), 0, **_lco_inputs(3, dense, rng))
            if "kld" in name:
                h, p = probability_hessian(expr, z)
                ok = variance_gap(h, p) == 0
                what = "diag(p) - pp^T"
            else:
                from theorycheck.symbolic import logit_hessian

                h = logit_hessian(expr, z)
                diag = [h[i, i] for i in range(3)]
                off = all(h[i, j] == 0 for i in range(3) for j in range(3) if i != j)
                pos = all(
                    sp.factor(sp.together(d.rewrite(sp.exp))).is_positive for d in diag
                )
                ok = off and pos
                first = sp.factor(sp.together(diag[0].rewrite(sp.exp)))
                what = f"diagonal, H_00 = {first} > 0"
                if off and not pos:
                    pt = {zi: 0 for zi in z}
                    vals = [d.xreplace(pt) for d in diag]
                    if min(vals) < 0:
                        return failed(
                            f"{name}: Hessian diagonal {vals} at z = 0",
                            {"loss": name, "diagonal": [str(v) for v in vals]},
                        )
            if not ok:
                return undecided(f"{name} (dense={dense}): Hessian not recognised")
            found.append(f"{name}: {what}")
    kinds = "sparse" if quick else "sparse and dense"
    return passed(
        "; ".join(found[:: 1 if quick else 2]) + f" ({kinds} advantages, V=3)"
    )


def lco_z3(*, quick: bool = False, forms=("lco_kld", "lco_kld_code")) -> object:
    """z3 over the simplex, V = 3, for the KL forms (rational in p)."""
    z = sp.symbols("z0:3", real=True)
    rng = np.random.default_rng(4)
    for name in forms:
        expr = LOSSES[name].symbolic(list(z), 0, **_lco_inputs(3, False, rng))
        h, p = probability_hessian(expr, z)
        res = z3_psd(h, p)
        if res.status == "refuted":
            cex = {k: str(v) for k, v in res.counterexample.items()}
            return failed(f"z3: {name} has u^T H u < 0", {"loss": name, **cex})
        if res.status != "proved":
            return undecided(f"z3 on {name}: {res.detail}")
    return passed(f"z3: u^T H u >= 0 on simplex(3) for {', '.join(forms)}")


def lco_numeric(*, quick: bool = False, forms=LCO_FORMS, sign: float = 1.0) -> object:
    """float64 autodiff eigenvalues of every LCO form at random points, V = 6."""
    rng = np.random.default_rng(5)
    worst = {}
    for name in forms:
        for i in range(6 if quick else 40):
            inputs = _lco_inputs(6, bool(i % 2), rng)
            k = int(rng.integers(6))
            f = registry_fn(name, sampled=k, sign=sign, **inputs)
            z = np.asarray(inputs["old_logits"]) + rng.normal(scale=3.0, size=6)
            lam, vec = min_curvature(f, z)
            worst[name] = min(worst.get(name, np.inf), lam)
            if lam < -TOL and second_difference(f, z, vec) < -TOL:
                return failed(
                    f"{name}: negative curvature {lam:.3g} (second difference agrees)",
                    {"loss": name, "logits": z.tolist(), "eigenvalue": lam, **inputs},
                )
    return passed(
        "min eigenvalues: " + ", ".join(f"{k} {v:.2g}" for k, v in worst.items()),
        min_eigenvalues=worst,
    )


lco_losses_logits_convex = Claim(
    id="lco.lco_losses_logits_convex",
    source="seed 004 (LCO), Lemma 4.6",
    provenance="NOT FOUND",
    statement=(
        "Lemma 4.6: LCO-MSE, LCO-LCH and LCO-KLD are logits-convex (paper forms and "
        "the official code's forms, sparse and dense advantages); paper text NOT "
        "FOUND, the derived Hessians I/V, diag(sech^2(z - z*))/V, diag(pi) - pi pi^T "
        "are the spec."
    ),
    checks=(
        Check(
            "sympy Hessians of the registry specs, V=3", Method.SYMBOLIC, lco_symbolic
        ),
        Check("z3 over the simplex (KL forms), V=3", Method.Z3, lco_z3),
        Check("float64 autodiff eigenvalues, V=6", Method.NUMERIC, lco_numeric),
    ),
)

__all__ = [
    "lco_losses_logits_convex",
    "ppo_not_logits_convex",
    "sft_logits_convex",
]

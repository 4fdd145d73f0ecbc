r"""LCO §4.3 (seed 004): SFT and the LCO losses are convex in the logits (Lemma 4.6;
PPO's Lemma 4.5 is in ``sec43_lemma45_ppo.py``).

Logits convexity = the logit Hessian (frozen targets and weights held constant) is
PSD at every z (the paper's Definition, from secondary sources: docs/papers.md §2.1).
The paper's text is NOT FOUND; the statements are the seed review's, the Hessians are
DERIVED (docs/papers.md §2.5) and derived again here from the registry's SymPy specs.
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
from theorycheck.losses import LOSSES

from ._common import (
    TOL,
    min_curvature,
    probability_hessian,
    rational_point,
    registry_fn,
    second_difference,
    variance_gap,
    z3_psd,
)

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


SFT_LOGITS_CONVEX = Claim(
    id="lco.sft_logits_convex",
    source="seed 004 (LCO), §4.3: SFT's NLL is logits-convex",
    provenance="DERIVED",
    quote=(
        "NOT FOUND (research notes §2.5 DERIVED). The review: \"The paper proves SFT's "
        'NLL loss is logits-convex".'
    ),
    location="§4.3",
    kind=Kind.PROPOSITION,
    assumptions=("convexity in the usual sense: the logit Hessian PSD at every z",),
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


LCO_LOSSES_LOGITS_CONVEX = Claim(
    id="lco.lco_losses_logits_convex",
    source="seed 004 (LCO), Lemma 4.6",
    provenance="NOT FOUND",
    quote=(
        'NOT FOUND (Lemma 4.6; research notes §2.5 DERIVED). The review: "the LCO '
        'losses (MSE, log-cosh, forward KL) are all logits-convex"; "The LCO losses '
        'are convex by design (Lemma 4.6)".'
    ),
    location="§4.3, Lemma 4.6",
    kind=Kind.LEMMA,
    assumptions=(
        "a fixed target (z* or pi* held constant)",
        "sparse and dense advantages; the paper forms and the official code's forms",
    ),
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

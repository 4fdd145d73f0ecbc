r"""The survey's worked examples (seed 000, "RL Surrogate Losses in 2026"), checked on
the registry's rules: dual-clip at r = 4 and DPPO vs PPO on a common token.

The survey's text is read in full (docs/papers.md §4, PAPER); the numbers are its own.
"""

from __future__ import annotations

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
from theorycheck.formal import prove

from ._common import (
    analytic_coefficient,
    autodiff_coefficient,
    symbolic_coefficient,
    three_token,
)

# --- dual-clip ------------------------------------------------------------------------

#: r = p/q = 4, A = -1, kappa = 3 (the survey's numbers); V = 3.
DUAL = {"p": 0.8, "q": 0.2, "adv": -1.0}
DUAL_EXPECTED = {"ppo": (-4.0, -4.0), "dual_clip": (0.0, -3.0)}  # (c, objective)


def dual_numeric(*, quick: bool = False, expected=DUAL_EXPECTED) -> object:
    """float64: the registry coefficients and the autodiff of the JAX losses."""
    pi, mu = three_token(DUAL["p"]), three_token(DUAL["q"])
    got = {}
    for name, (c_want, j_want) in expected.items():
        c_an, gated = analytic_coefficient(name, DUAL["p"], DUAL["q"], DUAL["adv"])
        c_ad, j = autodiff_coefficient(name, pi, mu, DUAL["adv"])
        got[name] = {
            "c_analytic": c_an,
            "c_autodiff": c_ad,
            "objective": j,
            "gated": gated,
        }
        if max(abs(c_an - c_want), abs(c_ad - c_want), abs(j - j_want)) > 1e-12:
            return failed(
                f"{name}: c = {c_an:.12g} (analytic), {c_ad:.12g} (autodiff), "
                f"objective {j:.12g}; the survey says c = {c_want}, objective {j_want}",
                {"rule": name, **DUAL, **got[name]},
            )
    return passed(
        "PPO: c = -4 (objective rA = -4, unclipped); dual-clip: objective -3 = kappa "
        "A, c = 0 (analytic coefficient and float64 autodiff agree to 1e-12)",
        **got,
    )


def dual_symbolic(*, quick: bool = False, expected=DUAL_EXPECTED) -> object:
    """Exact: the registry SymPy specs at p = 4/5, q = 1/5."""
    p, q = sp.Rational(4, 5), sp.Rational(1, 5)
    pi, mu = three_token(p), three_token(q)
    got = {}
    for name, (c_want, j_want) in expected.items():
        c, j = symbolic_coefficient(name, pi, mu, -1)
        got[name] = (str(c), str(j))
        if (
            sp.simplify(c - sp.nsimplify(c_want)) != 0
            or sp.simplify(j - sp.nsimplify(j_want)) != 0
        ):
            return failed(
                f"{name}: exact c = {c}, objective = {j}; the survey says "
                f"{c_want}, {j_want}",
                {
                    "rule": name,
                    "p": "4/5",
                    "q": "1/5",
                    "c": str(c),
                    "objective": str(j),
                },
            )
    return passed(f"exact (c, objective): {got}")


DUAL_CLIP_EXAMPLE = Claim(
    id="survey.dual_clip_example",
    source="seed 000 (survey), 'Dual-clip' worked example",
    provenance="PAPER",
    quote=(
        '"At r=4, A=-1, kappa=3, ordinary PPO keeps c=-4. Dual-clip selects the '
        'constant objective -3, so c=0."'
    ),
    location="'Dual-clip' paragraph",
    kind=Kind.REMARK,
    assumptions=(
        "kappa > 1",
        "PPO epsilon 0.2",
    ),
    statement=(
        "At r = 4, A = -1, kappa = 3, ordinary PPO keeps c = -4; dual-clip selects the "
        "constant objective -3 (= kappa A), so c = 0."
    ),
    checks=(
        Check("float64 coefficient + autodiff", Method.NUMERIC, dual_numeric),
        Check("exact SymPy spec", Method.SYMBOLIC, dual_symbolic),
    ),
)


# --- DPPO vs PPO ----------------------------------------------------------------------

DPPO = {"p": 0.74, "q": 0.90, "adv": -1.0}
DPPO_EXPECTED = {"ppo": -0.74 / 0.90, "dppo_binary_tv": 0.0}


def dppo_numeric(*, quick: bool = False, expected=DPPO_EXPECTED) -> object:
    """float64: registry coefficients and autodiff for PPO (0.2) and DPPO binary TV."""
    pi, mu = three_token(DPPO["p"]), three_token(DPPO["q"])
    got = {}
    for name, c_want in expected.items():
        c_an, gated = analytic_coefficient(name, DPPO["p"], DPPO["q"], DPPO["adv"])
        c_ad, _ = autodiff_coefficient(name, pi, mu, DPPO["adv"])
        got[name] = {"c_analytic": c_an, "c_autodiff": c_ad, "gated": gated}
        if max(abs(c_an - c_want), abs(c_ad - c_want)) > 1e-12:
            return failed(
                f"{name}: c = {c_an:.12g} / {c_ad:.12g}; the survey says {c_want:.6g}",
                {"rule": name, **DPPO, **got[name]},
            )
    return passed(
        f"PPO keeps c = {got['ppo']['c_analytic']:.6f} (r = 0.8222 in [0.8, 1.2]); "
        f"DPPO "
        "binary TV gates it (q - p = 0.16 > 0.15): c = 0; autodiff agrees",
        **got,
    )


def dppo_symbolic(*, quick: bool = False, expected=DPPO_EXPECTED) -> object:
    """Exact: the SymPy specs at p = 37/50, q = 9/10."""
    p, q = sp.Rational(37, 50), sp.Rational(9, 10)
    got = {}
    for name, c_want in expected.items():
        c, _ = symbolic_coefficient(name, three_token(p), three_token(q), -1)
        got[name] = str(c)
        if abs(float(c) - c_want) > 1e-12:
            return failed(
                f"{name}: exact c = {c}, the survey says {c_want:.6g}",
                {"rule": name, "p": "37/50", "q": "9/10", "c": str(c)},
            )
    return passed(
        f"exact: c_PPO = {got['ppo']} (= -0.8222), c_DPPO = {got['dppo_binary_tv']}"
    )


THRESHOLD = sp.Rational(3, 4)


def dppo_z3(*, quick: bool = False, threshold=THRESHOLD) -> object:
    """z3: for A < 0, PPO (eps 0.2) keeps and DPPO (delta 0.15) gates only if q > "
    "3/4."""
    p, q = sp.symbols("p q", real=True)
    keep_ppo = p - sp.Rational(4, 5) * q >= 0  # r >= 0.8 with q > 0
    gate_dppo = q - p > sp.Rational(3, 20)
    box = [p > 0, p < 1, q > 0, q < 1]
    res = prove(q > threshold, [p, q], assumptions=[*box, keep_ppo, gate_dppo])
    if res.status == "refuted":
        cex = {k: str(v) for k, v in res.counterexample.items()}
        return failed(f"z3: PPO keeps and DPPO gates at q <= {threshold}", cex)
    if res.status != "proved":
        return undecided(f"z3: {res.detail}")
    wq = sp.Rational(19, 25)  # a witness just above 3/4: p = 0.8 q
    witness = {p: sp.Rational(4, 5) * wq, q: wq}
    if not (keep_ppo.subs(witness) and gate_dppo.subs(witness)):
        return undecided("the witness q = 0.76, p = 0.608 does not satisfy both gates")
    return passed(
        "z3 proved: A < 0, r >= 0.8 (PPO keeps) and q - p > 0.15 (DPPO gates) imply "
        "q > 3/4 (the survey's q = 0.9 is such a common token); at q = 0.76, p = 0.608 "
        "both hold, so the bound is attained in the limit"
    )


DPPO_VS_PPO_EXAMPLE = Claim(
    id="survey.dppo_vs_ppo_example",
    source="seed 000 (survey), 'DPPO' worked example",
    provenance="PAPER",
    quote=(
        '"Take A=-1, q=0.90, p=0.74. PPO keeps c≈-0.822, inside its 0.8–1.2 bounds. '
        "DPPO rejects it: the decrease of 0.16 exceeds 0.15. Mass-based gating can be "
        'stricter for common tokens."'
    ),
    location="'DPPO' paragraph",
    kind=Kind.REMARK,
    assumptions=(
        "PPO epsilon 0.2",
        "DPPO binary TV, delta = 0.15",
    ),
    statement=(
        "A = -1, q = 0.90, p = 0.74: PPO keeps c = -0.822 (inside 0.8-1.2); DPPO "
        "(binary TV, delta = 0.15) rejects it since the decrease 0.16 > 0.15; "
        "mass-based gating can be stricter for common tokens."
    ),
    checks=(
        Check("float64 coefficient + autodiff", Method.NUMERIC, dppo_numeric),
        Check("exact SymPy spec", Method.SYMBOLIC, dppo_symbolic),
        Check("z3: where DPPO is stricter than PPO", Method.Z3, dppo_z3),
    ),
)

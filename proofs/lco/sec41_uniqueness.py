r"""The optimal logits are unique only up to a shift c·1 (softmax's invariance).

.. math::
    \mathrm{softmax}(z + c\mathbf 1) = \mathrm{softmax}(z), \qquad
    \arg\max_z \langle \pi_z, A\rangle - \beta\,\mathrm{KL}(\pi_z\|\pi_{old})
        = \{z^* + c\mathbf 1 : c \in \mathbb R\},\ z^* = \log\pi_{old} + A/\beta

The review (minor 3) reports that the paper calls z* "the unique optimal logits"; z* is
one representative of the line z* + c·1.
"""

from __future__ import annotations

import jax.numpy as jnp
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
    passed,
    require_float64,
    sympy_identity,
    undecided,
)

from .dpo_optimum import SOURCE, _lbfgs, _rl_value_and_grad

#: The shift of the second optimum the refutation shows.
SHIFT = 1
#: How far (max - min of z - z*) an L-BFGS optimum may be off the line z* + c·1.
SPREAD_TOL = 1e-5


def _softmax_sym(z):
    total = sum(sp.exp(t) for t in z)
    return [sp.exp(t) / total for t in z]


def _symbolic_second_optimum() -> CheckResult:
    z = sp.symbols("z0:3", real=True)
    moved = [t + SHIFT for t in z]
    same = [sp.simplify(a - b) for a, b in zip(_softmax_sym(moved), _softmax_sym(z))]
    if all(d == 0 for d in same):
        return failed(
            f"sympy: softmax(z + {SHIFT}·1) = softmax(z) for every z (V = 3): z* + "
            f"{SHIFT}·1 != z* has the same policy, so it is optimal too",
            {"z": "z* = log pi_old + A/beta", "other_optimum": f"z* + {SHIFT}·1"},
        )
    return undecided("sympy could not simplify softmax(z + 1) - softmax(z) to 0")


def _objective(z, adv, pi_old, beta) -> float:
    vg = _rl_value_and_grad()
    value, _ = vg(jnp.asarray(z), jnp.asarray(adv), jnp.log(jnp.asarray(pi_old)), beta)
    return -float(value)


def _numeric_second_optimum(quick: bool = False) -> CheckResult:
    require_float64()
    rng = np.random.default_rng(2)
    pi_old = rng.dirichlet(np.ones(6))
    adv, beta = rng.normal(size=6), 0.5
    z_star = np.log(pi_old) + adv / beta
    at, shifted = (_objective(z, adv, pi_old, beta) for z in (z_star, z_star + SHIFT))
    if abs(at - shifted) <= 1e-12 * max(1.0, abs(at)):
        return failed(
            f"float64, V = 6: the objective at z* and at z* + {SHIFT}·1 agrees "
            f"({at:.15g} vs {shifted:.15g}): two distinct optimal logit vectors",
            {"z_star": z_star.tolist(), "shift": SHIFT, "objective": at},
        )
    return undecided(f"the objective differs by {abs(at - shifted):.3g}")


def _symbolic_line() -> CheckResult:
    z = sp.symbols("z0:3", real=True)
    pi = _softmax_sym(z)
    # log pi_i - log pi_0 = z_i - z_0: equal policies <=> equal differences <=> z - w
    # is a multiple of 1
    return sympy_identity(
        [
            sp.expand_log(sp.log(pi[i]) - sp.log(pi[0]), force=True) - (z[i] - z[0])
            for i in (1, 2)
        ],
        what="log softmax(z)_i - log softmax(z)_0 = z_i - z_0 (V = 3): softmax(z) = "
        "softmax(w) iff z - w = c·1, so the optimal set is the line z* + c·1",
    )


def _numeric_line(quick: bool = False) -> CheckResult:
    require_float64()
    rng = np.random.default_rng(4)
    vg = _rl_value_and_grad()
    worst, runs, stalled = 0.0, 3 if quick else 12, 0
    for _ in range(runs):
        logits_old = rng.normal(size=8)  # pi* no smaller than about 1e-4: every
        pi_old = np.exp(logits_old) / np.exp(logits_old).sum()  # logit is pinned
        adv, beta = rng.normal(size=8), float(rng.choice([1.0, 2.0]))
        args = (jnp.asarray(adv), jnp.log(jnp.asarray(pi_old)), jnp.asarray(beta))

        def fun(y, args=args):
            v, g = vg(jnp.asarray(y), *args)
            return float(v), np.asarray(g, np.float64)

        z_star = np.log(pi_old) + adv / beta
        y, _ = _lbfgs(fun, rng.normal(scale=3.0, size=8))
        if fun(y)[0] > fun(z_star)[0] + 1e-10:  # a line search that left the basin
            stalled += 1  # for a saturated softmax (gradient ~ 0): not an optimum
            continue
        gap = y - z_star
        worst = max(worst, float(gap.max() - gap.min()))
    if stalled == runs:
        return undecided("no L-BFGS run reached the optimal value")
    if worst > SPREAD_TOL:
        return failed(
            f"an optimum found by L-BFGS is {worst:.3g} off the line z* + c·1",
            {"spread": worst},
        )
    return passed(
        f"float64 L-BFGS from {runs} random starts (V = 8): each of the "
        f"{runs - stalled} runs that reached the optimal value (the others stalled "
        f"on a saturated softmax) has z - z* constant across the vocabulary within "
        f"{worst:.1e} (its c differs with the start)",
        spread=worst,
        stalled=stalled,
    )


OPTIMAL_LOGITS_UNIQUE_UP_TO_SHIFT = Claim(
    id="lco.optimal_logits_unique_up_to_shift",
    source=f"{SOURCE}, §4.1 / Appendix D, Eq. (7) (as the review quotes it)",
    provenance="NOT FOUND",
    quote=(
        "NOT FOUND (the paper's text). The review (minor 3): \"The text oscillates "
        "between calling z* 'a specific solution' and 'the unique optimal logits.' "
        "Because of softmax translation invariance, z* in Eq. (7) is one "
        'representative of an equivalence class."'
    ),
    location="§4.1, Appendix D, Eq. (7) (the review's reading)",
    kind=Kind.PROPOSITION,
    assumptions=("one state, A fixed, beta > 0, pi_old with full support",),
    statement=(
        "z* = log pi_old + A/beta is the unique maximiser over logits of <pi_z, A> - "
        "beta KL(pi_z || pi_old) ('the unique optimal logits')."
    ),
    checks=(
        Check(
            "sympy, softmax(z + 1) = softmax(z)",
            Method.SYMBOLIC,
            _symbolic_second_optimum,
        ),
        Check(
            "float64, the objective at z* and z* + 1",
            Method.NUMERIC,
            _numeric_second_optimum,
        ),
    ),
    correction=Correction(
        statement=(
            "The maximisers are exactly the line z* + c·1 (c real): the optimal "
            "policy pi* is unique, the logits only up to a shift."
        ),
        checks=(
            Check("sympy, log-ratio identity", Method.SYMBOLIC, _symbolic_line),
            Check("float64 L-BFGS from random starts", Method.NUMERIC, _numeric_line),
        ),
    ),
)

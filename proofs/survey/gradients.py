r"""The survey's structural statements about gradients (seed 000): the weight form,
agreement on-policy, and reduction weights vs gradient norms.

The survey's text is read in full (docs/papers.md §4, PAPER).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import sympy as sp

from theorycheck.claims import (
    Check,
    Claim,
    Kind,
    Method,
    failed,
    passed,
    seeded_settings,
    undecided,
)
from theorycheck.losses import (
    LOSSES,
    TOKEN_RULES,
)
from theorycheck.symbolic import Frozen, log_softmax, logit_gradient, unfreeze

from ._common import (
    analytic_coefficient,
    autodiff_coefficient,
    symbolic_coefficient,
    three_token,
)

# --- weight form ----------------------------------------------------------------------


def weight_symbolic(*, quick: bool = False, weight=None) -> object:
    """sympy, V = 3, symbolic logits: grad(-sg(w) A log pi_k) = grad(-r A) for w = r."""
    z = sp.symbols("z0:3", real=True)
    q, a = sp.Symbol("q", positive=True), sp.Symbol("A", real=True)
    logp = log_softmax(z)[0]
    r = sp.exp(logp) / q
    w = r if weight is None else weight(r)
    weighted = -Frozen(w) * a * logp
    plain = -r * a
    gaps = [
        sp.simplify(x - y)
        for x, y in zip(logit_gradient(weighted, z), logit_gradient(plain, z))
    ]
    if any(g != 0 for g in gaps):
        pt = {z[0]: 0, z[1]: 0, z[2]: 0, q: sp.Rational(1, 2), a: 1}
        vals = [sp.nsimplify(sp.simplify(g.subs(pt))) for g in gaps]
        if any(v != 0 for v in vals):
            return failed(
                f"gradients differ by {vals} (exact) at z = 0, q = 1/2, A = 1",
                {
                    "logits": [0, 0, 0],
                    "q": "1/2",
                    "adv": 1,
                    "gap": [str(v) for v in vals],
                },
            )
        return undecided(f"gaps not simplified: {gaps}")
    value_gap = sp.simplify(unfreeze(weighted) - plain)
    return passed(
        "grad_z[-sg(r) A log pi_k] - grad_z[-r A] simplifies to 0 for all z, q, A; the "
        f"values differ by {value_gap} (the loss value is not r A)"
    )


def weight_property(
    *, quick: bool = False, rules=("cispo", "glm5"), bounds=None
) -> object:
    """hypothesis: registry weight-form rules with w = r (bounds wide open) have the
    float64 autodiff gradient of is_pg."""
    from hypothesis import given
    from hypothesis import strategies as st

    from theorycheck.testing import logits, simplex

    bad = []
    wide = bounds or {"low": 1e-30, "high": 1e30}  # w = r: the window never binds

    @seeded_settings(15 if quick else 100)
    @given(
        z=logits(4, max_abs=6.0),
        mu=simplex(4, min_prob=1e-3),
        adv=st.floats(-3.0, 3.0),
        k=st.integers(0, 3),
        name=st.sampled_from(rules),
    )
    def prop(z, mu, adv, k, name):
        zz = jnp.asarray(z, jnp.float64)
        mlog = jnp.log(jnp.asarray(mu, jnp.float64))
        g_w = jax.grad(
            lambda x: LOSSES[name].loss(x, k, adv=adv, behavior_logp=mlog, **wide)
        )(zz)
        g_r = jax.grad(
            lambda x: LOSSES["is_pg"].loss(x, k, adv=adv, behavior_logp=mlog)
        )(zz)
        g_w, g_r = np.asarray(g_w), np.asarray(g_r)
        err = float(np.max(np.abs(g_w - g_r)))
        if err > 1e-12 * (1 + float(np.max(np.abs(g_r)))):
            bad.append(
                {
                    "rule": name,
                    "logits": z.tolist(),
                    "mu": mu.tolist(),
                    "adv": adv,
                    "sampled": k,
                    "err": err,
                }
            )
            raise AssertionError

    try:
        prop()
    except AssertionError:
        return failed(f"gradients differ: {bad[-1]}", bad[-1])
    n = 15 if quick else 100
    return passed(
        f"{n} hypothesis cases (V=4): cispo/glm5 with w = r match is_pg's gradient to "
        f"1e-12"
    )


WEIGHT_FORM_SAME_GRADIENT = Claim(
    id="survey.weight_form_same_gradient",
    source="seed 000 (survey), 'Weight form' and 'Reductions' (special cases)",
    provenance="PAPER",
    quote=(
        "\"with w = r, the weight form reproduces r A's gradient (the loss value "
        "differs)\" (the survey's special cases, as the research notes §4 transcribe "
        "them)."
    ),
    location="'Weight form'; 'Reductions' (special cases)",
    kind=Kind.REMARK,
    assumptions=("w = r held fixed (stop-gradient)",),
    statement=(
        "The weight form j = sg(w) A log p with w = r has the gradient of j = r A "
        "(c = A r); the loss value differs."
    ),
    checks=(
        Check("sympy gradient identity, V=3", Method.SYMBOLIC, weight_symbolic),
        Check(
            "hypothesis: registry weight rules vs is_pg",
            Method.PROPERTY,
            weight_property,
        ),
    ),
)


# --- all rules agree on-policy --------------------------------------------------------


def _extra(name, length=1):
    return {"other_log_ratio": 0.0, "length": length} if name == "gspo" else {}


def on_policy_numeric(*, quick: bool = False, rules=TOKEN_RULES) -> object:
    """float64: analytic coefficient and autodiff of every token rule at p = q."""
    worst, rows = 0.0, {}
    for name in rules:
        for p in (0.3,) if quick else (0.05, 0.3, 0.7, 0.97):
            for adv in (-2.0, 0.5) if quick else (-2.0, -0.5, 0.5, 2.0):
                for length in (1, 3) if name == "gspo" else (1,):
                    c_an, gated = analytic_coefficient(
                        name, p, p, adv, on_policy=True, **_extra(name, length)
                    )
                    c_an *= length  # GSPO: c_t = A s / L per position
                    pol = three_token(p)
                    kw = (
                        {"length": length, "other_log_ratio": 0.0}
                        if name == "gspo"
                        else {}
                    )
                    c_ad, _ = autodiff_coefficient(
                        name, pol, pol, adv, jit=not quick, **kw
                    )
                    c_ad *= length
                    err = max(abs(c_an - adv), abs(c_ad - adv))
                    worst = max(worst, err)
                    if err > 1e-12 * abs(adv) or gated:
                        return failed(
                            f"{name} at p = q = {p}, A = {adv}: c = {c_an} (analytic), "
                            f"{c_ad} (autodiff), gated {gated}",
                            {
                                "rule": name,
                                "p": p,
                                "q": p,
                                "adv": adv,
                                "c_analytic": c_an,
                                "c_autodiff": c_ad,
                            },
                        )
            rows[name] = "ok"
    return passed(
        f"{len(rows)} registry token rules: |c - A| <= {worst:.1g} at p = q (analytic "
        f"and "
        "autodiff; GSPO's per-position c_t times L)",
        rules=sorted(rows),
    )


def on_policy_symbolic(*, quick: bool = False, rules=TOKEN_RULES) -> object:
    """Exact: every rule's SymPy spec at p = q gives c = A."""
    adv = sp.Rational(3, 2)
    pts = (sp.Rational(1, 2),) if quick else (sp.Rational(1, 2), sp.Rational(1, 10))
    for name in rules:
        for p in pts:
            pol = three_token(p)
            extra = {"other_log_ratio": 0, "length": 3} if name == "gspo" else {}
            if name == "gspo_token":
                extra = {"seq_log_ratio": 0}
            c, _ = symbolic_coefficient(name, pol, pol, adv, **extra)
            if name == "gspo":
                c = 3 * c
            if sp.simplify(c - adv) != 0:
                return failed(
                    f"{name} at p = q = {p}: exact c = {c}, not A = {adv}",
                    {"rule": name, "p": str(p), "adv": str(adv), "c": str(c)},
                )
    return passed(
        f"{len(rules)} rules, exact c = A = 3/2 at p = q = {', '.join(map(str, pts))}"
    )


ALL_RULES_AGREE_ON_POLICY = Claim(
    id="survey.all_rules_agree_on_policy",
    source="seed 000 (survey), 'Reductions' in the sense of special cases",
    provenance="PAPER",
    quote=(
        '"at p = q all six rules give c = A" (the survey\'s special cases, research '
        "notes §4)."
    ),
    location="'Reductions' (special cases)",
    kind=Kind.REMARK,
    assumptions=(
        "p = q (on-policy)",
        "GSPO compared per unit length",
    ),
    statement=(
        "At p = q every rule gives c = A: checked for every registered token rule "
        "(GSPO's sequence rule per unit length: L c_t = A, since its c_t = A s / L)."
    ),
    checks=(
        Check(
            "float64 coefficient + autodiff, registry",
            Method.NUMERIC,
            on_policy_numeric,
        ),
        Check("exact SymPy specs, registry", Method.SYMBOLIC, on_policy_symbolic),
    ),
)

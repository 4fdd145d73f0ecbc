r"""LCO §4.3 (seed 004): gradient-norm bounds (Prop. 4.7) and what they assume about
σ_max of ∂z/∂θ (review major 5).

The paper's text is NOT FOUND; the bounds are DERIVED (docs/papers.md §2.5: chain rule
with
σ_max, INFERRED form).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import sympy as sp

from theorycheck.claims import (
    Check,
    Claim,
    Correction,
    Kind,
    Method,
    failed,
    passed,
    seeded_settings,
    undecided,
)
from theorycheck.losses import LOSSES

from ._common import PAPER_FORMS, linear_loss

# --- Prop. 4.7 ------------------------------------------------------------------------


def _bilinear_case():
    """LCO-MSE (registry spec, V = 2, sparse A = 4, beta = 2) on z = (t1 t2, 0)."""
    t1, t2 = sp.symbols("theta1 theta2", real=True)
    z = sp.symbols("z0:2", real=True)
    expr = LOSSES["lco_mse"].symbolic(list(z), 0, adv=4, old_logits=[0, 0], beta=2)
    from theorycheck.symbolic import unfreeze

    loss = unfreeze(expr).subs({z[0]: t1 * t2, z[1]: 0})
    grad = [sp.diff(loss, t) for t in (t1, t2)]
    return loss, grad, (t1, t2)


def norm_symbolic(*, quick: bool = False) -> object:
    """sympy, exact: the loss falls 4x while the gradient norm grows (sigma_max "
    "grows)."""
    loss, grad, (t1, t2) = _bilinear_case()
    a = {t1: 1, t2: 1}
    b = {t1: sp.Rational(1, 10), t2: 15}
    la, lb = loss.subs(a), loss.subs(b)
    ga = sp.sqrt(sum(g.subs(a) ** 2 for g in grad))
    gb = sp.sqrt(sum(g.subs(b) ** 2 for g in grad))
    if lb < la and gb > ga:
        return failed(
            f"L = {la} -> {lb} (smaller) but ||grad_theta L|| = {ga} -> {gb} (larger, "
            f"{float(gb / ga):.2f}x): sigma_max(dz/dtheta) = ||(t2, t1)|| grows 1.41 "
            f"-> "
            "15.0 (exact, z = (theta1 theta2, 0))",
            {
                "theta_a": [1, 1],
                "theta_b": ["1/10", 15],
                "loss": [str(la), str(lb)],
                "grad_norm": [str(ga), str(gb)],
            },
        )
    return passed("the gradient norm did not grow while the loss fell")


def norm_simulation(*, quick: bool = False) -> object:
    """float64 gradient descent on the registry lco_mse with z = (t1 t2, 0) from a
    small initialisation: the loss falls while the gradient norm rises."""
    f0 = LOSSES["lco_mse"].loss

    def f(theta):
        z = jnp.stack([theta[0] * theta[1], jnp.zeros((), theta.dtype)])
        return f0(z, 0, adv=4.0, old_logits=jnp.zeros(2), beta=2.0)

    step = jax.jit(jax.value_and_grad(f))
    theta = jnp.asarray([0.01, 0.02], jnp.float64)
    hist = []
    for _ in range(300):
        val, g = step(theta)
        hist.append((float(val), float(jnp.linalg.norm(g))))
        theta = theta - 0.5 * g
    losses = np.array([h[0] for h in hist])
    norms = np.array([h[1] for h in hist])
    k_max = int(np.argmax(norms))
    if np.all(np.diff(losses[: k_max + 1]) <= 0) and norms[k_max] > 10 * norms[0]:
        return failed(
            f"GD (eta 0.5): loss {losses[0]:.4g} -> {losses[k_max]:.4g} decreasing "
            f"while ||grad|| {norms[0]:.3g} -> {norms[k_max]:.3g} over {k_max} steps",
            {
                "steps": k_max,
                "loss": [losses[0], losses[k_max]],
                "grad_norm": [norms[0], norms[k_max]],
            },
        )
    return passed("the gradient norm never grew while the loss fell")


def _g(name, loss, vocab):
    """The derived bound on ||grad_z L|| as a function of the loss value."""
    if name == "lco_mse":
        return np.sqrt(2 * loss / vocab)
    if name == "lco_lch":
        return min(np.sqrt(2 * loss / vocab), 1 / np.sqrt(vocab))
    return np.sqrt(2 * loss)  # Pinsker: ||pi - pi*||_2 <= ||.||_1 <= sqrt(2 KL)


def bound_property(*, quick: bool = False, g=_g) -> object:
    """hypothesis: ||grad_theta L|| <= sigma_max(J) g(L) for the three LCO losses."""
    from hypothesis import given
    from hypothesis import strategies as st

    bad = []

    @seeded_settings(20 if quick else 120)
    @given(
        seed=st.integers(0, 2**31 - 1),
        name=st.sampled_from(PAPER_FORMS),
        scale=st.floats(0.01, 10.0),
    )
    def prop(seed, name, scale):
        rng = np.random.default_rng(seed)
        vocab, dim = 5, int(rng.integers(2, 9))
        jac = rng.normal(size=(vocab, dim)) * rng.uniform(0.1, 3.0)
        z0, adv = rng.normal(size=vocab), scale * rng.normal(size=vocab)
        f = linear_loss(name, adv, z0, jac)
        theta = rng.normal(scale=scale, size=dim)
        val, grad = jax.value_and_grad(f)(jnp.asarray(theta))
        lhs = float(np.linalg.norm(np.asarray(grad)))
        rhs = float(np.linalg.norm(jac, 2)) * g(name, float(val), vocab)
        if lhs > rhs * (1 + 1e-9) + 1e-12:
            bad.append({"loss": name, "seed": seed, "grad_norm": lhs, "bound": rhs})
            raise AssertionError

    try:
        prop()
    except AssertionError:
        return failed(f"||grad|| above the bound: {bad[-1]}", bad[-1])
    n = 20 if quick else 120
    return passed(
        f"{n} hypothesis instances: ||grad_theta L|| <= sigma_max(J) g(L) with "
        "g = sqrt(2L/V) (MSE), min(sqrt(2L/V), 1/sqrt V) (LCH), sqrt(2L) (KLD)",
        examples=n,
    )


def bound_symbolic(*, quick: bool = False) -> object:
    """sympy: ||grad_z L_MSE||^2 = 2L/V; LCH gradient tanh(d)/V, tanh^2 <= 2 logcosh;
    KLD gradient pi - pi*."""
    from theorycheck.symbolic import logit_gradient, to_probability, unfreeze

    z = sp.symbols("z0:3", real=True)
    inputs = {"adv": [1, -2, sp.Rational(1, 2)], "old_logits": [0, 1, -1], "beta": 2}
    mse = LOSSES["lco_mse"].symbolic(list(z), 0, **inputs)
    g = logit_gradient(mse, z)
    ok_mse = sp.simplify(sum(x**2 for x in g) - 2 * unfreeze(mse) / 3) == 0
    lch = LOSSES["lco_lch"].symbolic(list(z), 0, **inputs)
    target = [
        sp.Integer(o) + sp.Rational(a) / 2
        for o, a in zip(inputs["old_logits"], inputs["adv"])
    ]
    g = logit_gradient(lch, z)
    ok_lch = all(
        sp.simplify((gi - sp.tanh(zi - ti) / 3).rewrite(sp.exp)) == 0
        for gi, zi, ti in zip(g, z, target)
    )
    y = sp.Symbol("y", positive=True)  # y = cosh^2 >= 1: 1 - 1/y <= log y
    h = sp.log(y) - 1 + 1 / y
    ok_log = sp.simplify(sp.diff(h, y) - (y - 1) / y**2) == 0 and h.subs(y, 1) == 0
    kld = LOSSES["lco_kld"].symbolic(list(z), 0, **inputs)
    gk = to_probability(sp.Matrix(logit_gradient(kld, z)), z)
    e = [sp.exp(t) for t in target]
    star = [x / sp.Add(*e) for x in e]
    ok_kld = all(
        sp.simplify(gk.expr[i] - (gk.variables[i] - star[i])) == 0 for i in range(3)
    )
    flags = {"mse": ok_mse, "lch": ok_lch, "log": ok_log, "kld": ok_kld}
    if not all(flags.values()):
        return undecided(f"identities not closed: {flags}")
    return passed(
        "registry specs (V=3): ||grad L_MSE||^2 = 2L/V; grad L_LCH = tanh(z - z*)/V "
        "and tanh^2 = 1 - 1/y <= log y = 2 logcosh (y = cosh^2 >= 1, h(1) = 0, h' >= "
        "0); grad L_KLD = pi - pi*; ||J^T g|| <= sigma_max ||g|| (operator norm)"
    )


PROP4_7_NORMS_DIMINISH_WITHOUT_SIGMA_BOUND = Claim(
    id="lco.prop4_7_norms_diminish_without_sigma_bound",
    # the bounds themselves hold (the correction); what fails is the inference that
    # the norms diminish with no assumption on sigma_max
    aliases=("lco.prop4_7_gradient_norm_bounds",),
    source="seed 004 (LCO), Prop. 4.7, Eqs. (16)-(18)",
    provenance="NOT FOUND",
    quote=(
        'NOT FOUND (Prop. 4.7 / Eqs. 16-18). The review (major 5): "The bounds in Eqs.'
        " (16)-(18) are upper bounds involving sigma_max ... The statement that "
        "gradient norms 'scale with remaining error and diminish progressively' "
        'therefore requires an additional assumption that sigma_max remains bounded."'
    ),
    location="§4.3, Prop. 4.7, Eqs. (16)-(18)",
    kind=Kind.PROPOSITION,
    assumptions=(
        "the bounds carry sigma_max of dz/dtheta (research notes §2.5, INFERRED)",
        "no bound on sigma_max assumed",
    ),
    statement=(
        "Prop. 4.7 as used in §4.3: the LCO losses' parameter-gradient norms are "
        "bounded by functions of the loss that vanish with it, so gradient norms "
        "diminish as the loss decreases (no spikes), with no assumption on "
        "sigma_max(dz/dtheta)."
    ),
    objection=(
        "major 5: the bounds carry sigma_max of dz/dtheta; if it grows, the bound "
        "grows while the loss falls"
    ),
    checks=(
        Check("sympy, exact two-point counterexample", Method.SYMBOLIC, norm_symbolic),
        Check("gradient descent from a small init", Method.SIMULATION, norm_simulation),
    ),
    correction=Correction(
        statement=(
            "||grad_theta L|| <= sigma_max(dz/dtheta) g(L) with g_MSE = sqrt(2L/V) "
            "(equality in z), g_LCH = min(sqrt(2L/V), 1/sqrt V), g_KLD = sqrt(2L) "
            "(Pinsker); gradient norms diminish with the loss only while sigma_max "
            "stays bounded along training."
        ),
        checks=(
            Check(
                "sympy identities of the registry specs",
                Method.SYMBOLIC,
                bound_symbolic,
            ),
            Check("hypothesis, random linear models", Method.PROPERTY, bound_property),
        ),
    ),
)

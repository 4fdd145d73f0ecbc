r"""LCO §4.3 (seed 004): gradient directionality (Prop. 4.4) under Assumption 4.2
taken exactly, :math:`z(\theta) = z_0 + J\theta`, and the review's ε-slack (major 3).

The paper's text is NOT FOUND; the statement is the seed review's reading.
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
from theorycheck.formal import prove

from ._common import PAPER_FORMS, linear_loss, linear_value_and_grad

# --- Prop. 4.4 ------------------------------------------------------------------------


def directionality_z3(*, quick: bool = False, slack: bool = False) -> object:
    r"""z3, LCO-MSE at V = 2 with J = I: L(z*) - L* < eps => <grad L(z), z - z*> >= 0
    (``slack``: >= L(z) - L(z*), the convexity inequality)."""
    z = sp.symbols("z0:2", real=True)
    s = sp.symbols("s0:2", real=True)  # z_theta*
    t = sp.symbols("t0:2", real=True)  # the target z_old + A/beta
    eps = sp.Symbol("eps", real=True)
    loss = lambda x: sum((xi - ti) ** 2 for xi, ti in zip(x, t)) / 4  # noqa: E731
    grad = [(zi - ti) / 2 for zi, ti in zip(z, t)]
    inner = sum(g * (zi - si) for g, zi, si in zip(grad, z, s))
    goal = inner >= (loss(z) - loss(s) if slack else 0)
    near = [eps > 0, eps <= sp.Rational(1, 100), loss(s) < eps]  # theta* near-optimal
    res = prove(goal, [*z, *s, *t, eps], assumptions=near)
    if res.status == "refuted":
        cex = {k: str(v) for k, v in res.counterexample.items()}
        return failed(
            "z3 refuted <grad_theta L, theta - theta*> >= 0 for a near-optimal theta* "
            "(re-checked exactly; J = I so theta = z)",
            cex,
        )
    if res.status == "proved":
        what = ">= L(z) - L(z*) (hence > -eps)" if slack else ">= 0"
        return passed(f"z3 proved <grad L(z), z - z*> {what} for LCO-MSE, V = 2")
    return undecided(f"z3: {res.detail}")


def directionality_numeric(*, quick: bool = False) -> object:
    """float64: theta between the optimum and a near-optimal theta* (registry "
    "losses)."""
    rng = np.random.default_rng(0)
    found = {}
    for name in PAPER_FORMS:
        vocab, dim = 5, 7
        jac = rng.normal(size=(vocab, dim))
        z0 = rng.normal(size=vocab)
        adv = rng.normal(size=vocab)
        f = linear_loss(name, adv, z0, jac)
        # theta_opt reaches the target z0 + A/beta exactly (J has full row rank).
        opt = np.linalg.lstsq(jac, adv / 2.0, rcond=None)[0]
        w = rng.normal(size=dim)
        star = opt + 0.3 * w / np.linalg.norm(jac @ w)
        theta = opt + 0.5 * (star - opt)
        grad = np.asarray(jax.grad(f)(jnp.asarray(theta)))
        inner = float(grad @ (theta - star))
        l_star, l_opt = float(f(jnp.asarray(star))), float(f(jnp.asarray(opt)))
        if inner < 0:
            found[name] = {
                "theta": theta.tolist(),
                "theta_star": star.tolist(),
                "inner": inner,
                "eps_gap": l_star - l_opt,
            }
    if found:
        return failed(
            "negative <grad_theta L, theta - theta*> with theta* near-optimal: "
            + ", ".join(
                f"{k} {v['inner']:.3g} (L(theta*) - L* = {v['eps_gap']:.3g})"
                for k, v in found.items()
            ),
            found,
        )
    return passed("the inner product was non-negative at every probe")


def directionality_property(*, quick: bool = False, slack: float = 1.0) -> object:
    r"""hypothesis: <grad_theta L, theta - theta*> >= L(theta) - L(theta*) for the
    three LCO losses on random linear models (``slack`` scales the right side)."""
    from hypothesis import given
    from hypothesis import strategies as st

    bad = []

    @seeded_settings(15 if quick else 80)
    @given(
        seed=st.integers(0, 2**31 - 1),
        name=st.sampled_from(PAPER_FORMS),
        scale=st.floats(0.1, 5.0),
    )
    def prop(seed, name, scale):
        rng = np.random.default_rng(seed)
        vocab, dim = 4, 6
        jac = rng.normal(size=(vocab, dim))
        z0, adv = rng.normal(size=vocab), scale * rng.normal(size=vocab)
        vg = linear_value_and_grad(name)  # L(z0 + J theta), compiled once per rule
        theta, star = rng.normal(scale=scale, size=(2, dim))
        model = [jnp.asarray(x) for x in (adv, z0, jac)]
        value, g = vg(jnp.asarray(theta), *model)
        gap = float(value - vg(jnp.asarray(star), *model)[0])
        inner = float(np.asarray(g) @ (theta - star))
        if inner < slack * gap - 1e-9 * (1 + abs(gap)):
            bad.append({"loss": name, "seed": seed, "inner": inner, "gap": gap})
            raise AssertionError

    try:
        prop()
    except AssertionError:
        return failed(f"inner < L(theta) - L(theta*): {bad[-1]}", bad[-1])
    n = 15 if quick else 80
    return passed(
        f"{n} hypothesis instances (V=4, d=6, 3 losses): <grad, theta - theta*> >= "
        "L(theta) - L(theta*), so >= -eps when L(theta*) - L* < eps",
        examples=n,
    )


PROP4_4_GRADIENT_DIRECTIONALITY = Claim(
    id="lco.prop4_4_gradient_directionality",
    source="seed 004 (LCO), Prop. 4.4, Eq. (15), Assumption 4.2",
    provenance="NOT FOUND",
    quote=(
        'NOT FOUND (Prop. 4.4 / Eq. 15). The review: "via a local first-order Taylor '
        "expansion of logits in the parameters, logits convexity transfers to a non-"
        "negative inner product between the parameter-space gradient and the "
        'displacement toward near-optimal parameters"; "The authors define Theta* = '
        '{theta* : L(z_theta*) - L* < eps}, i.e., theta* is only near-optimal" (major '
        "3)."
    ),
    location="§4.3, Prop. 4.4, Eq. (15)",
    kind=Kind.PROPOSITION,
    assumptions=(
        "Assumption 4.2 holds exactly (z = z0 + J theta)",
        "a logits-convex loss",
        "theta* in Theta* = {L(z_theta*) - L* < eps}",
    ),
    statement=(
        "Prop. 4.4: for a logits-convex loss and theta* in Theta* = {L(z_theta*) - L* "
        "< eps}, under Assumption 4.2 <grad_theta L(z_theta), theta - theta*> >= 0."
    ),
    objection=(
        "major 3: convexity only gives <grad_z L, z - z*> >= L(z) - L(z*) >= -eps; >= "
        "0 needs z* to be an exact minimiser"
    ),
    checks=(
        Check("z3, LCO-MSE, V=2", Method.Z3, directionality_z3),
        Check(
            "float64, theta between optimum and theta*",
            Method.NUMERIC,
            directionality_numeric,
        ),
    ),
    correction=Correction(
        statement=(
            "Under an exact linearisation, <grad_theta L, theta - theta*> >= "
            "L(z_theta) - L(z_theta*) > -eps (the eps-slack); it is >= 0 when theta* "
            "is an exact minimiser or whenever L(z_theta) >= L(z_theta*)."
        ),
        checks=(
            Check(
                "z3, LCO-MSE, V=2, with the slack",
                Method.Z3,
                lambda quick=False: directionality_z3(quick=quick, slack=True),
            ),
            Check(
                "hypothesis, three LCO losses", Method.PROPERTY, directionality_property
            ),
        ),
    ),
)

"""Shared helpers of the LCO claims (no claims here; the harness skips ``_`` files).

Results, the float64 autodiff Hessian of a registry loss, its second-difference
re-check, probability-coordinate Hessians of a registry spec, and z3 PSD claims on
the simplex.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import sympy as sp

from theorycheck.claims import require_float64
from theorycheck.formal import prove
from theorycheck.losses import LOSSES
from theorycheck.symbolic import logit_hessian, to_probability

#: negative curvature below -TOL (relative to the Hessian's scale) is a real one;
#: float64 eigenvalues of a 10x10 matrix are accurate to ~1e-15 of its norm.
TOL = 1e-10


@functools.cache
def _jitted(name: str, sign: float):
    spec = LOSSES[name]

    def f(z, k, inputs):
        return sign * spec.loss(z, k, **inputs)

    return jax.jit(f), jax.jit(jax.hessian(f)), jax.jit(jax.grad(f))


def registry_fn(name: str, sampled: int = 0, sign: float = 1.0, **inputs) -> Callable:
    """A jit-compiled ``z -> sign * LOSSES[name].loss(z, sampled, **inputs)`` whose
    ``.hessian(z)`` / ``.gradient(z)`` are jit-compiled autodiff (compiled once per
    rule and input shapes)."""
    require_float64()
    value, hess, grad = _jitted(name, float(sign))
    args = (jnp.asarray(sampled), _tree(inputs))

    def f(z):
        return value(jnp.asarray(z, jnp.float64), *args)

    def hessian(z):
        return np.asarray(hess(jnp.asarray(z, jnp.float64), *args), np.float64)

    def gradient(z):
        return np.asarray(grad(jnp.asarray(z, jnp.float64), *args), np.float64)

    f.hessian = hessian
    f.gradient = gradient
    return f


def _tree(inputs):
    return {
        k: jnp.asarray(v, jnp.float64)
        if isinstance(v, (list, tuple, np.ndarray))
        else v
        for k, v in inputs.items()
    }


def autodiff_hessian(fn: Callable, logits) -> np.ndarray:
    """float64 ``jax.hessian`` of a scalar function of the logits."""
    require_float64()
    if hasattr(fn, "hessian"):
        return fn.hessian(logits)
    h = jax.hessian(fn)(jnp.asarray(logits, jnp.float64))
    return np.asarray(h, dtype=np.float64)


def second_difference(fn: Callable, logits, direction, step: float = 1e-4) -> float:
    r"""Central second difference :math:`(f(z+hu) - 2f(z) + f(z-hu))/h^2`, float64.

    ``stop_gradient`` values are recomputed at each point, so it is used only where
    the frozen quantities do not depend on z (PPO's behavior, LCO's old logits).
    """
    require_float64()
    z = np.asarray(logits, np.float64)
    u = np.asarray(direction, np.float64)
    f = [float(fn(jnp.asarray(z + s * step * u, jnp.float64))) for s in (1, 0, -1)]
    return (f[0] - 2.0 * f[1] + f[2]) / step**2


def min_curvature(fn: Callable, logits) -> tuple[float, np.ndarray]:
    """Smallest eigenvalue of the autodiff Hessian and its eigenvector."""
    w, vecs = np.linalg.eigh(autodiff_hessian(fn, logits))
    return float(w[0]), vecs[:, 0]


def probability_hessian(expr: sp.Expr, z: Sequence[sp.Symbol]):
    """The logit Hessian of ``expr`` in probability coordinates ``p``."""
    form = to_probability(logit_hessian(expr, z), z)
    if not form.shift_invariant or form.transcendental:
        raise ValueError("the Hessian is not a rational function of p")
    return form.expr, form.variables


def simplex(p: Sequence[sp.Symbol]) -> list[sp.Basic]:
    return [*(pi > 0 for pi in p), sp.Add(*p) - 1 <= 0, sp.Add(*p) - 1 >= 0]


def z3_psd(
    hessian: sp.Matrix,
    p: Sequence[sp.Symbol],
    *,
    extra: Sequence[sp.Symbol] = (),
    assumptions: Sequence[sp.Basic] = (),
    timeout_ms: int = 20_000,
):
    r"""z3 on :math:`\forall p\in\Delta, u:\ u^\top H(p) u \ge 0` (plus assumptions)."""
    # z3 needs plain real symbols: ``p > 0`` on a positive symbol is already True.
    real = {s: sp.Symbol(s.name, real=True) for s in [*p, *extra]}
    u = sp.symbols(f"u0:{len(p)}", real=True)
    uv = sp.Matrix(u)
    quad = sp.expand((uv.T * hessian.xreplace(real) * uv)[0, 0])
    return prove(
        quad >= 0,
        [*real.values(), *u],
        assumptions=[
            *simplex([real[s] for s in p]),
            *(sp.sympify(a).xreplace(real) for a in assumptions),
        ],
        timeout_ms=timeout_ms,
    )


def rational_point(vocab: int, seed: int) -> list[sp.Rational]:
    """A rational point of the open simplex."""
    rng = np.random.default_rng(seed)
    w = [int(x) for x in rng.integers(1, 9, size=vocab)]
    return [sp.Rational(x, sum(w)) for x in w]


def variance_gap(hessian: sp.Matrix, p: Sequence[sp.Symbol]) -> sp.Expr:
    r""":math:`u^\top H u - \sum_i p_i(u_i - \bar u)^2`, :math:`\bar u = \sum p_i u_i`,
    on :math:`\sum p = 1` (the last p eliminated); zero iff H = diag(p) - pp^T."""
    u = sp.symbols(f"u0:{len(p)}", real=True)
    ubar = sum(pi * ui for pi, ui in zip(p, u))
    quad = (sp.Matrix(u).T * hessian * sp.Matrix(u))[0, 0]
    gap = quad - sum(pi * (ui - ubar) ** 2 for pi, ui in zip(p, u))
    return sp.expand(gap.subs(p[-1], 1 - sp.Add(*p[:-1])))


PAPER_FORMS = ("lco_mse", "lco_lch", "lco_kld")


def linear_loss(name, adv, z0, jac, beta=2.0):
    """theta -> L(z0 + J theta) for a registry LCO loss (target at theta = 0)."""
    spec = LOSSES[name]

    def f(theta):
        z = jnp.asarray(z0) + jnp.asarray(jac) @ theta
        return spec.loss(
            z, 0, adv=jnp.asarray(adv), old_logits=jnp.asarray(z0), beta=beta
        )

    return f


@functools.cache
def linear_value_and_grad(name, beta=2.0):
    """The same loss as :func:`linear_loss`, jitted once per rule: (theta, adv, z0,
    J) -> (L(z0 + J theta), grad_theta L), for property runs that draw many models of
    one shape."""
    spec = LOSSES[name]

    def f(theta, adv, z0, jac):
        return spec.loss(z0 + jac @ theta, 0, adv=adv, old_logits=z0, beta=beta)

    return jax.jit(jax.value_and_grad(f))

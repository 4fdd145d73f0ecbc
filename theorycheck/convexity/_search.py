r"""Numeric stage (JAX, float64): adversarial search for negative logit curvature.

Pluggable: :func:`search` is the default step. It samples logits in several regimes
(moderate, peaked, and near the simplex boundary where some probabilities are 1e-6 and
logits reach ±30), computes :math:`\lambda_{\min}` of the logit Hessian (dense and
vmapped
for small V), then descends the Rayleigh quotient :math:`u^\top H(z) u` over the logits
from the most negative starts. A hit is re-checked by a second route: the curvature
:math:`u^\top H u` from central finite differences of the autodiff gradient.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["SearchOutcome", "search", "curvature_fd"]


@dataclasses.dataclass(frozen=True)
class SearchOutcome:
    """Result of a search at one V.

    Attributes:
        found: a verified negative curvature.
        num_samples: number of logit vectors evaluated.
        logits, direction, curvature: the counterexample (float64) when ``found``.
        curvature_fd: the same curvature by finite differences (second route).
    """

    found: bool
    num_samples: int
    logits: np.ndarray | None = None
    direction: np.ndarray | None = None
    curvature: float | None = None
    curvature_fd: float | None = None


def _bind(loss, sampled, inputs):
    return lambda z: loss(z, sampled, **inputs)


def curvature_fd(loss, logits, sampled, inputs, direction, step=1e-4) -> float:
    """``uᵀ H u`` by central differences of the autodiff gradient along ``u``
    (float64)."""
    with jax.enable_x64(True):
        f = _bind(loss, sampled, inputs)
        z = jnp.asarray(logits, jnp.float64)
        u = jnp.asarray(direction, jnp.float64)
        g = jax.jit(jax.vmap(jax.grad(f)))
        both = g(jnp.stack([z + step * u, z - step * u]))
        return float(jnp.dot(u, both[0] - both[1]) / (2 * step))


def _starts(seed, vocab, sampled, num):
    rng = np.random.default_rng(seed)
    n = num // 4
    moderate = 3.0 * rng.standard_normal((n, vocab))
    peaked = 8.0 * rng.standard_normal((n, vocab))
    # Near the boundary: logits up to +-30, so some probabilities are 1e-6 .. 1e-26.
    boundary = rng.uniform(-30.0, 30.0, (n, vocab))
    sweep = rng.standard_normal((num - 3 * n, vocab))
    sweep[:, sampled] = np.linspace(-30.0, 30.0, num - 3 * n)
    return np.concatenate([moderate, peaked, boundary, sweep])


def search(
    loss,
    vocab: int,
    sampled: int,
    inputs,
    *,
    seed: int = 0,
    num_starts: int = 512,
    refine_steps: int = 40,
    tol: float = 1e-9,
) -> SearchOutcome:
    """Searches logits at ``V = vocab`` for a direction of negative curvature.

    Args:
        loss: ``loss(logits, sampled, **inputs)``.
        vocab: ``V`` (dense Hessians: keep it small, e.g. ≤ 64).
        sampled: ``k``.
        inputs: numeric inputs.
        seed: seed of the start sampler.
        num_starts: sampled logit vectors.
        refine_steps: Rayleigh-quotient descent steps from the 8 best starts.
        tol: a curvature counts only below ``-tol * max(1, ||H||)``, and only if the
            finite-difference route agrees in sign.

    Returns:
        A :class:`SearchOutcome`.
    """
    with jax.enable_x64(True):
        f = _bind(loss, sampled, inputs)
        hess = jax.jit(jax.vmap(jax.hessian(f)))
        zs = jnp.asarray(_starts(seed, vocab, sampled, num_starts), jnp.float64)
        hs = np.asarray(hess(zs))
        finite = np.all(np.isfinite(hs), axis=(1, 2))
        vals, vecs = np.linalg.eigh(np.where(finite[:, None, None], hs, 0.0))
        lam = np.where(finite, vals[:, 0], np.inf)
        order = np.argsort(lam)[:8]
        zs = np.asarray(zs)

        def rayleigh(z, u):
            return jnp.dot(u, jax.jvp(jax.grad(f), (z,), (u,))[1])

        def step(carry, _):
            z, u, best_val, best_z, best_u = carry
            g = jax.grad(rayleigh)(z, u)
            z = jnp.clip(z - 0.5 * g / (jnp.linalg.norm(g) + 1e-30), -40.0, 40.0)
            w, s = jnp.linalg.eigh(jax.hessian(f)(z))
            ok = jnp.isfinite(w[0]) & (w[0] < best_val)
            u = jnp.where(jnp.all(jnp.isfinite(s[:, 0])), s[:, 0], u)
            return (
                z,
                u,
                jnp.where(ok, w[0], best_val),
                jnp.where(ok, z, best_z),
                jnp.where(ok, s[:, 0], best_u),
            ), None

        @jax.jit
        @jax.vmap
        def refine(z, u, val):
            out, _ = jax.lax.scan(step, (z, u, val, z, u), None, length=refine_steps)
            return out[2], out[3], out[4]

        vals_r, zs_r, us_r = (
            np.asarray(t) for t in refine(zs[order], vecs[order, :, 0], lam[order])
        )
        i = int(np.argmin(vals_r))
        h_best = np.asarray(hess(zs_r[None, i]))[0]
        scale = np.max(np.abs(np.linalg.eigvalsh(h_best)))
        best = (float(vals_r[i]), zs_r[i], us_r[i], float(scale))
        count = num_starts + len(order) * refine_steps
    value, z, u, scale = best
    if not np.isfinite(value) or value >= -tol * max(1.0, scale):
        return SearchOutcome(False, count)
    fd = curvature_fd(loss, z, sampled, inputs, u)
    if not fd < 0:
        return SearchOutcome(False, count)
    return SearchOutcome(True, count, z, u, value, fd)

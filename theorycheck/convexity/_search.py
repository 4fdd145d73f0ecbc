r"""Numeric stage (JAX, float64): adversarial search for negative logit curvature.

Pluggable: :func:`search` is the default step. It samples logits in several regimes
(moderate, peaked, and near the simplex boundary where some probabilities are 1e-6 and
logits reach ±30), computes :math:`\lambda_{\min}` of the logit Hessian (dense and
vmapped
for small V), then descends the Rayleigh quotient :math:`u^\top H(z) u` over the logits
from the most negative starts. Above ``V = 64`` (vocabulary scale, up to 151936) it
calls :func:`theorycheck.numeric.search_negative_curvature` (Lanczos on Hessian-vector
products, never a ``V x V`` matrix).

Every hit, and every counterexample of the other stages (:func:`recheck`), is re-checked
in float64 by two routes: a Hessian-vector product (autodiff) and a Richardson second
difference of the loss with its ``stop_gradient`` values frozen at the point
(:func:`theorycheck.numeric.verify_curvature`). Finite differences of the *gradient*
would be wrong for detached weights (CISPO, GLM-5, DPPO): the gradient at
:math:`z + hu` re-evaluates the frozen quantity at the moved point.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np

from theorycheck.numeric import search_negative_curvature, verify_curvature

__all__ = ["DENSE_SEARCH_MAX_VOCAB", "Recheck", "SearchOutcome", "recheck", "search"]

#: Largest V for the dense vmapped search; above it the Lanczos search runs.
DENSE_SEARCH_MAX_VOCAB = 64
#: Vocabulary-scale search: starts per regime (at most) and descent steps per start.
LARGE_MAX_STARTS = 4
LARGE_STEPS = 10


@dataclasses.dataclass(frozen=True)
class SearchOutcome:
    """Result of a search at one V.

    Attributes:
        found: a verified negative curvature.
        num_samples: number of logit vectors evaluated.
        logits, direction, curvature: the counterexample (float64) when ``found``.
        curvature_fd: the same curvature by a frozen second difference (second
            route).
    """

    found: bool
    num_samples: int
    logits: np.ndarray | None = None
    direction: np.ndarray | None = None
    curvature: float | None = None
    curvature_fd: float | None = None


def _bind(loss, sampled, inputs):
    return lambda z: loss(z, sampled, **inputs)


@dataclasses.dataclass(frozen=True)
class Recheck:
    """Float64 re-check of ``uᵀ H u`` at one point (values for ``u`` as given).

    Attributes:
        autodiff: by a Hessian-vector product.
        frozen_fd: by a second difference with ``stop_gradient`` values frozen (None
            when a ``stop_gradient`` sits inside control flow and cannot be frozen).
        confirmed: both negative beyond the finite-difference noise, agreeing to 1%.
    """

    autodiff: float
    frozen_fd: float | None
    confirmed: bool


def recheck(loss, logits, sampled, inputs, direction) -> Recheck:
    """``uᵀ H u`` by autodiff and by the frozen second difference (float64)."""
    u = np.asarray(direction, np.float64)
    norm2 = float(u @ u)
    c_hvp, c_fd, ok = verify_curvature(
        loss, np.asarray(logits, np.float64), sampled, u, inputs=inputs
    )
    return Recheck(c_hvp * norm2, None if c_fd is None else c_fd * norm2, bool(ok))


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
        vocab: ``V``; dense Hessians up to :data:`DENSE_SEARCH_MAX_VOCAB`, above it
            :func:`theorycheck.numeric.search_negative_curvature` (HVPs only).
        sampled: ``k``.
        inputs: numeric inputs.
        seed: seed of the start sampler.
        num_starts: sampled logit vectors (above ``V = 64``: starts per regime,
            capped at :data:`LARGE_MAX_STARTS`).
        refine_steps: Rayleigh-quotient descent steps from the 8 best starts.
        tol: a curvature counts only below ``-tol * max(1, ||H||)``, and only if
            :func:`recheck` confirms it (frozen second difference agrees).

    Returns:
        A :class:`SearchOutcome`; ``found`` only after :func:`recheck` confirms.
    """
    if vocab > DENSE_SEARCH_MAX_VOCAB:
        starts = max(1, min(num_starts, LARGE_MAX_STARTS))
        return _search_large(loss, vocab, sampled, inputs, seed, starts)
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
    check = recheck(loss, z, sampled, inputs, u)
    if not check.confirmed:
        return SearchOutcome(False, count)
    return SearchOutcome(True, count, z, u, check.autodiff, check.frozen_fd)


def _search_large(loss, vocab, sampled, inputs, seed, num_starts) -> SearchOutcome:
    """Vocabulary scale: the Lanczos/HVP search of :mod:`theorycheck.numeric`."""
    res = search_negative_curvature(
        loss,
        vocab,
        sampled,
        inputs=inputs,
        key=jr.key(seed),
        num_starts=num_starts,
        steps=LARGE_STEPS,
    )
    if not res.found:
        return SearchOutcome(False, res.num_samples)
    return SearchOutcome(
        True,
        res.num_samples,
        np.asarray(res.logits),
        np.asarray(res.direction),
        float(res.curvature),
        float(res.curvature_fd),
    )

r"""Adversarial search for negative curvature of a loss in its logits (JAX only).

Minimises the smallest eigenvalue of the logit Hessian over the logits,

.. math::
    \min_z \lambda_{\min}\big(\nabla_z^2 L(z; k)\big), \qquad
    \nabla_z \lambda_{\min} = \nabla_z \big(x^\top \nabla_z^2 L(z; k)\, x\big)\Big|_{x
    \text{ fixed}}

(Hellmann-Feynman: :math:`x` the current unit eigenvector), by normalised gradient steps
from random starts in two regimes:

* ``"interior"``: logits :math:`\sim \mathcal N(0, \sigma^2)`, kept in :math:`[-3, 3]`
  (the first start is :math:`z = 0`: a moderate point in every run);
* ``"boundary"``: logits in :math:`[-30, 30]`, some tokens pushed to the box edges and
  :math:`\log\pi_k - \log(1-\pi_k)` drawn uniformly in :math:`[-30, 10]`, so that
  probabilities of :math:`10^{-6}` to :math:`10^{-13}` occur.

For shift-invariant losses (:math:`H\mathbf 1 = 0`, all softmax losses) the search runs
on the complement of :math:`\mathbf 1`, where :math:`\lambda_{\min}` is informative.

Every hit is re-checked in float64 by two routes before ``found=True``:
:math:`x^\top H x` by a Hessian-vector product, and by a Richardson-extrapolated central
second difference of the loss with its ``stop_gradient`` values frozen
(:mod:`._curvature_frozen`). Both must be negative beyond the finite-difference rounding
noise, and agree to 1%. A search that finds nothing says so with the number of points
examined; it never says "convex".
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
from jaxtyping import Array, Float

from theorycheck._errors import BadInput
from theorycheck.numeric._curvature_frozen import frozen_loss_fn, second_difference
from theorycheck.numeric._hessian import (
    DENSE_MAX_VOCAB,
    bind_loss,
    sampled_index,
    split_inputs,
)
from theorycheck.numeric._lanczos import lanczos_smallest

#: Logit box per regime.
BOX = {"interior": 3.0, "boundary": 30.0}
#: Relative agreement required between the HVP and the second difference.
AGREE_RTOL = 1e-2


class SearchResult(NamedTuple):
    """Outcome of :func:`search_negative_curvature`.

    Attributes:
        found: True only for a verified counterexample to convexity.
        logits: the counterexample logits ``[V]`` (None when not found).
        direction: unit ``x`` with :math:`x^\\top H x < 0` (None when not found).
        curvature: :math:`x^\\top H x` by HVP in float64 at the counterexample; when not
            found, the smallest value seen (a diagnostic, not a claim).
        num_samples: number of logit points examined (starts x steps x regimes).
        regime: the regime of the counterexample (None when not found).
        curvature_fd: the second-difference value of the same quantity (or None).
    """

    found: bool
    logits: Float[Array, " V"] | None
    direction: Float[Array, " V"] | None
    curvature: float
    num_samples: int
    regime: str | None
    curvature_fd: float | None = None


def _starts(key, regime, num, size, sampled):
    """Random starting logits ``[num, V]`` for a regime."""
    k1, k2, k3, k4, k5 = jr.split(key, 5)
    # log-uniform scale in [0.03, 3]: near-uniform policies as well as peaked ones
    scale = jnp.exp(jr.uniform(k1, (num, 1), minval=np.log(0.03), maxval=np.log(3.0)))
    z = scale * jr.normal(k2, (num, size))
    if regime == "interior":  # the first start is z = 0 (a moderate point, always)
        return jnp.clip(z.at[0].set(0.0), -BOX["interior"], BOX["interior"])
    rate = jr.uniform(k3, (num, 1), minval=0.0, maxval=0.5)
    push = jr.uniform(k4, (num, size)) < rate
    edge = jr.uniform(k5, (num, size), minval=-30.0, maxval=30.0)
    z = jnp.where(push, edge, z)
    others = jax.nn.logsumexp(z.at[:, sampled].set(-jnp.inf), axis=1)
    u = jr.uniform(jr.fold_in(key, 7), (num,), minval=-30.0, maxval=10.0)
    z = z.at[:, sampled].set(others + u)
    return jnp.clip(z, -BOX["boundary"], BOX["boundary"])


def _complement_basis(size):
    """Orthonormal basis ``[V, V-1]`` of the complement of the all-ones vector."""
    w = np.full(size, -1.0 / np.sqrt(size))
    w[0] += 1.0
    w /= np.linalg.norm(w)
    reflector = np.eye(size) - 2.0 * np.outer(w, w)  # maps e_0 to 1/sqrt(V)
    return jnp.asarray(reflector[:, 1:])


@functools.partial(
    jax.jit,
    static_argnames=("loss", "sampled", "static", "steps", "num_iters", "ortho"),
)
def _descend(
    loss, sampled, static, starts, dynamic, keys, steps, box, num_iters, ortho
):
    """Normalised gradient descent on the smallest eigenvalue, vmapped over starts.
    Returns per start the best (most negative) curvature, its logits and direction."""
    f = bind_loss(loss, sampled, static)
    size = starts.shape[1]
    ones = jnp.ones((size,), starts.dtype) / jnp.sqrt(size)

    def hvp(z, u):
        return jax.jvp(lambda y: jax.grad(f)(y, dynamic), (z,), (u,))[1]

    def project(u):
        return u - jnp.vdot(ones, u) * ones if ortho else u

    def smallest(z, x0):
        if size <= DENSE_MAX_VOCAB:
            h = jax.hessian(f)(z, dynamic)
            if ortho:
                b = _complement_basis(size)
                w, s = jnp.linalg.eigh(b.T @ h @ b)
                return b @ s[:, 0]
            return jnp.linalg.eigh(h)[1][:, 0]
        return lanczos_smallest(
            lambda u: hvp(z, u), x0, num_iters, project=project
        ).vector

    def curvature(z, x):
        return jnp.vdot(x, hvp(z, x))

    def one(z0, key):
        x0 = project(jr.normal(key, (size,), starts.dtype))
        x0 = x0 / jnp.linalg.norm(x0)

        def body(t, carry):
            z, x, best = carry
            x = smallest(z, x)
            c, g = jax.value_and_grad(curvature)(z, x)
            better = jnp.isfinite(c) & (c < best[0])
            best = jax.tree.map(lambda a, b: jnp.where(better, a, b), (c, z, x), best)
            # A zero or non-finite gradient (a flat, clipped region, or a kink) gives a
            # random step instead: a random walk until curvature appears.
            g = project(jnp.where(jnp.isfinite(g), g, 0.0))
            gnorm = jnp.linalg.norm(g)
            walk = project(jr.normal(jr.fold_in(key, t), (size,), starts.dtype))
            d = jnp.where(gnorm > 0, g / jnp.where(gnorm > 0, gnorm, 1.0), walk)
            d = d / jnp.linalg.norm(d)
            lr = 1.0 * (0.05 ** (t / max(steps - 1, 1)))
            z = jnp.clip(z - lr * d, -box, box)
            return z, x, best

        best = (jnp.asarray(jnp.inf, starts.dtype), z0, x0)
        _, _, best = jax.lax.fori_loop(0, steps, body, (z0, x0, best))
        return best

    if size <= DENSE_MAX_VOCAB:
        return jax.vmap(one)(starts, keys)
    return jax.lax.map(
        lambda a: one(*a), (starts, keys)
    )  # one basis in memory at a time


@functools.partial(jax.jit, static_argnames=("loss", "sampled", "static"))
def _verify_values(loss, sampled, static, z, x, dynamic):
    """``(x^T H x by HVP, by the frozen second difference, its noise)``, compiled
    once per loss and index (the re-check of every candidate reuses it)."""
    f = bind_loss(loss, sampled, static)
    hv = jax.jvp(lambda y: jax.grad(f)(y, dynamic), (z,), (x,))[1]
    frozen = frozen_loss_fn(lambda y: f(y, dynamic), z)
    c_fd, noise = second_difference(frozen, z, x)
    return jnp.vdot(x, hv), c_fd, noise


@functools.partial(jax.jit, static_argnames=("loss", "sampled", "static"))
def _hvp_value(loss, sampled, static, z, x, dynamic):
    f = bind_loss(loss, sampled, static)
    return jnp.vdot(x, jax.jvp(lambda y: jax.grad(f)(y, dynamic), (z,), (x,))[1])


def _verify(loss, sampled, static, dynamic, z, x):
    """Float64 re-check of x^T H x: HVP and frozen second difference (both jitted:
    the same float64 operations as eagerly, without one compilation per primitive)."""
    x = x / jnp.linalg.norm(x)
    try:
        c_hvp, c_fd, noise = (
            float(a) for a in _verify_values(loss, sampled, static, z, x, dynamic)
        )
    except NotImplementedError:  # a stop_gradient inside control flow
        return float(_hvp_value(loss, sampled, static, z, x, dynamic)), None, False
    resolved = max(10.0 * noise, 1e-12)
    ok = (
        np.isfinite(c_hvp)
        and np.isfinite(c_fd)
        and c_hvp < -resolved
        and c_fd < -resolved
        and abs(c_fd - c_hvp) <= AGREE_RTOL * abs(c_hvp) + 10.0 * noise
    )
    return c_hvp, c_fd, bool(ok)


def verify_curvature(
    loss: Callable,
    logits,
    sampled: int,
    direction,
    *,
    inputs: Mapping[str, Any] | None = None,
) -> tuple[float, float | None, bool]:
    r"""Float64 re-check of :math:`x^\top H x` at one point by two routes.

    The same check as a search hit gets: a Hessian-vector product (autodiff) and a
    Richardson second difference of the loss with its ``stop_gradient`` values frozen
    at ``logits`` (never finite differences of the gradient, which would see the frozen
    quantities move).

    Args:
        loss: ``loss(logits, sampled, **inputs) -> scalar``.
        logits: the point ``[V]``.
        sampled: the sampled token index ``k``.
        direction: ``x`` ``[V]`` (normalised here; the values are for the unit vector).
        inputs: the loss's keyword inputs.

    Returns:
        ``(c_hvp, c_fd, ok)``: the two values for the unit direction (``c_fd`` is None
        when a ``stop_gradient`` cannot be frozen) and whether both are negative beyond
        the finite-difference noise and agree to 1%.
    """
    with jax.enable_x64(True):
        z = jnp.asarray(logits, jnp.float64)
        x = jnp.asarray(direction, jnp.float64)
        k = sampled_index(sampled, z.shape[0])
        k_static, static, dynamic = split_inputs(inputs or {}, loss, z, k)
        return _verify(loss, k_static, static, dynamic, z, x)


def search_negative_curvature(
    loss: Callable,
    vocab: int,
    sampled: int,
    *,
    inputs: Mapping[str, Any] | None = None,
    key,
    num_starts: int = 16,
    steps: int = 25,
    regimes=("interior", "boundary"),
    num_iters: int = 30,
    max_checks: int = 4,
) -> SearchResult:
    r"""Adversarial search for a point and direction of negative logit curvature.

    .. math::
        \text{find } z, x:\ \ x^\top \nabla_z^2 L(z; k)\, x < 0 ,\ \lVert x\rVert = 1

    Args:
        loss: ``loss(logits, sampled, **inputs) -> scalar`` (the loss to minimise).
        vocab: the vocabulary size ``V`` (up to 151936).
        sampled: the sampled token index ``k``.
        inputs: the loss's keyword inputs (arrays of shape ``[V]`` where needed).
        key: PRNG key (required: the search is reproducible).
        num_starts: random starts per regime.
        steps: descent steps per start (each examines one point).
        regimes: any of ``"interior"``, ``"boundary"``.
        num_iters: Lanczos iterations per step above ``V = 512`` (warm-started).
        max_checks: how many of the most negative candidates are re-checked.

    Returns:
        A :class:`SearchResult`; ``found`` is True only after the float64 re-check by
        HVP and by a frozen second difference. Otherwise ``found`` is False and
        ``num_samples`` says how many points were examined: no counterexample found,
        which is not a proof of convexity.

    Examples:
        >>> import jax, jax.numpy as jnp, jax.random as jr
        >>> ce = lambda z, k: -jax.nn.log_softmax(z)[k]
        >>> r = search_negative_curvature(ce, 5, 0, key=jr.key(0), num_starts=2,
        ...                               steps=3)
        >>> r.found, r.num_samples
        (False, 12)
    """
    size, k = _checked_search_args(regimes, vocab, sampled, num_starts, steps)
    with jax.enable_x64(True):
        probe = jr.normal(jr.fold_in(key, 99), (size,), jnp.float64)
        k_static, static, dynamic = split_inputs(inputs or {}, loss, probe, k)
        for name, value in dynamic.items():
            if value.ndim == 1 and value.shape[0] != size:
                raise BadInput(
                    f"input {name!r} has length {value.shape[0]}, not V = {size}"
                )
        f = bind_loss(loss, k_static, static)
        ones = jnp.ones((size,), jnp.float64) / np.sqrt(size)
        hvp = jax.jit(
            lambda z, u: jax.jvp(lambda y: jax.grad(f)(y, dynamic), (z,), (u,))[1]
        )
        h1 = float(jnp.linalg.norm(hvp(probe, ones)))
        hs = float(jnp.linalg.norm(hvp(probe, probe / jnp.linalg.norm(probe))))
        if not np.isfinite(h1 + hs):
            raise BadInput("the loss's Hessian-vector product is non-finite")
        ortho = h1 <= 1e-12 * max(hs, 1.0)
        candidates = []
        for i, regime in enumerate(regimes):
            rkey = jr.fold_in(key, i)
            starts = _starts(rkey, regime, num_starts, size, k).astype(jnp.float64)
            keys = jr.split(jr.fold_in(rkey, 1), num_starts)
            c, z, x = _descend(
                loss,
                k_static,
                static,
                starts,
                dynamic,
                keys,
                int(steps),
                jnp.asarray(BOX[regime], jnp.float64),
                int(num_iters),
                bool(ortho),
            )
            for j in range(num_starts):
                if np.isfinite(float(c[j])):
                    candidates.append((float(c[j]), regime, z[j], x[j]))
        num_samples = len(regimes) * num_starts * steps
        candidates.sort(key=lambda t: t[0])
        for c, regime, z, x in candidates[:max_checks]:
            if c >= 0:
                break
            c_hvp, c_fd, ok = _verify(loss, k_static, static, dynamic, z, x)
            if ok:
                x = x / jnp.linalg.norm(x)
                return SearchResult(True, z, x, c_hvp, num_samples, regime, c_fd)
        best = candidates[0][0] if candidates else float("nan")
        return SearchResult(False, None, None, best, num_samples, None, None)


def _checked_search_args(regimes, vocab, sampled, num_starts, steps) -> tuple[int, int]:
    """(V, k) after checking the search's arguments (BadInput naming the bad one)."""
    for r in regimes:
        if r not in BOX:
            raise BadInput(f"regime {r!r} is not one of {sorted(BOX)}")
    size = int(vocab)
    if size < 2:
        raise BadInput(f"vocab = {vocab!r} must be >= 2")
    k = sampled_index(sampled, size)
    if num_starts < 1 or steps < 1:
        raise BadInput(f"num_starts = {num_starts}, steps = {steps} must be >= 1")
    return size, k

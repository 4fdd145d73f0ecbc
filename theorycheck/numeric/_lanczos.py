r"""Lanczos iteration for the smallest eigenpair of a symmetric operator (JAX only).

The operator is given only through its matrix-vector product (for a logit Hessian, a
Hessian-vector product), so no :math:`V \times V` matrix is ever formed. The Krylov
basis is kept: each new vector goes through the three-term recurrence, then one
classical Gram-Schmidt pass against the whole basis, and a second pass where the first
removed much ("twice is enough"). This keeps the tridiagonal matrix faithful in floating
point at the cost of :math:`O(mV)` memory for :math:`m` iterations.

References:
    C. Lanczos, "An iteration method for the solution of the eigenvalue problem of
    linear differential and integral operators", J. Res. Nat. Bur. Standards 45 (1950).
    Y. Saad, "Numerical Methods for Large Eigenvalue Problems", 2nd ed. (2011), Ch. 6
    (Lanczos with full reorthogonalisation; the residual estimate
    :math:`|\beta_m y_m|` of a Ritz pair).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

#: Rows per block of the Krylov basis; reorthogonalisation touches filled blocks only.
_CHUNK = 8


class LanczosResult(NamedTuple):
    """Smallest Ritz pair of a Lanczos run.

    Attributes:
        value: the smallest Ritz value :math:`\\theta_1` (an upper bound on
            :math:`\\lambda_{\\min}` of the operator restricted to the start space).
        vector: the unit Ritz vector, shape ``[V]``.
        residual_estimate: :math:`|\\beta_j\\, y_{1,j}|`, the Lanczos estimate of
            :math:`\\lVert A x - \\theta_1 x\\rVert` (exact in exact arithmetic).
        num_iters: iterations run (stops early at convergence or breakdown).
        ritz_values: all Ritz values of the final tridiagonal matrix, shape ``[m]``
            (entries past ``num_iters`` are padding, set above the spectrum).
    """

    value: Float[Array, ""]
    vector: Float[Array, " V"]
    residual_estimate: Float[Array, ""]
    num_iters: Array
    ritz_values: Float[Array, " m"]


def _tridiagonal(alphas, betas, active, big):
    """Symmetric tridiagonal T; inactive rows get ``big`` on the diagonal, so that
    padding never produces a small spurious Ritz value."""
    diag = jnp.where(active, alphas, big)
    off = jnp.where(active[1:], betas[:-1], 0.0)
    return jnp.diag(diag) + jnp.diag(off, 1) + jnp.diag(off, -1)


def lanczos_smallest(
    matvec: Callable[[Array], Array],
    start: Float[Array, " V"],
    num_iters: int,
    *,
    tol: float = 1e-10,
    project: Callable[[Array], Array] | None = None,
) -> LanczosResult:
    r"""Smallest eigenpair of a symmetric operator: Lanczos, full reorthogonalisation.

    Builds the Krylov basis :math:`Q = [q_1, \dots, q_m]` of :math:`A` from ``start``
    and the tridiagonal :math:`T = Q^\top A Q` (diagonal :math:`\alpha_j`, off-diagonal
    :math:`\beta_j`), then returns the smallest Ritz pair :math:`(\theta_1, Q y_1)` of

    .. math::
        T y_1 = \theta_1 y_1, \qquad
        \lVert A Q y_1 - \theta_1 Q y_1 \rVert \approx |\beta_j\, y_{1,j}| .

    The run stops once that residual estimate is at most ``tol`` times the largest
    :math:`|\alpha|, \beta` seen (a scale of :math:`\lVert A \rVert`), or when the
    Krylov space is exhausted (breakdown :math:`\beta_j \approx 0`).

    Args:
        matvec: ``x -> A x`` for a symmetric ``A``, ``[V] -> [V]``; jit-compatible.
        start: nonzero start vector, shape ``[V]`` (random is best; an eigenvector of A
            gives a one-dimensional Krylov space).
        num_iters: maximum number of iterations ``m`` (static; capped at ``V``).
        tol: relative convergence tolerance on the residual estimate.
        project: optional orthogonal projector applied to the start and to every
            product, to work on an invariant subspace (e.g. the complement of the
            all-ones vector).

    Returns:
        A :class:`LanczosResult`. ``value`` is a Ritz value, hence an upper bound on the
        smallest eigenvalue of the (projected) operator.

    Examples:
        >>> import jax.numpy as jnp
        >>> a = jnp.diag(jnp.array([3.0, -1.0, 2.0, 5.0]))
        >>> r = lanczos_smallest(lambda x: a @ x, jnp.ones(4), 4)
        >>> round(float(r.value), 4)  # float32 here: the dtype of ``start``
        -1.0
    """
    size = start.shape[0]
    m = int(min(num_iters, size))
    if m < 1:
        raise ValueError(f"num_iters = {num_iters} must be >= 1")
    proj = project if project is not None else (lambda x: x)
    dtype = start.dtype
    chunks = -(-m // _CHUNK)
    q0 = proj(start)
    q0 = q0 / jnp.linalg.norm(q0)
    basis = jnp.zeros((chunks, _CHUNK, size), dtype).at[0, 0].set(q0)
    alphas = jnp.zeros((m,), dtype)
    betas = jnp.zeros((m,), dtype)

    def ritz(alphas, betas, j, scale):
        active = jnp.arange(m) <= j
        big = 2.0 * scale + 1.0
        return jnp.linalg.eigh(_tridiagonal(alphas, betas, active, big))

    def reorth(w, basis, j):
        # One classical Gram-Schmidt pass over the filled chunks only (rows > j are 0).
        def one(i, w):
            block = basis[i]
            return w - block.T @ (block @ w)

        return jax.lax.fori_loop(0, j // _CHUNK + 1, one, w)

    def cond(carry):
        j, _, _, _, _, done = carry
        return (j < m) & ~done

    def body(carry):
        j, basis, alphas, betas, scale, _ = carry
        q = basis[j // _CHUNK, j % _CHUNK]
        prev = basis[(j - 1) // _CHUNK, (j - 1) % _CHUNK]
        beta_prev = jnp.where(j > 0, betas[j - 1], 0.0)
        w = proj(matvec(q))
        alpha = jnp.vdot(q, w)
        w = w - alpha * q - beta_prev * prev  # three-term recurrence
        before = jnp.linalg.norm(w)
        w = reorth(w, basis, j)
        # Second pass only where the first removed much ("twice is enough").
        w = jax.lax.cond(
            jnp.linalg.norm(w) < 0.7 * before, reorth, lambda w, b, j: w, w, basis, j
        )
        beta = jnp.linalg.norm(w)
        scale = jnp.maximum(scale, jnp.maximum(jnp.abs(alpha), beta))
        alphas = alphas.at[j].set(alpha)
        betas = betas.at[j].set(beta)
        _, s = ritz(alphas, betas, j, scale)
        converged = jnp.abs(beta * s[j, 0]) <= tol * scale
        broken = beta <= 1e-13 * scale
        nxt = jnp.where(broken, 0.0, w / jnp.where(broken, 1.0, beta))
        row = jnp.minimum(j + 1, m - 1)
        cur = basis[row // _CHUNK, row % _CHUNK]
        basis = basis.at[row // _CHUNK, row % _CHUNK].set(
            jnp.where(j + 1 < m, nxt, cur)
        )
        return j + 1, basis, alphas, betas, scale, converged | broken

    init = (jnp.asarray(0), basis, alphas, betas, jnp.asarray(0.0, dtype), False)
    j, basis, alphas, betas, scale, _ = jax.lax.while_loop(cond, body, init)
    theta, s = ritz(alphas, betas, j - 1, scale)
    y = s[:, 0]
    ypad = jnp.zeros((chunks * _CHUNK,), dtype).at[:m].set(y)
    vector = jnp.einsum("cr,crv->v", ypad.reshape(chunks, _CHUNK), basis)
    vector = vector / jnp.linalg.norm(vector)
    residual = jnp.abs(betas[j - 1] * y[j - 1])
    return LanczosResult(theta[0], vector, residual, j, theta)

r"""Logit Hessians of a loss: Hessian-vector products, smallest eigenvalue.

A loss is ``loss(logits: [V], sampled: int, **inputs) -> scalar`` (loss to minimise).
Everything here works in float64 (inside ``jax.enable_x64``), whatever the global
setting. Frozen quantities (``jax.lax.stop_gradient``) are constants of the Hessian, as
in training.

Above small V the Hessian is never formed: :func:`min_eigenvalue` runs Lanczos on
forward-over-reverse Hessian-vector products (:mod:`theorycheck.numeric._lanczos`).
For the sampled-token family :math:`L = f(\log\pi_k)` the structure gives the exact
smallest eigenvalue in :math:`O(V)` memory (:func:`sampled_token_min_eigenvalue`).
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
from theorycheck.numeric._lanczos import lanczos_smallest

#: Largest V for which ``method="auto"`` forms the dense Hessian.
DENSE_MAX_VOCAB = 512


class EigResult(NamedTuple):
    """Smallest eigenpair of a logit Hessian.

    Attributes:
        value: smallest eigenvalue (``"dense"``) or smallest Ritz value (``"lanczos"``,
            an upper bound on the smallest eigenvalue).
        vector: unit eigen/Ritz vector, shape ``[V]`` (float64).
        method: ``"dense"`` or ``"lanczos"``.
        residual: :math:`\\lVert H x - \\lambda x \\rVert_2`, recomputed with one extra
            Hessian-vector product (dense: with the matrix).
        num_iters: Lanczos iterations run (0 for ``"dense"``).
    """

    value: float
    vector: Float[Array, " V"]
    method: str
    residual: float
    num_iters: int = 0


#: Key under which a traced sampled index travels among the dynamic inputs.
SAMPLED_KEY = "__sampled__"


def split_inputs(
    inputs: Mapping[str, Any], loss: Callable | None = None, logits=None, sampled=0
) -> tuple[int | None, tuple, dict]:
    """Split the sampled index and the loss inputs into static values and jit arguments.

    Arrays, Python floats and the sampled index become jit arguments (never baked into
    the compiled code, so a new advantage or token does not recompile). Ints, bools,
    strings and None stay static. When ``loss`` and ``logits`` are given and the loss
    branches in Python on the index or a float (``if adv > 0:``), those are made static
    instead (decided by abstract traces, no compilation).

    Returns:
        ``(sampled_static, static, dynamic)``: ``sampled_static`` is None when the index
        is traced (it then sits in ``dynamic`` under :data:`SAMPLED_KEY`).
    """

    def split(sampled_static, floats_static):
        static, dynamic = [], {}
        for name, value in inputs.items():
            keep = value is None or isinstance(value, bool | int | str)
            if keep or (floats_static and isinstance(value, float)):
                static.append((name, value))
                continue
            arr = jnp.asarray(value)
            if jnp.issubdtype(arr.dtype, jnp.floating):
                arr = arr.astype(jnp.float64)
            dynamic[name] = arr
        if not sampled_static:
            dynamic[SAMPLED_KEY] = jnp.asarray(sampled)
        return (
            (int(sampled) if sampled_static else None),
            tuple(sorted(static)),
            dynamic,
        )

    options = [(False, False), (True, False), (True, True)]
    if loss is None or logits is None:
        return split(*options[0])
    for option in options:
        k, static, dynamic = split(*option)
        try:
            jax.eval_shape(bind_loss(loss, k, static), logits, dynamic)
        except (  # bool/integer conversion errors are concretization errors
            jax.errors.ConcretizationTypeError,
            jax.errors.TracerArrayConversionError,
        ):
            continue
        return k, static, dynamic
    return k, static, dynamic


def as_logits(logits) -> Array:
    """Float64 logit vector, with a clear error for bad shapes or non-finite values."""
    z = jnp.asarray(logits, dtype=jnp.float64)
    if z.ndim != 1 or z.shape[0] < 1:
        raise BadInput(f"logits must be a 1-D vector [V]; got shape {tuple(z.shape)}")
    host = np.asarray(z)  # checked on the host: no compilation for a check
    if not np.all(np.isfinite(host)):
        raise BadInput(
            f"logits contain non-finite values: {host[~np.isfinite(host)][:4]}"
        )
    return z


def sampled_index(sampled: int, vocab: int) -> int:
    """The sampled index as an int in ``[0, V)`` (one index; arrays of indices are
    checked by ``_checks.check_sampled``)."""
    if not isinstance(sampled, int | np.integer) or not 0 <= int(sampled) < vocab:
        raise BadInput(f"sampled = {sampled!r} is out of range for V = {vocab}")
    return int(sampled)


def bind_loss(loss: Callable, sampled: int | None, static: tuple) -> Callable:
    """``(logits, dynamic_inputs) -> scalar``; checks that the loss returns a scalar.
    With ``sampled=None`` the index is read from ``dynamic[SAMPLED_KEY]``."""

    def fn(z, dynamic):
        dynamic = dict(dynamic)
        k = dynamic.pop(SAMPLED_KEY) if sampled is None else sampled
        out = jnp.asarray(loss(z, k, **dict(static), **dynamic))
        if out.shape != ():
            raise BadInput(f"loss must return a scalar; got shape {tuple(out.shape)}")
        return out

    return fn


@functools.partial(jax.jit, static_argnames=("loss", "sampled", "static"))
def _hvp(loss, sampled, static, z, vec, dynamic):
    f = bind_loss(loss, sampled, static)
    return jax.jvp(lambda y: jax.grad(f)(y, dynamic), (z,), (vec,))[1]


@functools.partial(jax.jit, static_argnames=("loss", "sampled", "static"))
def _dense(loss, sampled, static, z, dynamic):
    return jax.hessian(bind_loss(loss, sampled, static))(z, dynamic)


def hvp_fn(loss: Callable, **inputs) -> Callable[[Array, int, Array], Array]:
    r"""Jitted Hessian-vector product of a loss in its logits (forward over reverse).

    .. math::
        \mathrm{hvp}(z, k, u) = \nabla_z^2 L(z; k)\, u
        = \frac{d}{dt}\Big|_{t=0} \nabla_z L(z + t u; k)

    Args:
        loss: ``loss(logits, sampled, **inputs) -> scalar``, in jax.numpy.
        **inputs: the loss's keyword inputs (``adv``, ``behavior_logp`` [V], ...).
            Arrays are passed to the compiled function as arguments; Python scalars are
            static.

    Returns:
        ``hvp(logits [V], sampled, vec [V]) -> [V]`` in float64. It accepts logits and
        vectors sharded with ``jax.sharding`` (the output follows the input sharding).

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> ce = lambda z, k: -jax.nn.log_softmax(z)[k]
        >>> hvp = hvp_fn(ce)
        >>> with jax.enable_x64(True):
        ...     out = hvp(jnp.zeros(2), 0, jnp.array([1.0, -1.0]))
        >>> [round(float(x), 6) for x in out]
        [0.5, -0.5]
    """
    split = {}

    def hvp(logits, sampled, vec):
        with jax.enable_x64(True):
            z = jnp.asarray(logits, dtype=jnp.float64)
            u = jnp.asarray(vec, dtype=jnp.float64)
            k = sampled_index(sampled, z.shape[-1])
            if not split:  # decided once, on the first call
                split["v"] = split_inputs(inputs, loss, z, k)
            k_static, static, dynamic = split["v"]
            if k_static is None:
                dynamic = dynamic | {SAMPLED_KEY: jnp.asarray(k)}
            else:
                k_static = k
            return _hvp(loss, k_static, static, z, u, dynamic)

    return hvp


def logit_hessian(loss: Callable, logits, sampled: int, *, inputs=None) -> Array:
    r"""Dense logit Hessian :math:`\nabla_z^2 L(z; k)` (``jax.hessian``), small V only.

    Args:
        loss: ``loss(logits, sampled, **inputs) -> scalar``.
        logits: shape ``[V]``.
        sampled: the sampled token index ``k``.
        inputs: mapping of the loss's keyword inputs.

    Returns:
        The ``[V, V]`` Hessian in float64.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> h = logit_hessian(lambda z, k: -jax.nn.log_softmax(z)[k], jnp.zeros(2), 0)
        >>> [[round(float(x), 6) for x in row] for row in h]
        [[0.25, -0.25], [-0.25, 0.25]]
    """
    with jax.enable_x64(True):
        z = as_logits(logits)
        if z.shape[0] > 4 * DENSE_MAX_VOCAB:
            raise BadInput(f"V = {z.shape[0]} is too large for a dense Hessian")
        k = sampled_index(sampled, z.shape[0])
        k_static, static, dynamic = split_inputs(inputs or {}, loss, z, k)
        return _dense(loss, k_static, static, z, dynamic)


@functools.partial(
    jax.jit, static_argnames=("loss", "sampled", "static", "num_iters", "tol")
)
def _lanczos_min(loss, sampled, static, z, dynamic, start, num_iters, tol):
    f = bind_loss(loss, sampled, static)

    def matvec(u):
        return jax.jvp(lambda y: jax.grad(f)(y, dynamic), (z,), (u,))[1]

    # Softmax losses are shift invariant: H 1 = 0. Then the all-ones direction is an
    # exact eigenvector (eigenvalue 0) and Lanczos runs on its complement.
    ones = jnp.ones_like(z) / jnp.sqrt(z.shape[0])
    h1 = jnp.linalg.norm(matvec(ones))
    hs = jnp.linalg.norm(matvec(start / jnp.linalg.norm(start)))
    invariant = h1 <= 1e-12 * jnp.maximum(hs, 1.0)

    def project(u):
        return jnp.where(invariant, u - jnp.vdot(ones, u) * ones, u)

    res = lanczos_smallest(matvec, start, num_iters, tol=tol, project=project)
    use_ones = invariant & (res.value > 0.0)
    value = jnp.where(use_ones, 0.0, res.value)
    vector = jnp.where(use_ones, ones, res.vector)
    hx = matvec(vector)
    return res._replace(value=value, vector=vector), jnp.linalg.norm(
        hx - value * vector
    )


def default_num_iters(vocab: int) -> int:
    r"""Default Lanczos budget: :math:`m^2 V \le 80^2 \cdot 32768`, with 24 <= m <= 80.

    Isolated (e.g. negative) extreme eigenvalues converge in a few iterations; the
    budget only binds for clustered spectra, where the residual says how far it got.
    """
    return int(min(80, max(24, np.sqrt(80.0**2 * 32768 / max(vocab, 1)))))


def min_eigenvalue(
    loss: Callable,
    logits,
    sampled: int,
    *,
    inputs: Mapping[str, Any] | None = None,
    method: str = "auto",
    num_iters: int | None = None,
    tol: float = 1e-10,
    key=None,
) -> EigResult:
    r"""Smallest eigenvalue of the logit Hessian of a loss at one point.

    .. math::
        \lambda_{\min}\big(\nabla_z^2 L(z; k)\big)
        = \min_{\lVert x \rVert = 1} x^\top \nabla_z^2 L(z; k)\, x

    ``"dense"`` forms the Hessian with ``jax.hessian`` and calls ``eigh``;
    ``"lanczos"`` runs Lanczos with full reorthogonalisation on Hessian-vector products
    and never forms a :math:`V \times V` matrix; ``"auto"`` picks dense for
    ``V <= 512``.
    On the Lanczos route, a shift-invariant loss (:math:`H\mathbf 1 = 0`, checked with
    one HVP) is handled exactly: the all-ones eigenvector is split off and Lanczos runs
    on its complement, so the result is :math:`\min(0, \theta_1)`.

    Args:
        loss: ``loss(logits, sampled, **inputs) -> scalar``.
        logits: shape ``[V]`` (any float dtype; computed in float64).
        sampled: the sampled token index ``k``.
        inputs: the loss's keyword inputs.
        method: ``"auto"``, ``"dense"`` or ``"lanczos"``.
        num_iters: maximum Lanczos iterations; default :func:`default_num_iters`
            (80 up to V = 32768, fewer above: full reorthogonalisation costs
            :math:`O(m^2 V)`).
        tol: Lanczos relative convergence tolerance.
        key: PRNG key for the Lanczos start vector (default: a fixed numpy seed).

    Returns:
        An :class:`EigResult` with the residual :math:`\lVert Hx - \lambda x\rVert`
        recomputed independently. A Lanczos value is an upper bound on
        :math:`\lambda_{\min}`: a negative value proves negative curvature (up to the
        residual), a positive one does not prove convexity.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> ce = lambda z, k: -jax.nn.log_softmax(z)[k]
        >>> r = min_eigenvalue(ce, jnp.array([0.0, 1.0, 2.0]), 0)
        >>> r.method, abs(r.value) < 1e-12
        ('dense', True)
    """
    if method not in ("auto", "dense", "lanczos"):
        raise BadInput(f"method = {method!r}; expected 'auto', 'dense' or 'lanczos'")
    with jax.enable_x64(True):
        z = as_logits(logits)
        size = z.shape[0]
        k = sampled_index(sampled, size)
        k_static, static, dynamic = split_inputs(inputs or {}, loss, z, k)
        if method == "auto":
            method = "dense" if size <= DENSE_MAX_VOCAB else "lanczos"
        if method == "dense":
            h = logit_hessian(loss, z, k, inputs=inputs)
            if not bool(jnp.all(jnp.isfinite(h))):
                raise BadInput(
                    "the logit Hessian has non-finite entries at these logits"
                )
            w, s = jnp.linalg.eigh(h)
            x = s[:, 0]
            residual = jnp.linalg.norm(h @ x - w[0] * x)
            return EigResult(float(w[0]), x, "dense", float(residual), 0)
        m = default_num_iters(size) if num_iters is None else int(num_iters)
        if key is None:  # numpy start: no PRNG compilation on the first call
            start = jnp.asarray(np.random.default_rng(0).standard_normal(size))
        else:
            start = jr.normal(key, (size,), dtype=jnp.float64)
        if hasattr(z, "sharding"):
            start = jax.device_put(start, z.sharding)
        res, residual = _lanczos_min(
            loss, k_static, static, z, dynamic, start, int(m), float(tol)
        )
        if not np.isfinite(float(res.value)):
            raise BadInput("the Hessian-vector product is non-finite at these logits")
        return EigResult(
            float(res.value), res.vector, "lanczos", float(residual), int(res.num_iters)
        )

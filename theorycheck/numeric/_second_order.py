r"""Second order along v = e_k - pi, and the first-order radius of sign(ΔD).

Along the line :math:`z(t) = z + t v` (v held fixed), let
:math:`w_i = v_i - \pi\cdot v` and :math:`\sigma^2 = \mathrm{Var}_\pi(v)
= \sum_i \pi_i w_i^2`. Then :math:`d\log\pi_i/dt = w_i` and
:math:`d^2\pi_i/dt^2 = \pi_i(w_i^2 - \sigma^2)`, so (all DERIVED here, checked against
``jax.jvp`` twice and finite differences):

.. math::
    v^\top \nabla^2_z D_{KL}\, v = \sigma^2 \ge 0, \qquad
    v^\top \nabla^2_z D_{TV}\, v = \tfrac12 \sum_i s_i \pi_i (w_i^2 - \sigma^2)

    v^\top \nabla^2_z D_{TopK\,KL}\, v = \sigma^2 - \mu_T \sigma_T^2, \quad
    \sigma_T^2 = \frac{C_T}{\pi_T} - \Big(\frac{Q_T}{\pi_T}\Big)^2

(:math:`\sigma_T^2` is the variance of v under pi restricted to the tail, where
:math:`v_i = -\pi_i`). Forward KL is convex along the line. For the top-K KL,
convexity along v is *unknown*: random search found no negative value beyond float64
rounding, and no proof is given here. TV is not convex along v (a test keeps a
counterexample where a predicted increase is wrong).

**First-order radius.** Let :math:`R = \max_i v_i - \min_i v_i
= 1 - \pi_k + \max_{i \ne k} \pi_i`. Popoviciu's inequality bounds every variance of
v by :math:`R^2/4`, uniformly in t, so :math:`|D''(t)| \le M` with :math:`M = R^2/4`
(KL and top-K KL) or :math:`M = R^2/2` (TV and top-K TV, where differentiable).
Taylor's theorem gives :math:`|\Delta D - t\dot D| \le M t^2 / 2`, hence for

.. math::
    |t| < \rho = \frac{2|\dot D|}{M} \quad
    (\rho_{KL} = 8|\dot D|/R^2,\ \rho_{TV} = \min(4|\dot D|/R^2,\ \tau))

:math:`\mathrm{sign}(\Delta D) = \mathrm{sign}(t\dot D)`. TV has kinks where
:math:`\pi_i(t) = \mu_i`; since :math:`|d\log\pi_i/dt| \le R`, no kink is crossed while
:math:`|t| < \tau = \min_i |\log\pi_i - \log\mu_i| / R` (buckets of S + tail for top-K).
For forward KL, convexity gives :math:`\Delta D \ge t\dot D`, so a predicted increase is
right for *every* t; only predicted decreases need :math:`|t| < \rho`.

t is the coefficient of v: a free-logit gradient step of size eta on
:math:`\hat A\, w \log\pi_k` (IS weight w > 0) moves z by :math:`t v` with
:math:`t = \eta \hat A w`. For top-K kinds the radius refers to the exact derivative of
:math:`D_{TopK}` (the proportional-tail estimator).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike
from jaxtyping import Array, Float

from theorycheck.numeric import _checks
from theorycheck.numeric._choices import Divergence, Support, choose
from theorycheck.numeric._ddot import (
    TAIL_LOG2_TERMS,
    full_ddot,
    log2_terms,
    reduced_ddot,
    tie_sign,
)
from theorycheck.numeric._divergence import default_topk, validate
from theorycheck.numeric._support import Reduced, reduce_to_support

CURVATURE_KINDS = (Divergence.KL, Divergence.TV, Divergence.TOPK_KL, Divergence.TOPK_TV)


def line_terms(logp: Array, sampled: Array):
    """pi, v, c = pi.v, sigma^2 = Var_pi(v) and the range R of v (no V x V objects)."""
    pi = jnp.exp(logp)
    onehot = (
        jax.lax.broadcasted_iota(sampled.dtype, logp.shape, logp.ndim - 1)
        == (sampled[..., None])
    )
    v = jnp.where(onehot, 1.0, 0.0) - pi
    c = jnp.sum(pi * v, axis=-1)
    w = v - c[..., None]
    sigma2 = jnp.sum(pi * w * w, axis=-1)
    pi_k = jnp.sum(jnp.where(onehot, pi, 0.0), axis=-1)
    other = jnp.max(jnp.where(onehot, -jnp.inf, pi), axis=-1)
    other = jnp.where(logp.shape[-1] > 1, other, 0.0)
    return pi, v, c, sigma2, 1.0 - pi_k + other


def full_second_order(
    behavior_logp: Array, logp: Array, sampled: Array, kind: str
) -> Array:
    """vᵀ∇²D v for full-vocabulary KL or TV (no checks; jit-safe)."""
    pi, v, c, sigma2, _ = line_terms(logp, sampled)
    if kind == "kl":
        return sigma2
    mu = jnp.exp(behavior_logp)
    s = tie_sign(pi, mu, logp, behavior_logp, log2_terms(pi.shape[-1]))
    w = v - c[..., None]
    return 0.5 * jnp.sum(s * pi * (w * w - sigma2[..., None]), axis=-1)


def reduced_second_order(r: Reduced, logp: Array, sampled: Array, kind: str) -> Array:
    """vᵀ∇²D v for top-K KL or TV along the full-vocabulary v (no checks; jit-safe)."""
    _, _, c, sigma2, _ = line_terms(logp, sampled)
    pi_t, mu_t = jnp.exp(r.logpi_tail), jnp.exp(r.logmu_tail)
    q_t, c_t = r.tail_norm2, r.tail_cube
    safe = jnp.where(pi_t > 0, pi_t, 1.0)
    if kind == "topk_kl":
        var_t = jnp.where(pi_t > 0, c_t / safe - (q_t / safe) ** 2, 0.0)
        return sigma2 - mu_t * jnp.maximum(var_t, 0.0)
    pi = jnp.where(r.valid, jnp.exp(r.logpi), 0.0)
    mu = jnp.where(r.valid, jnp.exp(r.logmu), 0.0)
    s = tie_sign(pi, mu, r.logpi, r.logmu, TAIL_LOG2_TERMS)
    w = jnp.where(r.is_k, 1.0, 0.0) - pi - c[..., None]
    inside = jnp.sum(s * pi * (w * w - sigma2[..., None]), axis=-1)
    tail = c_t + 2 * c * q_t + c * c * pi_t - sigma2 * pi_t
    s_t = tie_sign(pi_t, mu_t, r.logpi_tail, r.logmu_tail, TAIL_LOG2_TERMS)
    return 0.5 * (inside + s_t * tail)


def radius_from(ddot: Array, span: Array, kind: str, kink: Array | None) -> Array:
    """rho = 2|Ḋ|/M, M = R²/4 (KL) or R²/2 (TV, also capped by the kink distance)."""
    m = span * span / (4.0 if kind.endswith("kl") else 2.0)
    rho = jnp.where(m > 0, 2 * jnp.abs(ddot) / jnp.where(m > 0, m, 1.0), jnp.inf)
    if kink is None:
        return rho
    return jnp.minimum(
        rho, jnp.where(span > 0, kink / jnp.where(span > 0, span, 1), 0.0)
    )


def _log_gap(logpi: Array, logmu: Array) -> Array:
    """|log pi - log mu|, +inf where mu = 0 (that bucket can never reach a kink)."""
    return jnp.where(logmu > -jnp.inf, jnp.abs(logpi - logmu), jnp.inf)


def full_radius(behavior_logp: Array, logp: Array, sampled: Array, kind: str) -> Array:
    """First-order radius for full-vocabulary KL or TV (no checks; jit-safe)."""
    span = line_terms(logp, sampled)[-1]
    dd = full_ddot(behavior_logp, logp, sampled, kind).ddot
    kink = None if kind == "kl" else jnp.min(_log_gap(logp, behavior_logp), axis=-1)
    return radius_from(dd, span, kind, kink)


def reduced_radius(r: Reduced, logp: Array, sampled: Array, kind: str) -> Array:
    """First-order radius for top-K KL or TV along the full v (no checks; jit-safe)."""
    span = line_terms(logp, sampled)[-1]
    dd = reduced_ddot(r, kind[5:], "topk_proportional").ddot
    kink = None
    if kind == "topk_tv":
        inside = jnp.where(r.valid, _log_gap(r.logpi, r.logmu), jnp.inf)
        tail = jnp.where(r.n_tail > 0, _log_gap(r.logpi_tail, r.logmu_tail), jnp.inf)
        kink = jnp.minimum(jnp.min(inside, axis=-1), tail)
    return radius_from(dd, span, kind, kink)


@functools.partial(jax.jit, static_argnames=("what", "kind", "topk", "support"))
def _curvature(behavior, logits, sampled, what, kind, topk, support):
    logp = jax.nn.log_softmax(logits, axis=-1)
    if kind in ("kl", "tv"):
        behavior_logp = jnp.asarray(behavior, logp.dtype)
        fn = full_second_order if what == "second" else full_radius
        return fn(behavior_logp, logp, sampled, kind)
    r = reduce_to_support(behavior, logp, sampled, topk=topk, support=support)
    fn = reduced_second_order if what == "second" else reduced_radius
    return fn(r, logp, sampled, kind)


def _prepare(behavior, logits, sampled, kind, topk, support):
    kind = choose(Divergence, kind, "kind", CURVATURE_KINDS)
    support = choose(Support, support, "support")
    if kind.startswith("topk"):
        topk = default_topk(behavior, topk)
        _checks.check_topk(topk)
    else:
        topk = None
    validate(behavior, logits, sampled, need_full=topk is None, topk=topk)
    if topk is not None:
        topk = min(int(topk), jnp.shape(logits)[-1])
    return jnp.asarray(logits), jnp.asarray(sampled), topk


def second_order(
    behavior_logp,
    logits: ArrayLike,
    sampled: ArrayLike,
    *,
    kind: str = "kl",
    topk: int | None = None,
    support: str = "union",
) -> Float[Array, "*batch"]:
    r"""Closed-form :math:`v^\top \nabla^2_z D\, v` along v = e_k - pi (module doc).

    .. math::
        v^\top \nabla^2_z D_{KL}\, v = \mathrm{Var}_\pi(v)

    Args:
        behavior_logp: ``[..., V]`` behavior log-probs or a :class:`TopKBehavior`
            (top-K kinds only).
        logits: ``[..., V]`` policy logits.
        sampled: ``[...]`` sampled token ids.
        kind: ``"kl"``, ``"tv"``, ``"topk_kl"`` or ``"topk_tv"``.
        topk: K for the top-K kinds.
        support: ``"union"`` or ``"k_slots"``.

    Returns:
        ``[...]`` second directional derivative (TV: where differentiable).

    Examples:
        >>> import numpy as np
        >>> z = np.log(np.array([0.5, 0.5]))
        >>> round(float(second_order(z, z, 0)), 12)
        0.25

    References:
        DERIVED here (Predictive Divergence Masks, arXiv 2607.10848, Remark 2 names the
        O(eta^2) remainder; its text is NOT FOUND).
    """
    logits, sampled, topk = _prepare(
        behavior_logp, logits, sampled, kind, topk, support
    )
    return _curvature(behavior_logp, logits, sampled, "second", kind, topk, support)


def first_order_radius(
    behavior_logp,
    logits: ArrayLike,
    sampled: ArrayLike,
    *,
    kind: str = "kl",
    topk: int | None = None,
    support: str = "union",
) -> Float[Array, "*batch"]:
    r"""Step length below which sign(ΔD) equals the first-order prediction sign(t Ḋ).

    .. math::
        |t| < \rho = \frac{2|\dot D|}{M} \implies
        \mathrm{sign}\big(D(z + t v) - D(z)\big) = \mathrm{sign}(t \dot D)

    Args:
        behavior_logp: ``[..., V]`` behavior log-probs or a :class:`TopKBehavior`
            (top-K kinds only).
        logits: ``[..., V]`` policy logits.
        sampled: ``[...]`` sampled token ids.
        kind: ``"kl"``, ``"tv"``, ``"topk_kl"`` or ``"topk_tv"``.
        topk: K for the top-K kinds.
        support: ``"union"`` or ``"k_slots"``.

    Returns:
        ``[...]`` radius rho in units of t (``inf`` when v = 0; 0 at a TV tie).

    Examples:
        >>> import numpy as np
        >>> mu = np.log(np.array([0.5, 0.5]))
        >>> z = np.array([0.0, 1.0])
        >>> float(first_order_radius(mu, z, 0)) > 0
        True

    References:
        DERIVED here (Taylor remainder + Popoviciu's variance inequality).
    """
    logits, sampled, topk = _prepare(
        behavior_logp, logits, sampled, kind, topk, support
    )
    return _curvature(behavior_logp, logits, sampled, "radius", kind, topk, support)

r"""Weight-form rules: a detached importance weight times :math:`\hat A\log\pi_k`.

.. math::
    j = \operatorname{sg}(w)\,\hat A\log\pi_k, \qquad c = \hat A\,w

* ``cispo``: :math:`w = \operatorname{clip}(r, l, u)`: the weight is capped, the
  gradient is kept (never gated).
* ``glm5``: :math:`w = r\,\mathbf 1[l < r < u]`: tokens whose rollout ratio leaves the
  open window are rejected, whatever the sign of Â.

Because :math:`w` is detached, the log-ratio guard only clamps the weight's value; it
never saturates the derivative. With :math:`w = r` the weight form reproduces the
gradient of :math:`r\hat A` (the loss value differs).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import sympy as sp
from jax.typing import ArrayLike

from theorycheck.losses._common import (
    LOG_RATIO_CLAMP,
    log_ratio,
    ratio_terms,
    sampled_logp,
    sym_log_softmax,
    sym_number,
    sym_ratio,
)
from theorycheck.symbolic import Frozen

# --- cispo ----------------------------------------------------------------------------


def cispo_loss(
    logits: ArrayLike,
    sampled: int,
    *,
    adv: float,
    behavior_logp: ArrayLike,
    low: float = 0.5,
    high: float = 5.0,
    log_ratio_clamp: float = LOG_RATIO_CLAMP,
) -> jax.Array:
    r"""CISPO: clipped, detached importance weight on the REINFORCE term.

    .. math::
        \ell = -\operatorname{sg}\big(\operatorname{clip}(r, l, u)\big)\,\hat A
        \log\pi_k

    Args:
        logits: ``[V]`` logits z.
        sampled: sampled token k.
        adv: advantage Â.
        behavior_logp: ``[V]`` log μ.
        low: absolute lower bound l on r (survey: 0.5).
        high: absolute upper bound u on r (survey: 5).
        log_ratio_clamp: guard C on log r (value only).

    Returns:
        A scalar loss.

    References:
        MiniMax-M1 (arXiv 2506.13585), §3, Eq. 4 (CISPO); survey, "CISPO".
    """
    ratio = jnp.exp(log_ratio(logits, sampled, behavior_logp, log_ratio_clamp))
    weight = jax.lax.stop_gradient(jnp.clip(ratio, low, high))
    return -weight * adv * sampled_logp(logits, sampled)


def cispo_symbolic(
    z,
    sampled,
    *,
    adv,
    behavior_logp,
    low=0.5,
    high=5.0,
    log_ratio_clamp=LOG_RATIO_CLAMP,
):
    """SymPy spec of :func:`cispo_loss`."""
    r = sym_ratio(z, sampled, behavior_logp, log_ratio_clamp)
    w = Frozen(sp.Max(sym_number(low), sp.Min(r, sym_number(high))))
    return -w * sym_number(adv) * sym_log_softmax(z, sampled)


def cispo_coefficient(p, q, adv, *, low=0.5, high=5.0, log_ratio_clamp=LOG_RATIO_CLAMP):
    r""":math:`c = \hat A\,\operatorname{clip}(r, l, u)`; never gated.

    Args:
        p: current probability.
        q: behavior probability.
        adv: advantage Â.
        low: l.
        high: u.
        log_ratio_clamp: guard C (clamps the weight's value only).

    Returns:
        ``(c, gated)`` arrays.

    References:
        Survey, "CISPO".
    """
    _, r, _ = ratio_terms(p, q, log_ratio_clamp)
    c = jnp.asarray(adv) * jnp.clip(r, low, high)
    return c, jnp.zeros(c.shape, dtype=bool)


# --- glm5 -----------------------------------------------------------------------------


def glm5_loss(
    logits: ArrayLike,
    sampled: int,
    *,
    adv: float,
    behavior_logp: ArrayLike,
    low: float = 0.5,
    high: float = 5.0,
    log_ratio_clamp: float = LOG_RATIO_CLAMP,
) -> jax.Array:
    r"""GLM-5 rollout-ratio rejection: keep the detached ratio inside (l, u), else 0.

    .. math::
        \ell = -\operatorname{sg}\big(r\,\mathbf 1[l < r < u]\big)\,\hat A\log\pi_k

    Args:
        logits: ``[V]`` logits z.
        sampled: sampled token k.
        adv: advantage Â.
        behavior_logp: ``[V]`` log μ (the rollout policy).
        low: l (survey: 0.5).
        high: u (survey: 5).
        log_ratio_clamp: guard C on log r (value only).

    Returns:
        A scalar loss.

    References:
        GLM-5 (2026), §4.1.2 (direct rollout importance ratio with token rejection);
        survey, "GLM-5 async rejection"; SkyRL ``rollout_is`` (strict inequalities).
    """
    ratio = jnp.exp(log_ratio(logits, sampled, behavior_logp, log_ratio_clamp))
    keep = (ratio > low) & (ratio < high)
    weight = jax.lax.stop_gradient(jnp.where(keep, ratio, 0.0))
    return -weight * adv * sampled_logp(logits, sampled)


def glm5_symbolic(
    z,
    sampled,
    *,
    adv,
    behavior_logp,
    low=0.5,
    high=5.0,
    log_ratio_clamp=LOG_RATIO_CLAMP,
):
    """SymPy spec of :func:`glm5_loss`."""
    r = sym_ratio(z, sampled, behavior_logp, log_ratio_clamp)
    inside = sp.And(r > sym_number(low), r < sym_number(high))
    w = Frozen(sp.Piecewise((r, inside), (0, True)))
    return -w * sym_number(adv) * sym_log_softmax(z, sampled)


def glm5_coefficient(p, q, adv, *, low=0.5, high=5.0, log_ratio_clamp=LOG_RATIO_CLAMP):
    r""":math:`c = \hat A\,r\,\mathbf 1[l<r<u]`; gated where r leaves (l, u).

    Args:
        p: current probability.
        q: behavior probability.
        adv: advantage Â.
        low: l.
        high: u.
        log_ratio_clamp: guard C (value only).

    Returns:
        ``(c, gated)`` arrays.

    References:
        Survey, "GLM-5 async rejection".
    """
    _, r, _ = ratio_terms(p, q, log_ratio_clamp)
    gated = ~((r > low) & (r < high))
    gated = jnp.broadcast_to(gated, jnp.broadcast_shapes(gated.shape, jnp.shape(adv)))
    return jnp.where(gated, 0.0, jnp.asarray(adv) * r), gated

r"""SAPO: a smooth sigmoid gate in place of PPO's hard clip.

.. math::
    h = \sigma\big(\tau(r - 1)\big), \qquad j = \frac{4}{\tau} h\hat A, \qquad
    c = 4\hat A\,r\,h(1-h)

with :math:`\tau = \tau_+` for :math:`\hat A > 0` and :math:`\tau_-` otherwise. At
:math:`r = 1` the attenuation :math:`4h(1-h)` is 1, so :math:`c = \hat A`. No token is
gated; the weight decays smoothly away from r = 1.
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
    sym_number,
    sym_ratio,
)


def sapo_loss(
    logits: ArrayLike,
    sampled: int,
    *,
    adv: float,
    behavior_logp: ArrayLike,
    tau_pos: float = 1.0,
    tau_neg: float = 1.05,
    log_ratio_clamp: float = LOG_RATIO_CLAMP,
) -> jax.Array:
    r"""SAPO loss of one token.

    .. math::
        \ell = -\frac{4}{\tau}\,\sigma\big(\tau(r-1)\big)\,\hat A

    Args:
        logits: ``[V]`` logits z.
        sampled: sampled token k.
        adv: advantage Â.
        behavior_logp: ``[V]`` log μ.
        tau_pos: τ for Â > 0.
        tau_neg: τ for Â ≤ 0 (verl and SkyRL use τ_neg at Â = 0).
        log_ratio_clamp: guard C on log r.

    Returns:
        A scalar loss.

    References:
        Soft Adaptive Policy Optimization (arXiv 2511.20347), Eq. 5; survey, "SAPO";
        verl ``compute_policy_loss_sapo``.
    """
    ratio = jnp.exp(log_ratio(logits, sampled, behavior_logp, log_ratio_clamp))
    tau = jnp.where(adv > 0, tau_pos, tau_neg)
    return -(4.0 / tau) * jax.nn.sigmoid(tau * (ratio - 1.0)) * adv


def sapo_symbolic(
    z,
    sampled,
    *,
    adv,
    behavior_logp,
    tau_pos=1.0,
    tau_neg=1.05,
    log_ratio_clamp=LOG_RATIO_CLAMP,
):
    """SymPy spec of :func:`sapo_loss` (sigmoid written as 1/(1+e^{-x}))."""
    a = sym_number(adv)
    tau = sym_number(tau_pos) if a > 0 else sym_number(tau_neg)
    r = sym_ratio(z, sampled, behavior_logp, log_ratio_clamp)
    return -(4 / tau) / (1 + sp.exp(-tau * (r - 1))) * a


def sapo_coefficient(
    p, q, adv, *, tau_pos=1.0, tau_neg=1.05, log_ratio_clamp=LOG_RATIO_CLAMP
):
    r""":math:`c = 4\hat A r h(1-h)`, :math:`h = \sigma(\tau(r-1))`; never gated.

    Args:
        p: current probability.
        q: behavior probability.
        adv: advantage Â.
        tau_pos: τ₊.
        tau_neg: τ₋.
        log_ratio_clamp: guard C (c = 0 where it saturates).

    Returns:
        ``(c, gated)`` arrays.

    References:
        Survey, "SAPO" (c_SAPO).
    """
    _, r, sat = ratio_terms(p, q, log_ratio_clamp)
    adv = jnp.asarray(adv)
    tau = jnp.where(adv > 0, tau_pos, tau_neg)
    h = jax.nn.sigmoid(tau * (r - 1.0))
    c = jnp.where(sat, 0.0, 4.0 * adv * r * h * (1.0 - h))
    return c, jnp.zeros(c.shape, dtype=bool)

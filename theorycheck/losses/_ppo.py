r"""REINFORCE, the plain importance-sampled surrogate, and the PPO clip family.

Convention (survey notation): the objective of one token is :math:`j`, the registered
``loss`` is :math:`-j`, and the coefficient is :math:`c = \partial j /
\partial\log\pi_k`,
so that :math:`\nabla_z j = c\,(e_k - \pi)`.

* ``pg``: :math:`j = \hat A \log\pi_k`, :math:`c = \hat A`.
* ``is_pg``: :math:`j = r\hat A`, :math:`c = r\hat A`.
* ``ppo`` / ``dapo``: :math:`j = \min(r\hat A, \operatorname{clip}(r, 1-\epsilon_l,
  1+\epsilon_h)\hat A)`; :math:`c = 0` if (:math:`\hat A>0, r>1+\epsilon_h`) or
  (:math:`\hat A<0, r<1-\epsilon_l`), else :math:`r\hat A`.
* ``dual_clip``: for :math:`\hat A<0`, :math:`j = \max(j_{PPO}, \kappa\hat A)`; also
  :math:`c = 0` when :math:`r > \kappa`.

Ties at a clip boundary keep the token (the inequalities above are strict); the JAX
forms use ``where`` on the same strict tests so that autodiff agrees with :math:`c`
there too.
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


def _ppo_objective(ratio, adv, lo, hi):
    clipped = ((adv > 0) & (ratio > hi)) | ((adv < 0) & (ratio < lo))
    bound = jnp.where(adv > 0, hi, lo)
    return jnp.where(clipped, adv * bound, adv * ratio)


# --- pg -------------------------------------------------------------------------------


def pg_loss(logits: ArrayLike, sampled: int, *, adv: float) -> jax.Array:
    r"""REINFORCE loss of one token.

    .. math::
        \ell = -\hat A \log\pi_k(z)

    Args:
        logits: ``[V]`` logits z.
        sampled: sampled token k.
        adv: advantage Â.

    Returns:
        A scalar loss.

    References:
        Williams (1992); survey, "Base surrogate" (the on-policy case r = 1).
    """
    return -adv * sampled_logp(logits, sampled)


def pg_symbolic(z, sampled, *, adv):
    """SymPy spec of :func:`pg_loss`."""
    return -sym_number(adv) * sym_log_softmax(z, sampled)


def pg_coefficient(p, q, adv):
    r""":math:`c = \hat A`; never gated (p and q are accepted for a uniform
    signature)."""
    c = jnp.zeros_like(jnp.asarray(p) / jnp.asarray(q)) + adv
    return c, jnp.zeros(c.shape, dtype=bool)


# --- is_pg ----------------------------------------------------------------------------


def is_pg_loss(
    logits: ArrayLike,
    sampled: int,
    *,
    adv: float,
    behavior_logp: ArrayLike,
    log_ratio_clamp: float = LOG_RATIO_CLAMP,
) -> jax.Array:
    r"""Importance-sampled policy-gradient loss.

    .. math::
        \ell = -r\hat A, \qquad r = \pi_k/\mu_k

    Args:
        logits: ``[V]`` logits z.
        sampled: sampled token k.
        adv: advantage Â.
        behavior_logp: ``[V]`` log μ.
        log_ratio_clamp: guard C on log r.

    Returns:
        A scalar loss.

    References:
        DPPO (arXiv 2602.04879) Eq. 3/5 ("PG-IS"); survey, "Base surrogate" j = r A.
    """
    ratio = jnp.exp(log_ratio(logits, sampled, behavior_logp, log_ratio_clamp))
    return -adv * ratio


def is_pg_symbolic(z, sampled, *, adv, behavior_logp, log_ratio_clamp=LOG_RATIO_CLAMP):
    """SymPy spec of :func:`is_pg_loss`."""
    return -sym_number(adv) * sym_ratio(z, sampled, behavior_logp, log_ratio_clamp)


def is_pg_coefficient(p, q, adv, *, log_ratio_clamp=LOG_RATIO_CLAMP):
    r""":math:`c = r\hat A` (0 where the guard saturates); never gated."""
    _, r, sat = ratio_terms(p, q, log_ratio_clamp)
    c = jnp.where(sat, 0.0, adv * r)
    return c, jnp.zeros(c.shape, dtype=bool)


# --- ppo / dapo -----------------------------------------------------------------------


def ppo_loss(
    logits: ArrayLike,
    sampled: int,
    *,
    adv: float,
    behavior_logp: ArrayLike,
    eps_low: float = 0.2,
    eps_high: float = 0.2,
    log_ratio_clamp: float = LOG_RATIO_CLAMP,
) -> jax.Array:
    r"""PPO's clipped surrogate with an asymmetric window.

    .. math::
        \ell = -\min\big(r\hat A,\ \operatorname{clip}(r, 1-\epsilon_l, 1+\epsilon_h)
        \hat A\big)

    Args:
        logits: ``[V]`` logits z.
        sampled: sampled token k.
        adv: advantage Â.
        behavior_logp: ``[V]`` log μ (the ratio anchor).
        eps_low: ε_l, lower clip 1 − ε_l.
        eps_high: ε_h, upper clip 1 + ε_h.
        log_ratio_clamp: guard C on log r.

    Returns:
        A scalar loss.

    References:
        Schulman et al. (2017), Eq. 7; DPPO (arXiv 2602.04879) Eq. 9; survey, "PPO".
    """
    ratio = jnp.exp(log_ratio(logits, sampled, behavior_logp, log_ratio_clamp))
    return -_ppo_objective(ratio, adv, 1.0 - eps_low, 1.0 + eps_high)


def _sym_ppo_objective(ratio, adv, eps_low, eps_high):
    a = sym_number(adv)
    lo, hi = 1 - sym_number(eps_low), 1 + sym_number(eps_high)
    return sp.Min(ratio * a, sp.Max(lo, sp.Min(ratio, hi)) * a)


def ppo_symbolic(
    z,
    sampled,
    *,
    adv,
    behavior_logp,
    eps_low=0.2,
    eps_high=0.2,
    log_ratio_clamp=LOG_RATIO_CLAMP,
):
    """SymPy spec of :func:`ppo_loss` (min / clip form)."""
    ratio = sym_ratio(z, sampled, behavior_logp, log_ratio_clamp)
    return -_sym_ppo_objective(ratio, adv, eps_low, eps_high)


def ppo_coefficient(
    p, q, adv, *, eps_low=0.2, eps_high=0.2, log_ratio_clamp=LOG_RATIO_CLAMP
):
    r"""PPO coefficient.

    .. math::
        c = \begin{cases} 0 & \hat A>0,\ r>1+\epsilon_h \text{ or }
        \hat A<0,\ r<1-\epsilon_l \\ r\hat A & \text{otherwise}\end{cases}

    Args:
        p: current probability of the sampled token.
        q: behavior probability.
        adv: advantage Â.
        eps_low: ε_l.
        eps_high: ε_h.
        log_ratio_clamp: guard C (c = 0 without gating where |log r| > C).

    Returns:
        ``(c, gated)`` arrays.

    References:
        Survey, "PPO" (c_PPO).
    """
    raw, r, sat = ratio_terms(p, q, log_ratio_clamp)
    adv = jnp.asarray(adv)
    gated = ((adv > 0) & (r > 1.0 + eps_high)) | ((adv < 0) & (r < 1.0 - eps_low))
    c = jnp.where(gated | sat, 0.0, adv * r)
    return c, gated


def dapo_loss(
    logits: ArrayLike,
    sampled: int,
    *,
    adv: float,
    behavior_logp: ArrayLike,
    eps_low: float = 0.2,
    eps_high: float = 0.28,
    log_ratio_clamp: float = LOG_RATIO_CLAMP,
) -> jax.Array:
    r"""DAPO clip-higher: PPO's surrogate with a raised upper bound (1.28).

    .. math::
        \ell = -\min\big(r\hat A,\ \operatorname{clip}(r, 1-\epsilon_l, 1+\epsilon_h)
        \hat A\big), \quad \epsilon_h = 0.28

    Args:
        logits: ``[V]`` logits z.
        sampled: sampled token k.
        adv: advantage Â.
        behavior_logp: ``[V]`` log μ.
        eps_low: ε_l.
        eps_high: ε_h.
        log_ratio_clamp: guard C on log r.

    Returns:
        A scalar loss.

    References:
        DAPO (arXiv 2503.14476), Eq. 8 (clip-higher); survey, "DAPO".
    """
    return ppo_loss(
        logits,
        sampled,
        adv=adv,
        behavior_logp=behavior_logp,
        eps_low=eps_low,
        eps_high=eps_high,
        log_ratio_clamp=log_ratio_clamp,
    )


def dapo_symbolic(
    z,
    sampled,
    *,
    adv,
    behavior_logp,
    eps_low=0.2,
    eps_high=0.28,
    log_ratio_clamp=LOG_RATIO_CLAMP,
):
    """SymPy spec of :func:`dapo_loss`."""
    return ppo_symbolic(
        z,
        sampled,
        adv=adv,
        behavior_logp=behavior_logp,
        eps_low=eps_low,
        eps_high=eps_high,
        log_ratio_clamp=log_ratio_clamp,
    )


def dapo_coefficient(
    p, q, adv, *, eps_low=0.2, eps_high=0.28, log_ratio_clamp=LOG_RATIO_CLAMP
):
    """The PPO coefficient with DAPO's defaults."""
    return ppo_coefficient(
        p, q, adv, eps_low=eps_low, eps_high=eps_high, log_ratio_clamp=log_ratio_clamp
    )


# --- dual_clip ------------------------------------------------------------------------


def dual_clip_loss(
    logits: ArrayLike,
    sampled: int,
    *,
    adv: float,
    behavior_logp: ArrayLike,
    eps_low: float = 0.2,
    eps_high: float = 0.2,
    kappa: float = 3.0,
    log_ratio_clamp: float = LOG_RATIO_CLAMP,
) -> jax.Array:
    r"""Dual-clip PPO: a floor :math:`\kappa\hat A` on negative-advantage terms.

    .. math::
        j = \begin{cases}\max(j_{PPO}, \kappa\hat A) & \hat A < 0\\ j_{PPO} &
        \hat A \ge 0\end{cases}, \qquad \ell = -j, \quad \kappa > 1

    Args:
        logits: ``[V]`` logits z.
        sampled: sampled token k.
        adv: advantage Â.
        behavior_logp: ``[V]`` log μ.
        eps_low: ε_l.
        eps_high: ε_h.
        kappa: κ (verl ``clip_ratio_c``).
        log_ratio_clamp: guard C on log r.

    Returns:
        A scalar loss.

    References:
        Ye et al., "Mastering Complex Control in MOBA Games" (2020) (dual-clip);
        verl ``compute_policy_loss_vanilla`` (always on, κ = 3); survey,
        "Dual-clip PPO".
    """
    ratio = jnp.exp(log_ratio(logits, sampled, behavior_logp, log_ratio_clamp))
    j = _ppo_objective(ratio, adv, 1.0 - eps_low, 1.0 + eps_high)
    floor = (adv < 0) & (ratio > kappa)
    return -jnp.where(floor, kappa * adv, j)


def dual_clip_symbolic(
    z,
    sampled,
    *,
    adv,
    behavior_logp,
    eps_low=0.2,
    eps_high=0.2,
    kappa=3.0,
    log_ratio_clamp=LOG_RATIO_CLAMP,
):
    """SymPy spec of :func:`dual_clip_loss` (``Piecewise`` on the sign of Â)."""
    a = sym_number(adv)
    ratio = sym_ratio(z, sampled, behavior_logp, log_ratio_clamp)
    j = _sym_ppo_objective(ratio, adv, eps_low, eps_high)
    return -sp.Piecewise((sp.Max(j, sym_number(kappa) * a), a < 0), (j, True))


def dual_clip_coefficient(
    p, q, adv, *, eps_low=0.2, eps_high=0.2, kappa=3.0, log_ratio_clamp=LOG_RATIO_CLAMP
):
    r"""Dual-clip coefficient: PPO's, and also :math:`c = 0` for
    :math:`\hat A < 0,\ r > \kappa`.

    Args:
        p: current probability.
        q: behavior probability.
        adv: advantage Â.
        eps_low: ε_l.
        eps_high: ε_h.
        kappa: κ.
        log_ratio_clamp: guard C.

    Returns:
        ``(c, gated)`` arrays.

    References:
        Survey, "Dual-clip PPO" (r = 4, Â = −1, κ = 3 gives c = 0).
    """
    c, gated = ppo_coefficient(
        p, q, adv, eps_low=eps_low, eps_high=eps_high, log_ratio_clamp=log_ratio_clamp
    )
    _, r, _ = ratio_terms(p, q, log_ratio_clamp)
    floor = (jnp.asarray(adv) < 0) & (r > kappa)
    return jnp.where(floor, 0.0, c), gated | floor

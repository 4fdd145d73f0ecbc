r"""GSPO: the clipped surrogate on the sequence ratio, and its token-level form.

The sequence ratio of a response with L valid tokens is the geometric mean

.. math::
    s = \exp\Big(\frac1L\sum_t \log\frac{\pi(y_t)}{\mu(y_t)}\Big), \qquad
    j_{GSPO} = \min\big(s\hat A,\ \operatorname{clip}(s, 1-\epsilon_l, 1+\epsilon_h)
    \hat A\big).

``gspo`` is that sequence objective seen from ONE position t (the other positions'
logits fixed): the other tokens enter through ``other_log_ratio`` =
:math:`\sum_{u\ne t}\log r_u` and ``length`` = L, so :math:`c_t = \hat A s / L`
inside the window, 0 outside.

``gspo_token`` is verl's and SkyRL's GSPO-token: :math:`\log s_t = \log\pi_t -
\operatorname{sg}(\log\pi_t) + \operatorname{sg}(\bar\ell)` with :math:`\bar\ell` the
sequence's mean log ratio (``seq_log_ratio``), clipped like PPO; its value is s and its
coefficient :math:`\hat A s`. Averaged with seq-mean-token-mean (weight 1/L per token)
it has exactly GSPO's gradient (:func:`gspo_sequence_loss` is the whole-response
form used to test that).
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
    sym_log_ratio,
    sym_log_softmax,
    sym_number,
)
from theorycheck.losses._ppo import _ppo_objective, _sym_ppo_objective
from theorycheck.symbolic import Frozen

_GSPO = {"eps_low": 3e-4, "eps_high": 4e-4}
#: verl and SkyRL clamp GSPO-token's log s from above only, at 10
#: (``torch.clamp(log_seq_importance_ratio, max=10.0)``).
LOG_S_CAP = 10.0


def gspo_loss(
    logits: ArrayLike,
    sampled: int,
    *,
    adv: float,
    behavior_logp: ArrayLike,
    other_log_ratio: float = 0.0,
    length: int = 1,
    eps_low: float = _GSPO["eps_low"],
    eps_high: float = _GSPO["eps_high"],
    log_ratio_clamp: float = LOG_RATIO_CLAMP,
) -> jax.Array:
    r"""GSPO's sequence loss as a function of one position's logits.

    .. math::
        s = \exp\big((\log r_t + \textstyle\sum_{u\ne t}\log r_u)/L\big), \qquad
        \ell = -\min\big(s\hat A, \operatorname{clip}(s, 1-\epsilon_l, 1+\epsilon_h)
        \hat A\big)

    Args:
        logits: ``[V]`` logits of position t.
        sampled: sampled token at t.
        adv: the response's advantage Â.
        behavior_logp: ``[V]`` log μ at t.
        other_log_ratio: frozen sum of the other positions' log ratios.
        length: L, the number of valid tokens in the response.
        eps_low: ε_l (survey: 3e-4).
        eps_high: ε_h (survey: 4e-4).
        log_ratio_clamp: guard C on this position's log ratio.

    Returns:
        A scalar loss (the whole response's loss, not divided further).

    References:
        Group Sequence Policy Optimization (arXiv 2507.18071), sequence ratio and
        objective; survey, "GSPO" (c_t = A s / L).
    """
    lr = log_ratio(logits, sampled, behavior_logp, log_ratio_clamp)
    s = jnp.exp((lr + other_log_ratio) / length)
    return -_ppo_objective(s, adv, 1.0 - eps_low, 1.0 + eps_high)


def gspo_symbolic(
    z,
    sampled,
    *,
    adv,
    behavior_logp,
    other_log_ratio=0.0,
    length=1,
    eps_low=_GSPO["eps_low"],
    eps_high=_GSPO["eps_high"],
    log_ratio_clamp=LOG_RATIO_CLAMP,
):
    """SymPy spec of :func:`gspo_loss`."""
    lr = sym_log_ratio(z, sampled, behavior_logp, log_ratio_clamp)
    s = sp.exp((lr + sym_number(other_log_ratio)) / sym_number(length))
    return -_sym_ppo_objective(s, adv, eps_low, eps_high)


def gspo_coefficient(
    p,
    q,
    adv,
    *,
    other_log_ratio=0.0,
    length=1,
    eps_low=_GSPO["eps_low"],
    eps_high=_GSPO["eps_high"],
    log_ratio_clamp=LOG_RATIO_CLAMP,
):
    r""":math:`c_t = \hat A s / L` inside the window, 0 where s is clipped.

    Args:
        p: current probability of the token at t.
        q: its behavior probability.
        adv: advantage Â.
        other_log_ratio: sum of the other positions' log ratios.
        length: L.
        eps_low: ε_l.
        eps_high: ε_h.
        log_ratio_clamp: guard C on this position's log ratio.

    Returns:
        ``(c, gated)`` arrays.

    References:
        Survey, "GSPO".
    """
    _, r, sat = ratio_terms(p, q, log_ratio_clamp)
    s = jnp.exp((jnp.log(r) + other_log_ratio) / length)
    c, gated = _clip_coefficient(s, jnp.asarray(adv), eps_low, eps_high)
    return jnp.where(sat, 0.0, c / length), gated


def _clip_coefficient(s, adv, eps_low, eps_high):
    gated = ((adv > 0) & (s > 1.0 + eps_high)) | ((adv < 0) & (s < 1.0 - eps_low))
    return jnp.where(gated, 0.0, adv * s), gated


def gspo_token_loss(
    logits: ArrayLike,
    sampled: int,
    *,
    adv: float,
    behavior_logp: ArrayLike,
    seq_log_ratio: float | None = None,
    eps_low: float = _GSPO["eps_low"],
    eps_high: float = _GSPO["eps_high"],
    log_ratio_clamp: float = LOG_S_CAP,
) -> jax.Array:
    r"""GSPO-token loss (verl / SkyRL form).

    .. math::
        \log s_t = \min\big(\log\pi_t - \operatorname{sg}(\log\pi_t) +
        \operatorname{sg}(\bar\ell), C\big), \quad
        \ell = -\min\big(s_t\hat A, \operatorname{clip}(s_t, 1-\epsilon_l,
        1+\epsilon_h)\hat A\big)

    Args:
        logits: ``[V]`` logits z.
        sampled: sampled token k.
        adv: advantage Â.
        behavior_logp: ``[V]`` log μ.
        seq_log_ratio: the response's mean log ratio :math:`\bar\ell` (frozen);
            ``None`` = this token's own log ratio (a one-token response).
        eps_low: ε_l.
        eps_high: ε_h.
        log_ratio_clamp: upper clamp C on log s_t (10, as verl and SkyRL; there is
            no lower clamp).

    Returns:
        A scalar loss for this position (reduce with seq-mean-token-mean).

    References:
        GSPO (arXiv 2507.18071), GSPO-token; verl ``compute_policy_loss_gspo``
        (clamp max=10), SkyRL ``gspo_policy_loss`` (clamp max=10).
    """
    logp = sampled_logp(logits, sampled)
    if seq_log_ratio is None:
        seq_log_ratio = logp - jnp.asarray(behavior_logp)[sampled]
    log_s = logp - jax.lax.stop_gradient(logp) + jax.lax.stop_gradient(seq_log_ratio)
    s = jnp.exp(jnp.minimum(log_s, log_ratio_clamp))
    return -_ppo_objective(s, adv, 1.0 - eps_low, 1.0 + eps_high)


def gspo_token_symbolic(
    z,
    sampled,
    *,
    adv,
    behavior_logp,
    seq_log_ratio=None,
    eps_low=_GSPO["eps_low"],
    eps_high=_GSPO["eps_high"],
    log_ratio_clamp=LOG_S_CAP,
):
    """SymPy spec of :func:`gspo_token_loss`."""
    logp = sym_log_softmax(z, sampled)
    if seq_log_ratio is None:
        seq_log_ratio = logp - sym_number(behavior_logp[sampled])
    log_s = logp - Frozen(logp) + Frozen(sym_number(seq_log_ratio))
    c = sym_number(log_ratio_clamp)
    if c != sp.oo:
        log_s = sp.Min(log_s, c)
    return -_sym_ppo_objective(sp.exp(log_s), adv, eps_low, eps_high)


def gspo_token_coefficient(
    p,
    q,
    adv,
    *,
    seq_log_ratio=None,
    eps_low=_GSPO["eps_low"],
    eps_high=_GSPO["eps_high"],
    log_ratio_clamp=LOG_S_CAP,
):
    r""":math:`c = \hat A s` inside the window (s from ``seq_log_ratio``), else 0.

    Args:
        p: current probability.
        q: behavior probability.
        adv: advantage Â.
        seq_log_ratio: the response's mean log ratio; ``None`` = log(p/q).
        eps_low: ε_l.
        eps_high: ε_h.
        log_ratio_clamp: upper clamp C on log s (10).

    Returns:
        ``(c, gated)`` arrays.

    References:
        verl ``compute_policy_loss_gspo``; survey, "GSPO" (before the 1/L reduction).
    """
    if seq_log_ratio is None:
        seq_log_ratio = jnp.log(jnp.asarray(p)) - jnp.log(jnp.asarray(q))
    seq_log_ratio = jnp.asarray(seq_log_ratio) + jnp.zeros_like(jnp.asarray(p) / q)
    sat = seq_log_ratio > log_ratio_clamp
    s = jnp.exp(jnp.minimum(seq_log_ratio, log_ratio_clamp))
    c, gated = _clip_coefficient(s, jnp.asarray(adv), eps_low, eps_high)
    return jnp.where(sat, 0.0, c), gated


def gspo_sequence_loss(
    logits: ArrayLike,
    sampled: ArrayLike,
    *,
    adv: float,
    behavior_logp: ArrayLike,
    mask: ArrayLike,
    eps_low: float = _GSPO["eps_low"],
    eps_high: float = _GSPO["eps_high"],
) -> jax.Array:
    r"""GSPO's loss of a whole response (gradient through the mean, as TRL and Miles).

    .. math::
        \ell = -\min\big(s\hat A, \operatorname{clip}(s, 1-\epsilon_l, 1+\epsilon_h)
        \hat A\big), \quad s = \exp\Big(\frac{\sum_t m_t\log r_t}{\max(\sum_t m_t,
        1)}\Big)

    Args:
        logits: ``[T, V]`` logits of the response.
        sampled: ``[T]`` sampled tokens.
        adv: the response's advantage.
        behavior_logp: ``[T, V]`` log μ.
        mask: ``[T]`` response mask (1 = valid).
        eps_low: ε_l.
        eps_high: ε_h.

    Returns:
        A scalar loss.

    Examples:
        >>> import numpy as np
        >>> z = np.zeros((2, 3))
        >>> mu = np.log(np.full((2, 3), 1 / 3))
        >>> float(gspo_sequence_loss(z, np.array([0, 1]), adv=1.0, behavior_logp=mu,
        ...                          mask=np.array([1.0, 1.0])))
        -1.0

    References:
        GSPO (arXiv 2507.18071); TRL ``importance_sampling_level="sequence"``.
    """
    logp = jnp.take_along_axis(
        jax.nn.log_softmax(logits, axis=-1), jnp.asarray(sampled)[:, None], axis=-1
    )[:, 0]
    logq = jnp.take_along_axis(
        jnp.asarray(behavior_logp), jnp.asarray(sampled)[:, None], axis=-1
    )[:, 0]
    mask = jnp.asarray(mask, dtype=logp.dtype)
    mean = jnp.sum(mask * (logp - logq)) / jnp.maximum(jnp.sum(mask), 1.0)
    return -_ppo_objective(jnp.exp(mean), adv, 1.0 - eps_low, 1.0 + eps_high)

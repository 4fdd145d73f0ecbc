r"""TRL's sequence-weighted loss types: LUSPO and VESPO.

* ``luspo``: GSPO's clipped surrogate on the sequence ratio
  :math:`s = \exp(\frac1L\sum_t\ell_t)`, multiplied by the response length L
  (``loss = mean_i(L_i |y_i|)``). Seen from one position t the length cancels the
  1/L of :math:`\partial s/\partial\ell_t`: :math:`c_t = \hat A s` inside the window.
* ``vespo``: a detached Gamma weight of the **product** sequence ratio
  :math:`w = \exp(\sum_t \operatorname{clip}(\ell_t, \pm 20))` (then clamped to
  :math:`[10^{-8}, e^{20}]`),
  :math:`\varphi(w) = \exp(\lambda + k\log w - \lambda w)` (so :math:`\varphi(1) = 1`),
  on the REINFORCE term: :math:`j = \operatorname{sg}(\varphi)\hat A\log\pi_k`,
  :math:`c = \hat A\varphi`, with :math:`(k, \lambda) = (2, 3)` for Â ≥ 0 and
  :math:`(3, 2)` for Â < 0.

References: TRL ``GRPOTrainer._compute_loss`` and ``get_gamma_weights``
(trl/trainer/grpo_trainer.py at huggingface/trl f2cd577).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import sympy as sp
from jax.typing import ArrayLike

from theorycheck.losses._common import (
    log_ratio,
    sampled_logp,
    sym_log_ratio,
    sym_log_softmax,
    sym_number,
)
from theorycheck.losses._ppo import _ppo_objective, _sym_ppo_objective
from theorycheck.symbolic import Frozen

NO_CLAMP = math.inf
#: TRL clamps log w to [log 1e-8, 20] and each token's log ratio to +-20.
LOG_W_LOW = math.log(1e-8)
LOG_W_HIGH = 20.0

# --- luspo ----------------------------------------------------------------------------


def luspo_loss(
    logits: ArrayLike,
    sampled: int,
    *,
    adv: float,
    behavior_logp: ArrayLike,
    other_log_ratio: float = 0.0,
    length: int = 1,
    eps_low: float = 0.2,
    eps_high: float = 0.2,
) -> jax.Array:
    r"""LUSPO: GSPO's sequence loss times the response length, from one position.

    .. math::
        s = \exp\big((\ell_t + \textstyle\sum_{u\ne t}\ell_u)/L\big), \quad
        \ell_{loss} = -L\min\big(s\hat A, \operatorname{clip}(s, 1-\epsilon_l,
        1+\epsilon_h)\hat A\big)

    Args:
        logits: ``[V]`` logits of position t.
        sampled: sampled token at t.
        adv: the response's advantage Â.
        behavior_logp: ``[V]`` log μ at t.
        other_log_ratio: frozen sum of the other positions' log ratios.
        length: L = |y|.
        eps_low: ε_l (TRL ``epsilon``, 0.2).
        eps_high: ε_h (TRL ``epsilon_high``, falling back to ``epsilon``).

    Returns:
        A scalar loss (TRL then takes the mean over responses and divides by the
        gradient accumulation steps).

    References:
        TRL ``loss_type="luspo"`` with ``importance_sampling_level="sequence"``.
    """
    lr = log_ratio(logits, sampled, behavior_logp, NO_CLAMP)
    s = jnp.exp((lr + other_log_ratio) / length)
    return -length * _ppo_objective(s, adv, 1.0 - eps_low, 1.0 + eps_high)


def luspo_symbolic(
    z,
    sampled,
    *,
    adv,
    behavior_logp,
    other_log_ratio=0.0,
    length=1,
    eps_low=0.2,
    eps_high=0.2,
):
    """SymPy spec of :func:`luspo_loss`."""
    lr = sym_log_ratio(z, sampled, behavior_logp, NO_CLAMP)
    n = sym_number(length)
    s = sp.exp((lr + sym_number(other_log_ratio)) / n)
    return -n * _sym_ppo_objective(s, adv, eps_low, eps_high)


def luspo_coefficient(
    p, q, adv, *, other_log_ratio=0.0, length=1, eps_low=0.2, eps_high=0.2
):
    r""":math:`c_t = \hat A s` inside the window (the length cancels), 0 if clipped.

    Args:
        p: current probability at t.
        q: behavior probability at t.
        adv: advantage Â.
        other_log_ratio: the other positions' log ratios.
        length: L.
        eps_low: ε_l.
        eps_high: ε_h.

    Returns:
        ``(c, gated)`` arrays.
    """
    adv = jnp.asarray(adv)
    lr = jnp.log(jnp.asarray(p)) - jnp.log(jnp.asarray(q))
    s = jnp.exp((lr + other_log_ratio) / length)
    gated = ((adv > 0) & (s > 1.0 + eps_high)) | ((adv < 0) & (s < 1.0 - eps_low))
    return jnp.where(gated, 0.0, adv * s), gated


# --- vespo ----------------------------------------------------------------------------


def _log_w(lr, seq_log_ratio):
    token = jnp.clip(lr, -20.0, 20.0)
    total = token if seq_log_ratio is None else seq_log_ratio
    return jnp.clip(total, LOG_W_LOW, LOG_W_HIGH)


def _phi(log_w, adv, k_pos, lambda_pos, k_neg, lambda_neg):
    nonneg = jnp.asarray(adv) >= 0
    k = jnp.where(nonneg, k_pos, k_neg)
    lam = jnp.maximum(jnp.where(nonneg, lambda_pos, lambda_neg), 1e-4)
    return jnp.exp(lam + k * log_w - lam * jnp.exp(log_w))


def vespo_loss(
    logits: ArrayLike,
    sampled: int,
    *,
    adv: float,
    behavior_logp: ArrayLike,
    seq_log_ratio: float | None = None,
    k_pos: float = 2.0,
    lambda_pos: float = 3.0,
    k_neg: float = 3.0,
    lambda_neg: float = 2.0,
) -> jax.Array:
    r"""VESPO: a detached Gamma weight of the sequence ratio on REINFORCE.

    .. math::
        \log w = \operatorname{clip}\big(\textstyle\sum_t\operatorname{clip}(\ell_t,
        \pm 20), \log 10^{-8}, 20\big), \quad
        \varphi = e^{\lambda + k\log w - \lambda w}, \quad
        \ell_{loss} = -\operatorname{sg}(\varphi)\,\hat A\log\pi_k

    Args:
        logits: ``[V]`` logits z.
        sampled: sampled token k.
        adv: advantage Â.
        behavior_logp: ``[V]`` log μ.
        seq_log_ratio: the response's summed (clamped) log ratio
            :math:`\sum_t\operatorname{clip}(\ell_t, \pm20)`, frozen; ``None`` = this
            token's own (a one-token response).
        k_pos: k for Â ≥ 0 (2).
        lambda_pos: λ for Â ≥ 0 (3).
        k_neg: k for Â < 0 (3).
        lambda_neg: λ for Â < 0 (2).

    Returns:
        A scalar loss.

    References:
        TRL ``get_gamma_weights`` and ``loss_type="vespo"``.
    """
    lr = log_ratio(logits, sampled, behavior_logp, NO_CLAMP)
    log_w = jax.lax.stop_gradient(_log_w(lr, seq_log_ratio))
    phi = _phi(log_w, adv, k_pos, lambda_pos, k_neg, lambda_neg)
    return -jax.lax.stop_gradient(phi) * adv * sampled_logp(logits, sampled)


def vespo_symbolic(
    z,
    sampled,
    *,
    adv,
    behavior_logp,
    seq_log_ratio=None,
    k_pos=2.0,
    lambda_pos=3.0,
    k_neg=3.0,
    lambda_neg=2.0,
):
    """SymPy spec of :func:`vespo_loss`."""
    a = sym_number(adv)
    if seq_log_ratio is None:
        lr = sym_log_ratio(z, sampled, behavior_logp, 20.0)
    else:
        lr = sym_number(seq_log_ratio)
    log_w = sp.Min(sp.Max(lr, sp.log(sp.Rational(1, 10**8))), 20)
    k, lam = (k_pos, lambda_pos) if a >= 0 else (k_neg, lambda_neg)
    k, lam = sym_number(k), sp.Max(sym_number(lam), sp.Rational(1, 10**4))
    phi = sp.exp(lam + k * log_w - lam * sp.exp(log_w))
    return -Frozen(phi) * a * sym_log_softmax(z, sampled)


def vespo_coefficient(
    p,
    q,
    adv,
    *,
    seq_log_ratio=None,
    k_pos=2.0,
    lambda_pos=3.0,
    k_neg=3.0,
    lambda_neg=2.0,
):
    r""":math:`c = \hat A\varphi(w)`; never gated (φ → 0 smoothly).

    Args:
        p: current probability.
        q: behavior probability.
        adv: advantage Â.
        seq_log_ratio: the response's summed log ratio; ``None`` = log(p/q).
        k_pos: k for Â ≥ 0.
        lambda_pos: λ for Â ≥ 0.
        k_neg: k for Â < 0.
        lambda_neg: λ for Â < 0.

    Returns:
        ``(c, gated)`` arrays.
    """
    lr = jnp.log(jnp.asarray(p)) - jnp.log(jnp.asarray(q))
    log_w = _log_w(lr, None if seq_log_ratio is None else jnp.asarray(seq_log_ratio))
    log_w = log_w + jnp.zeros_like(lr)
    phi = _phi(log_w, adv, k_pos, lambda_pos, k_neg, lambda_neg)
    c = jnp.asarray(adv) * phi
    return c, jnp.zeros(c.shape, dtype=bool)

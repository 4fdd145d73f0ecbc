r"""verl's other loss modes: DRO, GMPO (``geo_mean``), Clip-Cov and KL-Cov.

Per position, with :math:`\ell = \log\pi_k - \log\mu_k` (μ the ratio anchor, verl's
``old_log_prob``) and :math:`r = e^{\ell}`:

* ``dro``: :math:`j = \hat A\log\pi_k - \tfrac\beta2\ell^2`, so
  :math:`c = \hat A - \beta\ell` (never gated).
* ``gmpo``: the geometric-mean sequence ratio :math:`\rho = \exp(\frac1L\sum_t
  \ell^*_t)` with the log ratio clipped one-sidedly by the advantage's sign
  (:math:`\ell^* = \min(\ell, \epsilon_h)` for Â > 0, :math:`\max(\ell, -\epsilon_l)`
  for Â < 0); :math:`j = \hat A\rho`, seen from one position t:
  :math:`c_t = \hat A\rho/L`, gated where :math:`\ell_t` is clipped.
* ``clip_cov``: PPO's clipped surrogate, no dual-clip, no log-ratio clamp, with a
  token *selected* (``selected = 1``) having its loss multiplied by 0. **Random:** verl
  and SkyRL draw the selected tokens with ``torch.randperm`` among the unclipped
  valid tokens whose centred covariance
  :math:`(\hat A - \bar A)(\log\pi - \overline{\log\pi})` lies in
  :math:`(lb, ub)`, up to :math:`\max(\lfloor \text{ratio}\cdot N\rfloor, 1)` of them:
  the selection is an input here (:func:`cov_scores` gives the covariances).
* ``kl_cov``: :math:`j = \hat A r - \kappa\,|\ell|\,\text{selected}`, no clip at all;
  :math:`c = \hat A r - \kappa\operatorname{sgn}(\ell)\,\text{selected}`. The selection
  is the top :math:`\max(\lfloor\text{ratio}\cdot N\rfloor, 1)` tokens by covariance
  (``torch.topk``): deterministic up to ties.

References: verl ``compute_policy_loss_dro``, ``compute_policy_loss_geo_mean``,
``compute_policy_loss_clip_cov``, ``compute_policy_loss_kl_cov``
(verl/trainer/ppo/core_algos.py at verl-project/verl 1dda039; DRO added in ddfbf4e,
#7245, 2026-08-04); GMPO arXiv 2507.20673; Clip-Cov / KL-Cov arXiv 2505.22617.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import sympy as sp
from jax.typing import ArrayLike

from theorycheck.losses._common import (
    log_ratio,
    ratio_terms,
    sampled_logp,
    sym_log_ratio,
    sym_log_softmax,
    sym_number,
)
from theorycheck.losses._ppo import _ppo_objective, _sym_ppo_objective

NO_CLAMP = math.inf
#: verl's GMPO example (examples/gmpo_trainer) and the GMPO paper: log-space 0.4.
GMPO_EPS = 0.4

# --- dro ------------------------------------------------------------------------------


def dro_loss(
    logits: ArrayLike,
    sampled: int,
    *,
    adv: float,
    behavior_logp: ArrayLike,
    beta: float = 1.0,
) -> jax.Array:
    r"""DRO: REINFORCE with a quadratic penalty on the log ratio.

    .. math::
        \ell_{loss} = -\big[\hat A\log\pi_k - \tfrac\beta2(\log\pi_k - \log\mu_k)^2\big]

    Args:
        logits: ``[V]`` logits z.
        sampled: sampled token k.
        adv: advantage Â.
        behavior_logp: ``[V]`` log μ (verl: ``old_log_prob``).
        beta: β > 0 (verl ``policy_loss.dro_beta`` has no default and must be set;
            1 here).

    Returns:
        A scalar loss.

    References:
        verl ``compute_policy_loss_dro`` and docs/algo/dro.md (verl-project/verl
        1dda039).
    """
    lr = log_ratio(logits, sampled, behavior_logp, NO_CLAMP)
    return -(adv * sampled_logp(logits, sampled) - 0.5 * beta * lr**2)


def dro_symbolic(z, sampled, *, adv, behavior_logp, beta=1.0):
    """SymPy spec of :func:`dro_loss`."""
    lr = sym_log_ratio(z, sampled, behavior_logp, NO_CLAMP)
    return -(
        sym_number(adv) * sym_log_softmax(z, sampled) - sym_number(beta) / 2 * lr**2
    )


def dro_coefficient(p, q, adv, *, beta=1.0):
    r""":math:`c = \hat A - \beta\log(p/q)`; never gated.

    Args:
        p: current probability.
        q: behavior probability.
        adv: advantage Â.
        beta: β.

    Returns:
        ``(c, gated)`` arrays.
    """
    c = jnp.asarray(adv) - beta * (jnp.log(jnp.asarray(p)) - jnp.log(jnp.asarray(q)))
    return c, jnp.zeros(c.shape, dtype=bool)


# --- gmpo -----------------------------------------------------------------------------


def _gmpo_clipped(lr, adv, eps_low, eps_high):
    up = (adv > 0) & (lr > eps_high)
    down = (adv < 0) & (lr < -eps_low)
    return up | down


def gmpo_loss(
    logits: ArrayLike,
    sampled: int,
    *,
    adv: float,
    behavior_logp: ArrayLike,
    other_log_ratio: float = 0.0,
    length: int = 1,
    eps_low: float = GMPO_EPS,
    eps_high: float = GMPO_EPS,
) -> jax.Array:
    r"""GMPO's sequence loss as a function of one position's logits.

    .. math::
        \ell^*_t = \begin{cases}\min(\ell_t, \epsilon_h) & \hat A > 0\\
        \max(\ell_t, -\epsilon_l) & \hat A < 0\end{cases}, \quad
        \rho = \exp\Big(\frac{\ell^*_t + \sum_{u\ne t}\ell^*_u}{L}\Big), \quad
        \ell_{loss} = -\hat A\rho

    Args:
        logits: ``[V]`` logits of position t.
        sampled: sampled token at t.
        adv: the response's advantage Â (verl: the masked mean of the token
            advantages).
        behavior_logp: ``[V]`` log μ at t.
        other_log_ratio: frozen sum of the other positions' clipped log ratios.
        length: L (verl divides by L + 1e-8).
        eps_low: ε_l, a bound on the log ratio (not on r).
        eps_high: ε_h.

    Returns:
        A scalar loss (the whole response's loss; verl averages over all rows with
        ``torch.mean``, whatever ``loss_agg_mode``).

    References:
        GMPO (arXiv 2507.20673); verl ``compute_policy_loss_geo_mean`` (no log-ratio
        clamp: the ±20 clamp is commented out).
    """
    lr = log_ratio(logits, sampled, behavior_logp, NO_CLAMP)
    adv = jnp.asarray(adv)
    bound = jnp.where(adv > 0, eps_high, -eps_low)
    clipped = _gmpo_clipped(lr, adv, eps_low, eps_high)
    star = jnp.where(adv == 0, 0.0, jnp.where(clipped, bound, lr))
    return -adv * jnp.exp((star + other_log_ratio) / length)


def gmpo_symbolic(
    z,
    sampled,
    *,
    adv,
    behavior_logp,
    other_log_ratio=0.0,
    length=1,
    eps_low=GMPO_EPS,
    eps_high=GMPO_EPS,
):
    """SymPy spec of :func:`gmpo_loss` (verl's sgn/min form)."""
    lr = sym_log_ratio(z, sampled, behavior_logp, NO_CLAMP)
    a = sym_number(adv)
    sgn = sp.sign(a)
    lr_c = sp.Min(sp.Max(lr, -sym_number(eps_low)), sym_number(eps_high))
    star = sgn * sp.Min(sgn * lr, sgn * lr_c)
    return -a * sp.exp((star + sym_number(other_log_ratio)) / sym_number(length))


def gmpo_coefficient(
    p,
    q,
    adv,
    *,
    other_log_ratio=0.0,
    length=1,
    eps_low=GMPO_EPS,
    eps_high=GMPO_EPS,
):
    r""":math:`c_t = \hat A\rho/L` where :math:`\ell_t` is not clipped, else 0.

    Args:
        p: current probability at t.
        q: behavior probability at t.
        adv: advantage Â.
        other_log_ratio: sum of the other positions' clipped log ratios.
        length: L.
        eps_low: ε_l.
        eps_high: ε_h.

    Returns:
        ``(c, gated)`` arrays.
    """
    adv = jnp.asarray(adv)
    lr = jnp.log(jnp.asarray(p)) - jnp.log(jnp.asarray(q))
    clipped = _gmpo_clipped(lr, adv, eps_low, eps_high)
    bound = jnp.where(adv > 0, eps_high, -eps_low)
    star = jnp.where(clipped, bound, lr)
    rho = jnp.exp((star + other_log_ratio) / length)
    return jnp.where(clipped | (adv == 0), 0.0, adv * rho / length), clipped


# --- clip_cov / kl_cov ----------------------------------------------------------------


def cov_scores(adv: ArrayLike, logp: ArrayLike, mask: ArrayLike) -> np.ndarray:
    r"""Centred covariance scores verl's Clip-Cov and KL-Cov select tokens by.

    .. math::
        \mathrm{cov}_{st} = (\hat A_{st} - \bar A)(\log\pi_{st} - \overline{\log\pi}),

    means over the valid tokens (``mask``); invalid tokens get :math:`-\infty`.

    Args:
        adv: ``[S, T]`` token advantages.
        logp: ``[S, T]`` current log-probabilities of the sampled tokens.
        mask: ``[S, T]`` response mask.

    Returns:
        ``[S, T]`` float64 scores.

    References:
        verl ``compute_policy_loss_clip_cov`` / ``compute_policy_loss_kl_cov``
        (verl-project/verl 1dda039).
    """
    a, lp, m = (np.asarray(x, dtype=np.float64) for x in (adv, logp, mask))
    n = max(m.sum(), 1.0)
    cov = (a - (a * m).sum() / n) * (lp - (lp * m).sum() / n)
    return np.where(m > 0, cov, -np.inf)


def clip_cov_loss(
    logits: ArrayLike,
    sampled: int,
    *,
    adv: float,
    behavior_logp: ArrayLike,
    selected: float = 0.0,
    eps_low: float = 0.2,
    eps_high: float = 0.2,
) -> jax.Array:
    r"""Clip-Cov: PPO's clipped surrogate, zeroed on the randomly selected tokens.

    .. math::
        \ell_{loss} = -(1 - s)\min\big(r\hat A, \operatorname{clip}(r, 1-\epsilon_l,
        1+\epsilon_h)\hat A\big)

    Args:
        logits: ``[V]`` logits z.
        sampled: sampled token k.
        adv: advantage Â.
        behavior_logp: ``[V]`` log μ.
        selected: s = 1 where the random draw picked this token (a frozen input).
        eps_low: ε_l (verl ``clip_ratio_low``, 0.2).
        eps_high: ε_h (0.2).

    Returns:
        A scalar loss.

    References:
        arXiv 2505.22617 (Clip-Cov); verl ``compute_policy_loss_clip_cov`` (no
        log-ratio clamp, no dual-clip; ``torch.randperm`` selection).
    """
    ratio = jnp.exp(log_ratio(logits, sampled, behavior_logp, NO_CLAMP))
    keep = jax.lax.stop_gradient(1.0 - jnp.asarray(selected))
    return -keep * _ppo_objective(ratio, adv, 1.0 - eps_low, 1.0 + eps_high)


def clip_cov_symbolic(
    z, sampled, *, adv, behavior_logp, selected=0.0, eps_low=0.2, eps_high=0.2
):
    """SymPy spec of :func:`clip_cov_loss`."""
    r = sp.exp(sym_log_ratio(z, sampled, behavior_logp, NO_CLAMP))
    keep = 1 - sym_number(selected)
    return -keep * _sym_ppo_objective(r, adv, eps_low, eps_high)


def clip_cov_coefficient(p, q, adv, *, selected=0.0, eps_low=0.2, eps_high=0.2):
    r""":math:`c = (1 - s)\,r\hat A` inside the window, 0 where clipped or selected.

    Args:
        p: current probability.
        q: behavior probability.
        adv: advantage Â.
        selected: s.
        eps_low: ε_l.
        eps_high: ε_h.

    Returns:
        ``(c, gated)`` arrays (a selected token counts as gated).
    """
    r, _, _ = ratio_terms(p, q, NO_CLAMP)
    adv = jnp.asarray(adv)
    clipped = ((adv > 0) & (r > 1.0 + eps_high)) | ((adv < 0) & (r < 1.0 - eps_low))
    gated = clipped | (jnp.asarray(selected) > 0)
    return jnp.where(gated, 0.0, adv * r), gated


def kl_cov_loss(
    logits: ArrayLike,
    sampled: int,
    *,
    adv: float,
    behavior_logp: ArrayLike,
    selected: float = 0.0,
    kl_coef: float = 0.1,
) -> jax.Array:
    r"""KL-Cov: unclipped IS policy gradient with an |log r| penalty on the top-cov
    tokens.

    .. math::
        \ell_{loss} = -r\hat A + \kappa\,s\,|\log\pi_k - \log\mu_k|

    Args:
        logits: ``[V]`` logits z.
        sampled: sampled token k.
        adv: advantage Â.
        behavior_logp: ``[V]`` log μ.
        selected: s = 1 for the tokens among the top-k covariances (frozen input).
        kl_coef: κ (verl ``ppo_kl_coef`` = 0.1; SkyRL 1.0).

    Returns:
        A scalar loss.

    References:
        arXiv 2505.22617 (KL-Cov); verl ``compute_policy_loss_kl_cov``.
    """
    lr = log_ratio(logits, sampled, behavior_logp, NO_CLAMP)
    s = jax.lax.stop_gradient(jnp.asarray(selected))
    return -jnp.exp(lr) * adv + kl_coef * s * jnp.abs(lr)


def kl_cov_symbolic(z, sampled, *, adv, behavior_logp, selected=0.0, kl_coef=0.1):
    """SymPy spec of :func:`kl_cov_loss`."""
    lr = sym_log_ratio(z, sampled, behavior_logp, NO_CLAMP)
    return -sp.exp(lr) * sym_number(adv) + sym_number(kl_coef) * sym_number(
        selected
    ) * sp.Abs(lr)


def kl_cov_coefficient(p, q, adv, *, selected=0.0, kl_coef=0.1):
    r""":math:`c = r\hat A - \kappa\,s\operatorname{sgn}(\log r)`; never gated.

    Args:
        p: current probability.
        q: behavior probability.
        adv: advantage Â.
        selected: s.
        kl_coef: κ.

    Returns:
        ``(c, gated)`` arrays.
    """
    r, _, _ = ratio_terms(p, q, NO_CLAMP)
    c = jnp.asarray(adv) * r - kl_coef * jnp.asarray(selected) * jnp.sign(jnp.log(r))
    return c, jnp.zeros(c.shape, dtype=bool)

r"""Divergence-gated rules: DPPO (binary / top-K, TV / KL), verl's capped form, and the
predictive divergence mask.

All share the DPPO surrogate with a detached mask m (1 = keep):

.. math::
    j = \operatorname{sg}(m)\,r\hat A, \qquad c = \hat A\,r\,m

(SkyRL's form: r itself carries the gradient, so the log-ratio guard saturates
it), except ``dppo_capped`` and ``dppo_binary_kl_capped``, verl's and Stable-RL's form
with a capped detached weight (verl ``dppo_tv`` / ``dppo_kl``),

.. math::
    j = \operatorname{sg}\big(\min(r, C)\,m\big)\,\hat A\log\pi_k, \qquad
    c = \hat A\min(r, C)\,m.

Masks (strict inequalities, DPPO Eq. 12 and the predictive mask):

.. math::
    m_{DPPO} = 0 \iff D > \delta \wedge \hat A(r-1) > 0, \qquad
    m_{pred} = 0 \iff D > \delta \wedge \hat A\dot D > 0.

Divergences, Ḋ and masks come from :mod:`theorycheck.numeric` (one implementation);
the SymPy specifications in :mod:`._dppo_symbolic` are independent.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from theorycheck.losses._common import (
    LOG_RATIO_CLAMP,
    log_ratio,
    ratio_terms,
    sampled_logp,
)
from theorycheck.numeric import (
    binary_kl,
    binary_tv,
    ddot,
    divergence,
    dppo_mask,
    predictive_mask,
)

#: DPPO thresholds of the paper's experiments and of verl's shipped example
#: (examples/dppo_trainer/run_qwen3_30b_a3b_megatron.sh, verl-project/verl 1dda039):
#: TV 0.15, KL 0.05. (TRL's experimental DPPO trainer, which used them too, was
#: removed on 2026-07-20, huggingface/trl #6402.)
DELTA_TV = 0.15
DELTA_KL = 0.05
#: Stable-RL's DPPO threshold: ``clip_ratio`` of its actor config (0.2).
DELTA_STABLE = 0.2
#: verl's ``clip_ratio_c`` default, reused as the DPPO weight cap.
CAP = 3.0
#: top-K used in the DPPO and predictive-mask experiments.
TOPK = 20


def _masked_ratio_loss(logits, sampled, adv, behavior_logp, mask_fn, clamp):
    ratio = jnp.exp(log_ratio(logits, sampled, behavior_logp, clamp))
    mask = jax.lax.stop_gradient(mask_fn(ratio))
    return -mask * ratio * adv


def _dppo_divergence_loss(
    kind, logits, sampled, adv, behavior_logp, delta, clamp, topk=None
):
    div = divergence(behavior_logp, logits, sampled, kind=kind, topk=topk)
    return _masked_ratio_loss(
        logits,
        sampled,
        adv,
        behavior_logp,
        lambda ratio: dppo_mask(div, ratio, adv, delta=delta),
        clamp,
    )


def dppo_binary_tv_loss(
    logits: ArrayLike,
    sampled: int,
    *,
    adv: float,
    behavior_logp: ArrayLike,
    delta: float = DELTA_TV,
    log_ratio_clamp: float = LOG_RATIO_CLAMP,
) -> jax.Array:
    r"""DPPO with the binary TV gate :math:`D = |\mu_k - \pi_k|`.

    .. math::
        \ell = -\operatorname{sg}(m)\,r\hat A, \quad
        m = 0 \iff |\mu_k-\pi_k| > \delta \wedge \hat A(r-1) > 0

    Args:
        logits: ``[V]`` logits z.
        sampled: sampled token k.
        adv: advantage Â.
        behavior_logp: ``[V]`` log μ (the rollout policy: the trust-region anchor).
        delta: δ (0.15).
        log_ratio_clamp: guard C on log r.

    Returns:
        A scalar loss.

    References:
        DPPO (arXiv 2602.04879) Eq. 11-13; survey, "DPPO (binary TV)"; SkyRL ``dppo``.
    """
    return _dppo_divergence_loss(
        "binary_tv", logits, sampled, adv, behavior_logp, delta, log_ratio_clamp
    )


def dppo_binary_kl_loss(
    logits: ArrayLike,
    sampled: int,
    *,
    adv: float,
    behavior_logp: ArrayLike,
    delta: float = DELTA_KL,
    log_ratio_clamp: float = LOG_RATIO_CLAMP,
) -> jax.Array:
    r"""DPPO with the binary KL gate.

    .. math::
        D = \mu_k\log\frac{\mu_k}{\pi_k} + (1-\mu_k)\log\frac{1-\mu_k}{1-\pi_k}, \quad
        \ell = -\operatorname{sg}(m)\,r\hat A

    Args:
        logits: ``[V]`` logits z.
        sampled: sampled token k.
        adv: advantage Â.
        behavior_logp: ``[V]`` log μ.
        delta: δ (0.05).
        log_ratio_clamp: guard C on log r.

    Returns:
        A scalar loss.

    References:
        DPPO (arXiv 2602.04879) Eq. 11, 12, 14.
    """
    return _dppo_divergence_loss(
        "binary_kl", logits, sampled, adv, behavior_logp, delta, log_ratio_clamp
    )


def dppo_topk_tv_loss(
    logits: ArrayLike,
    sampled: int,
    *,
    adv: float,
    behavior_logp: ArrayLike,
    delta: float = DELTA_TV,
    topk: int = TOPK,
    log_ratio_clamp: float = LOG_RATIO_CLAMP,
) -> jax.Array:
    r"""DPPO with the top-K TV gate on :math:`S = \mathrm{TopK}(\mu,K)\cup\{k\}` + tail.

    .. math::
        D = \tfrac12\sum_{a\in S\cup\{T\}}|\mu_a - \pi_a|, \quad
        \ell = -\operatorname{sg}(m)\,r\hat A

    Args:
        logits: ``[V]`` logits z.
        sampled: sampled token k.
        adv: advantage Â.
        behavior_logp: ``[V]`` log μ.
        delta: δ (0.15).
        topk: K (20).
        log_ratio_clamp: guard C on log r.

    Returns:
        A scalar loss.

    References:
        DPPO (arXiv 2602.04879) Eq. 11, 12, 15.
    """
    return _dppo_divergence_loss(
        "topk_tv",
        logits,
        sampled,
        adv,
        behavior_logp,
        delta,
        log_ratio_clamp,
        topk=int(topk),
    )


def dppo_topk_kl_loss(
    logits: ArrayLike,
    sampled: int,
    *,
    adv: float,
    behavior_logp: ArrayLike,
    delta: float = DELTA_KL,
    topk: int = TOPK,
    log_ratio_clamp: float = LOG_RATIO_CLAMP,
) -> jax.Array:
    r"""DPPO with the top-K KL gate.

    .. math::
        D = \sum_{a\in S\cup\{T\}}\mu_a\log\frac{\mu_a}{\pi_a}, \quad
        \ell = -\operatorname{sg}(m)\,r\hat A

    Args:
        logits: ``[V]`` logits z.
        sampled: sampled token k.
        adv: advantage Â.
        behavior_logp: ``[V]`` log μ.
        delta: δ (0.05).
        topk: K (20).
        log_ratio_clamp: guard C on log r.

    Returns:
        A scalar loss.

    References:
        DPPO (arXiv 2602.04879) Eq. 11, 12, 16.
    """
    return _dppo_divergence_loss(
        "topk_kl",
        logits,
        sampled,
        adv,
        behavior_logp,
        delta,
        log_ratio_clamp,
        topk=int(topk),
    )


def _capped_loss(
    kind, logits, sampled, adv, behavior_logp, delta, cap, clamp, topk=None
):
    ratio = jnp.exp(log_ratio(logits, sampled, behavior_logp, clamp))
    div = divergence(
        behavior_logp,
        logits,
        sampled,
        kind=kind,
        topk=topk,
        support="k_slots" if topk else "union",
    )
    mask = dppo_mask(div, ratio, adv, delta=delta)
    weight = jax.lax.stop_gradient(jnp.minimum(ratio, cap) * mask)
    return -weight * adv * sampled_logp(logits, sampled)


def dppo_capped_loss(
    logits: ArrayLike,
    sampled: int,
    *,
    adv: float,
    behavior_logp: ArrayLike,
    delta: float = DELTA_TV,
    cap: float = CAP,
    log_ratio_clamp: float = LOG_RATIO_CLAMP,
) -> jax.Array:
    r"""verl's DPPO (binary TV): a capped, detached weight on the REINFORCE term.

    .. math::
        \ell = -\operatorname{sg}\big(\min(r, C)\,m\big)\,\hat A\log\pi_k

    Args:
        logits: ``[V]`` logits z.
        sampled: sampled token k.
        adv: advantage Â.
        behavior_logp: ``[V]`` log μ.
        delta: δ (0.15).
        cap: C (verl ``clip_ratio_c`` = 3).
        log_ratio_clamp: guard C' on log r (value only: the weight is detached).

    Returns:
        A scalar loss.

    References:
        Survey, "The pinned verl path additionally caps a detached importance weight:
        c = A min(r, C) m"; verl ``compute_policy_loss_dppo_tv``
        (verl/trainer/ppo/core_algos.py, verl-project/verl 1dda039); Stable-RL
        ``compute_policy_loss_with_mask``.
    """
    return _capped_loss(
        "binary_tv", logits, sampled, adv, behavior_logp, delta, cap, log_ratio_clamp
    )


def dppo_binary_kl_capped_loss(
    logits: ArrayLike,
    sampled: int,
    *,
    adv: float,
    behavior_logp: ArrayLike,
    delta: float = DELTA_KL,
    cap: float = CAP,
    log_ratio_clamp: float = LOG_RATIO_CLAMP,
) -> jax.Array:
    r"""verl's ``dppo_kl``: the binary-KL mask with a capped, detached weight.

    .. math::
        D = \mu_k\log\frac{\mu_k}{\pi_k} + (1-\mu_k)\log\frac{1-\mu_k}{1-\pi_k},
        \quad \ell = -\operatorname{sg}\big(\min(r, C)\,m\big)\,\hat A\log\pi_k,

    with m = 0 iff D > δ and Â moves r away from 1 (verl keeps the token when
    D ≤ δ or π_k ≤ μ_k for Â > 0, D ≤ δ or π_k ≥ μ_k for Â ≤ 0).

    Args:
        logits: ``[V]`` logits z.
        sampled: sampled token k.
        adv: advantage Â.
        behavior_logp: ``[V]`` log μ.
        delta: δ (0.05).
        cap: C (verl ``clip_ratio_c``; 3 by default, 1e4 in the shipped example).
        log_ratio_clamp: guard C' on log r (value only).

    Returns:
        A scalar loss.

    References:
        DPPO (arXiv 2602.04879) Eq. 14; verl ``compute_policy_loss_dppo_kl``
        (verl/trainer/ppo/core_algos.py, verl-project/verl 1dda039, added in
        182383b, #5397, 2026-02-26).
    """
    return _capped_loss(
        "binary_kl", logits, sampled, adv, behavior_logp, delta, cap, log_ratio_clamp
    )


def dppo_topk_tv_k_slots_loss(
    logits: ArrayLike,
    sampled: int,
    *,
    adv: float,
    behavior_logp: ArrayLike,
    delta: float = DELTA_STABLE,
    cap: float = CAP,
    topk: int = TOPK,
    log_ratio_clamp: float = LOG_RATIO_CLAMP,
) -> jax.Array:
    r"""Stable-RL's top-K TV DPPO: K slots (k replaces the K-th entry when it is
    not among the behavior's top K), the rest one bucket; capped, detached weight.

    .. math::
        \ell = -\operatorname{sg}\big(\min(r, C)\,m\big)\,\hat A\log\pi_k, \quad
        m = 0 \iff D^{K\text{-slots}}_{TV} > \delta \wedge \hat A(r-1) > 0

    Args:
        logits: ``[V]`` logits z.
        sampled: sampled token k.
        adv: advantage Â.
        behavior_logp: ``[V]`` log μ (Stable-RL: the rollout log-prob).
        delta: δ (0.2, Stable-RL's ``clip_ratio``).
        cap: C (``clip_ratio_c`` = 3 in its actor config).
        topk: K (the rollout engine's returned top-K).
        log_ratio_clamp: guard on log r (value only).

    Returns:
        A scalar loss.

    References:
        DPPO (arXiv 2602.04879) Eq. 15; Stable-RL ``compute_topk_kl``
        (verl/workers/actor/utils.py) and ``compute_policy_loss_with_mask``
        (verl/trainer/ppo/core_algos.py) at sail-sg/Stable-RL c6af1d1.
    """
    return _capped_loss(
        "topk_tv",
        logits,
        sampled,
        adv,
        behavior_logp,
        delta,
        cap,
        log_ratio_clamp,
        topk=int(topk),
    )


def dppo_topk_kl_k_slots_loss(
    logits: ArrayLike,
    sampled: int,
    *,
    adv: float,
    behavior_logp: ArrayLike,
    delta: float = DELTA_STABLE,
    cap: float = CAP,
    topk: int = TOPK,
    log_ratio_clamp: float = LOG_RATIO_CLAMP,
) -> jax.Array:
    r"""Stable-RL's top-K KL DPPO: K slots (k replaces the K-th entry when it is
    not among the behavior's top K), the rest one bucket; capped, detached weight.

    .. math::
        \ell = -\operatorname{sg}\big(\min(r, C)\,m\big)\,\hat A\log\pi_k, \quad
        m = 0 \iff D^{K\text{-slots}}_{KL} > \delta \wedge \hat A(r-1) > 0

    Args:
        logits: ``[V]`` logits z.
        sampled: sampled token k.
        adv: advantage Â.
        behavior_logp: ``[V]`` log μ (Stable-RL: the rollout log-prob).
        delta: δ (0.2, Stable-RL's ``clip_ratio``).
        cap: C (``clip_ratio_c`` = 3 in its actor config).
        topk: K (the rollout engine's returned top-K).
        log_ratio_clamp: guard on log r (value only).

    Returns:
        A scalar loss.

    References:
        DPPO (arXiv 2602.04879) Eq. 16; Stable-RL ``compute_topk_kl``
        (verl/workers/actor/utils.py) and ``compute_policy_loss_with_mask``
        (verl/trainer/ppo/core_algos.py) at sail-sg/Stable-RL c6af1d1.
    """
    return _capped_loss(
        "topk_kl",
        logits,
        sampled,
        adv,
        behavior_logp,
        delta,
        cap,
        log_ratio_clamp,
        topk=int(topk),
    )


def _predictive_loss(kind, logits, sampled, adv, behavior_logp, delta, topk, clamp):
    topk = int(topk)
    if topk > 0:
        div = divergence(behavior_logp, logits, sampled, kind=f"topk_{kind}", topk=topk)
        dd = ddot(
            behavior_logp,
            logits,
            sampled,
            kind=kind,
            estimator="topk_aggregated",
            topk=topk,
        ).ddot
    else:
        div = divergence(behavior_logp, logits, sampled, kind=kind)
        dd = ddot(behavior_logp, logits, sampled, kind=kind, estimator="full").ddot
    return _masked_ratio_loss(
        logits,
        sampled,
        adv,
        behavior_logp,
        lambda ratio: predictive_mask(div, dd, adv, delta=delta),
        clamp,
    )


def predictive_kl_loss(
    logits: ArrayLike,
    sampled: int,
    *,
    adv: float,
    behavior_logp: ArrayLike,
    delta: float = DELTA_KL,
    topk: int = 0,
    log_ratio_clamp: float = LOG_RATIO_CLAMP,
) -> jax.Array:
    r"""DPPO surrogate with the predictive mask on forward KL.

    .. math::
        m = 0 \iff D_{KL}(\mu\|\pi) > \delta \wedge \hat A\dot D > 0, \quad
        \dot D = (\pi_k-\mu_k) + \sum_i\pi_i(\mu_i-\pi_i), \quad
        \ell = -\operatorname{sg}(m)\,r\hat A

    Args:
        logits: ``[V]`` logits z.
        sampled: sampled token k.
        adv: advantage Â.
        behavior_logp: ``[V]`` log μ.
        delta: δ (0.05).
        topk: 0 = exact full-vocabulary D and Ḋ; K > 0 = top-K KL with the
            aggregated-tail Ḋ estimator.
        log_ratio_clamp: guard C on log r.

    Returns:
        A scalar loss.

    References:
        Predictive Divergence Masks (arXiv 2607.10848) Prop. 1, Eq. 13: paper text
        NOT FOUND; Ḋ DERIVED and the mask INFERRED (research notes §1.3-1.7).
    """
    return _predictive_loss(
        "kl", logits, sampled, adv, behavior_logp, delta, topk, log_ratio_clamp
    )


def predictive_tv_loss(
    logits: ArrayLike,
    sampled: int,
    *,
    adv: float,
    behavior_logp: ArrayLike,
    delta: float = DELTA_TV,
    topk: int = 0,
    log_ratio_clamp: float = LOG_RATIO_CLAMP,
) -> jax.Array:
    r"""DPPO surrogate with the predictive mask on total variation.

    .. math::
        m = 0 \iff D_{TV} > \delta \wedge \hat A\dot D_{TV} > 0, \quad
        \dot D_{TV} = \tfrac12\Big[\pi_k(s_k-\bar S) - \sum_j\pi_j^2(s_j-\bar S)\Big]

    with :math:`s_i = \operatorname{sign}(\pi_i-\mu_i)`, :math:`\bar S=\sum_i s_i\pi_i`.

    Args:
        logits: ``[V]`` logits z.
        sampled: sampled token k.
        adv: advantage Â.
        behavior_logp: ``[V]`` log μ.
        delta: δ (0.15).
        topk: 0 = exact; K > 0 = top-K TV with the aggregated-tail estimator.
        log_ratio_clamp: guard C on log r.

    Returns:
        A scalar loss.

    References:
        Predictive Divergence Masks (arXiv 2607.10848) Appendix D: NOT FOUND; Ḋ_TV
        DERIVED (research notes §1.10).
    """
    return _predictive_loss(
        "tv", logits, sampled, adv, behavior_logp, delta, topk, log_ratio_clamp
    )


# --- coefficients ---------------------------------------------------------------------


def _gate_coefficient(p, q, adv, masked, clamp):
    _, r, sat = ratio_terms(p, q, clamp)
    adv = jnp.asarray(adv)
    masked = jnp.broadcast_to(
        masked, jnp.broadcast_shapes(masked.shape, r.shape, adv.shape)
    )
    return jnp.where(masked | sat, 0.0, adv * r), masked


def _dppo_gated(div, p, q, adv, delta):
    adv = jnp.asarray(adv)
    up = jnp.asarray(p) > jnp.asarray(q)
    down = jnp.asarray(p) < jnp.asarray(q)
    return (jnp.asarray(div) > delta) & (((adv > 0) & up) | ((adv < 0) & down))


def dppo_binary_tv_coefficient(
    p, q, adv, *, delta=DELTA_TV, log_ratio_clamp=LOG_RATIO_CLAMP
):
    r""":math:`c = \hat A r m`, gated iff :math:`|p-q|>\delta` and Â moves r away
    from 1 (Â > 0, p > q or Â < 0, p < q).

    Args:
        p: current probability.
        q: behavior probability.
        adv: advantage Â.
        delta: δ.
        log_ratio_clamp: guard C.

    Returns:
        ``(c, gated)`` arrays.

    References:
        Survey, "DPPO (binary TV)": q = 0.90, p = 0.74, Â = −1 is gated.
    """
    masked = _dppo_gated(binary_tv(p, q), p, q, adv, delta)
    return _gate_coefficient(p, q, adv, masked, log_ratio_clamp)


def dppo_binary_kl_coefficient(
    p, q, adv, *, delta=DELTA_KL, log_ratio_clamp=LOG_RATIO_CLAMP
):
    """Binary-KL DPPO coefficient (see :func:`dppo_binary_tv_coefficient`)."""
    masked = _dppo_gated(binary_kl(p, q), p, q, adv, delta)
    return _gate_coefficient(p, q, adv, masked, log_ratio_clamp)


def dppo_topk_tv_coefficient(
    p, q, adv, *, divergence, delta=DELTA_TV, topk=TOPK, log_ratio_clamp=LOG_RATIO_CLAMP
):
    """Top-K DPPO coefficient; ``divergence`` is the top-K divergence of the token
    (it needs the whole distributions, so it is an input). ``topk`` is unused here."""
    masked = _dppo_gated(divergence, p, q, adv, delta)
    return _gate_coefficient(p, q, adv, masked, log_ratio_clamp)


def dppo_topk_kl_coefficient(
    p, q, adv, *, divergence, delta=DELTA_KL, topk=TOPK, log_ratio_clamp=LOG_RATIO_CLAMP
):
    """Top-K KL DPPO coefficient (KL default δ)."""
    return dppo_topk_tv_coefficient(
        p,
        q,
        adv,
        divergence=divergence,
        delta=delta,
        topk=topk,
        log_ratio_clamp=log_ratio_clamp,
    )


def _capped_coefficient(div, p, q, adv, delta, cap, clamp):
    _, r, _ = ratio_terms(p, q, clamp)
    adv = jnp.asarray(adv)
    masked = _dppo_gated(div, p, q, adv, delta)
    masked = jnp.broadcast_to(masked, jnp.broadcast_shapes(masked.shape, r.shape))
    return jnp.where(masked, 0.0, adv * jnp.minimum(r, cap)), masked


def dppo_capped_coefficient(
    p, q, adv, *, delta=DELTA_TV, cap=CAP, log_ratio_clamp=LOG_RATIO_CLAMP
):
    r""":math:`c = \hat A\min(r, C)\,m` with the binary TV mask; the guard clamps
    the weight's value only.

    Args:
        p: current probability.
        q: behavior probability.
        adv: advantage Â.
        delta: δ.
        cap: C.
        log_ratio_clamp: guard C'.

    Returns:
        ``(c, gated)`` arrays.

    References:
        Survey, "c = A min(r, C) m".
    """
    return _capped_coefficient(binary_tv(p, q), p, q, adv, delta, cap, log_ratio_clamp)


def dppo_binary_kl_capped_coefficient(
    p, q, adv, *, delta=DELTA_KL, cap=CAP, log_ratio_clamp=LOG_RATIO_CLAMP
):
    r""":math:`c = \hat A\min(r, C)\,m` with the binary KL mask (verl ``dppo_kl``).

    Args:
        p: current probability.
        q: behavior probability.
        adv: advantage Â.
        delta: δ.
        cap: C.
        log_ratio_clamp: guard C'.

    Returns:
        ``(c, gated)`` arrays.
    """
    return _capped_coefficient(binary_kl(p, q), p, q, adv, delta, cap, log_ratio_clamp)


def dppo_topk_tv_k_slots_coefficient(
    p,
    q,
    adv,
    *,
    divergence,
    delta=DELTA_STABLE,
    cap=CAP,
    topk=TOPK,
    log_ratio_clamp=LOG_RATIO_CLAMP,
):
    r""":math:`c = \hat A\min(r, C)\,m`, ``divergence`` the K-slot top-K divergence
    (an input: it needs whole distributions). ``topk`` is unused here."""
    return _capped_coefficient(divergence, p, q, adv, delta, cap, log_ratio_clamp)


def dppo_topk_kl_k_slots_coefficient(
    p,
    q,
    adv,
    *,
    divergence,
    delta=DELTA_STABLE,
    cap=CAP,
    topk=TOPK,
    log_ratio_clamp=LOG_RATIO_CLAMP,
):
    """The KL twin of :func:`dppo_topk_tv_k_slots_coefficient`."""
    return _capped_coefficient(divergence, p, q, adv, delta, cap, log_ratio_clamp)


def predictive_kl_coefficient(
    p,
    q,
    adv,
    *,
    divergence,
    ddot,
    delta=DELTA_KL,
    topk=0,
    log_ratio_clamp=LOG_RATIO_CLAMP,
):
    r""":math:`c = \hat A r m`, gated iff :math:`D > \delta` and :math:`\hat A\dot D
    > 0`; ``divergence`` and ``ddot`` are inputs (they need whole distributions).

    Args:
        p: current probability.
        q: behavior probability.
        adv: advantage Â.
        divergence: D of the token.
        ddot: Ḋ of the token.
        delta: δ.
        topk: unused here (selects how D and Ḋ were computed).
        log_ratio_clamp: guard C.

    Returns:
        ``(c, gated)`` arrays.

    References:
        Predictive Divergence Masks (arXiv 2607.10848) Eq. 13: INFERRED.
    """
    adv = jnp.asarray(adv)
    pushes = jnp.sign(adv) * jnp.sign(jnp.asarray(ddot)) > 0  # no underflow to 0
    masked = (jnp.asarray(divergence) > delta) & pushes
    return _gate_coefficient(p, q, adv, masked, log_ratio_clamp)


def predictive_tv_coefficient(
    p,
    q,
    adv,
    *,
    divergence,
    ddot,
    delta=DELTA_TV,
    topk=0,
    log_ratio_clamp=LOG_RATIO_CLAMP,
):
    """Predictive-mask coefficient with the TV default δ."""
    return predictive_kl_coefficient(
        p,
        q,
        adv,
        divergence=divergence,
        ddot=ddot,
        delta=delta,
        topk=topk,
        log_ratio_clamp=log_ratio_clamp,
    )

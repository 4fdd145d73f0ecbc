r"""Top-K divergence and Ḋ in O(K) per position, from gathered policy log-probs.

The production setting of the predictive mask: the rollout engine returns the behavior
top-K (:class:`TopKBehavior`) and the trainer already holds its policy log-probs
``log_softmax(z)``. Only the K (+1) support entries are read, and both tails come from
the complement,

.. math::
    \mu_T = \max(0, 1 - \textstyle\sum_{a\in S}\mu_a), \qquad
    \pi_T = \max(0, 1 - \textstyle\sum_{a\in S}\pi_a)

(as in the DPPO reference code ``compute_topk_kl`` [CODE]), so the cost is independent
of V. The aggregated- and uniform-tail estimators need nothing else; the
proportional-tail estimator needs :math:`\sum_{i\notin S}\pi_i^2`, a full pass, and
is not offered here (use :func:`ddot` with full logits). Formulas: :mod:`._ddot`,
:mod:`._divergence`.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike
from jaxtyping import Array

from theorycheck._errors import BadInput
from theorycheck.numeric import _checks
from theorycheck.numeric._choices import Divergence, Estimator, Support, choose
from theorycheck.numeric._ddot import DDOT_KINDS, DdotResult, reduced_ddot
from theorycheck.numeric._divergence import reduced_divergence
from theorycheck.numeric._support import (
    Reduced,
    TopKBehavior,
    support_slots,
)

GATHERED_ESTIMATORS = (Estimator.TOPK_AGGREGATED, Estimator.TOPK_UNIFORM)


def reduce_gathered(
    behavior: TopKBehavior,
    policy_logp: Array,
    sampled: Array,
    *,
    topk: int,
    support: str,
) -> Reduced:
    """Like ``reduce_to_support`` but O(K): tails from 1 - sum over the support."""
    vocab = policy_logp.shape[-1]
    k = sampled[..., None]
    logp, ids = jnp.asarray(behavior.logp), jnp.asarray(behavior.ids)
    vals, pos = jax.lax.top_k(logp, min(topk, logp.shape[-1]))
    ids = jnp.take_along_axis(ids, pos, axis=-1)
    vals = vals.astype(policy_logp.dtype)
    hit = ids == k
    found = jnp.max(jnp.where(hit, vals, -jnp.inf), axis=-1, keepdims=True)
    if behavior.sampled_logp is None:
        other = jnp.full(found.shape, jnp.nan, found.dtype)
    else:
        other = jnp.asarray(behavior.sampled_logp, found.dtype)[..., None]
    k_in = jnp.any(hit, axis=-1, keepdims=True)
    logmu_k = jnp.where(k_in, found, other)
    slot_ids, slot_mu, valid = support_slots(ids, vals, k, logmu_k, k_in, support)
    slot_pi = jnp.take_along_axis(policy_logp, slot_ids, axis=-1)
    n_tail = vocab - jnp.sum(valid, axis=-1)

    def tail(logs):
        mass = jnp.sum(jnp.where(valid, jnp.exp(logs), 0.0), axis=-1)
        return jnp.log(jnp.where(n_tail > 0, jnp.maximum(1.0 - mass, 0.0), 0.0))

    zero = jnp.zeros(n_tail.shape, policy_logp.dtype)
    return Reduced(
        logpi=slot_pi,
        logmu=slot_mu,
        valid=valid,
        is_k=(slot_ids == k) & valid,
        logpi_tail=tail(slot_pi),
        logmu_tail=tail(slot_mu),
        tail_norm2=zero,
        tail_cube=zero,
        n_tail=n_tail,
    )


@functools.partial(jax.jit, static_argnames=("kind", "estimator", "topk", "support"))
def _topk_predict(behavior, policy_logp, sampled, kind, estimator, topk, support):
    r = reduce_gathered(behavior, policy_logp, sampled, topk=topk, support=support)
    return reduced_divergence(r, "topk_" + kind), reduced_ddot(r, kind, estimator)


def topk_predict(
    behavior: TopKBehavior,
    policy_logp: ArrayLike,
    sampled: ArrayLike,
    *,
    kind: str = "kl",
    estimator: str = "topk_aggregated",
    topk: int | None = None,
    support: str = "union",
    check: bool = True,
) -> tuple[Array, DdotResult]:
    r"""Top-K divergence and its Ḋ estimate from top-K behavior, O(K) per position.

    .. math::
        \dot D_{agg} = (\pi_k - \mu_k) + \sum_{a\in S}\pi_a(\mu_a - \pi_a)
                       + \pi_T(\mu_T - \pi_T)

    Args:
        behavior: :class:`TopKBehavior` with ``[..., K]`` log-probs and ids (and the
            sampled token's log-prob when it may be missing from the ids).
        policy_logp: ``[..., V]`` policy log-probs (normalized, as in the trainer).
        sampled: ``[...]`` sampled token ids.
        kind: ``"kl"`` or ``"tv"``.
        estimator: ``"topk_aggregated"`` or ``"topk_uniform"``.
        topk: K (default: all returned entries).
        support: ``"union"`` or ``"k_slots"``.
        check: run the eager checks on ``sampled`` and the behavior (O(K) each).

    Returns:
        ``(divergence, DdotResult)``, each ``[...]``.

    Examples:
        >>> import numpy as np
        >>> b = TopKBehavior(np.log([0.6, 0.3]), np.array([0, 1]))
        >>> d, r = topk_predict(b, np.log([0.5, 0.3, 0.2]), np.int64(0))
        >>> round(float(r.local), 6)
        -0.1

    References:
        Predictive Divergence Masks (arXiv 2607.10848) Eq. 10-11 (text NOT FOUND;
        INFERRED from third-party code); DPPO Eq. 15-16 [PAPER].
    """
    if not isinstance(behavior, TopKBehavior):
        raise BadInput("topk_predict needs a TopKBehavior (top-K log-probs and ids)")
    kind = choose(Divergence, kind, "kind", DDOT_KINDS)
    if estimator == Estimator.TOPK_PROPORTIONAL:
        raise BadInput(
            "estimator 'topk_proportional' needs full logits: use ddot, not "
            "topk_predict"
        )
    estimator = choose(Estimator, estimator, "estimator", GATHERED_ESTIMATORS)
    support = choose(Support, support, "support")
    k_given = jnp.shape(behavior.logp)[-1]
    topk = k_given if topk is None else topk
    _checks.check_topk(topk)
    if topk > k_given:
        raise BadInput(f"topk {topk} exceeds the {k_given} entries the engine returned")
    if check and _checks.is_concrete(behavior, policy_logp, sampled):
        shape = jnp.shape(policy_logp)
        _checks.check_sampled(sampled, shape[:-1], shape[-1])
        _checks.check_behavior_logp_partial(behavior.logp)
    return _topk_predict(
        behavior,
        jnp.asarray(policy_logp),
        jnp.asarray(sampled),
        kind,
        estimator,
        int(topk),
        support,
    )

r"""Top-K supports: behavior top-K (plus the sampled token) and one tail bucket.

Two supports are offered, selected by ``support``:

* ``"union"`` (DPPO Eq. 15-16, [PAPER]):
  :math:`S = \mathrm{TopK}(\mu, K) \cup \{k\}`, so :math:`|S| = K` or :math:`K + 1`.
* ``"k_slots"`` (DPPO reference code ``compute_topk_kl``, [CODE]): exactly K slots; when
  the sampled token k is not in the behavior top-K it *replaces the K-th entry*.

Every token outside S is pooled into one tail bucket,
:math:`\mu_T = 1 - \sum_{a \in S} \mu_a` and :math:`\pi_T = 1 - \sum_{a \in S} \pi_a`.
The trainer holds the full logits, so the policy-side tail moments
:math:`Q_T = \sum_{i \notin S} \pi_i^2` and :math:`C_T = \sum_{i \notin S} \pi_i^3` are
exact here (they feed the proportional-tail estimator and the second-order terms).

A support is stored as ``S_max`` slots with a ``valid`` flag (the union's extra slot is
invalid when k already lies in the top-K), so shapes stay static under ``jax.jit``.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike
from jaxtyping import Array, Bool, Float, Int

from theorycheck.numeric._choices import Support

SUPPORTS = tuple(Support)


class TopKBehavior(NamedTuple):
    """Behavior as a rollout engine returns it: top-K log-probs and their token ids.

    Args:
        logp: ``[..., K]`` behavior log-probabilities of the returned tokens.
        ids: ``[..., K]`` integer token ids (distinct within a row).
        sampled_logp: ``[...]`` log mu_k of the sampled token, needed when the sampled
            token may be missing from ``ids`` (engines return it beside the top-K).

    Examples:
        >>> import numpy as np
        >>> b = TopKBehavior(np.log([0.6, 0.3]), np.array([2, 0]))
        >>> b.ids.tolist()
        [2, 0]
    """

    logp: ArrayLike
    ids: ArrayLike
    sampled_logp: ArrayLike | None = None


class Reduced(NamedTuple):
    """Behavior and policy on the support slots plus the tail bucket (module doc)."""

    logpi: Float[Array, "*batch S"]
    logmu: Float[Array, "*batch S"]
    valid: Bool[Array, "*batch S"]
    is_k: Bool[Array, "*batch S"]
    logpi_tail: Float[Array, "*batch"]
    logmu_tail: Float[Array, "*batch"]
    tail_norm2: Float[Array, "*batch"]
    tail_cube: Float[Array, "*batch"]
    n_tail: Int[Array, "*batch"]


def _take(x: Array, idx: Array) -> Array:
    return jnp.take_along_axis(x, idx, axis=-1)


def _support_mask(ids: Array, valid: Array, vocab: int) -> Array:
    """``[..., V]`` bool: which vocabulary entries lie in the support."""
    flat_ids = ids.reshape(-1, ids.shape[-1])
    flat_valid = valid.reshape(-1, ids.shape[-1]).astype(jnp.int32)
    one = lambda i, m: jnp.zeros(vocab, jnp.int32).at[i].add(m) > 0
    return jax.vmap(one)(flat_ids, flat_valid).reshape(*ids.shape[:-1], vocab)


def _masked_logsumexp(x: Array, drop: Array) -> Array:
    """log sum exp over entries not dropped; -inf (with zero, not NaN, gradients) if
    every entry is dropped."""
    empty = jnp.all(drop, axis=-1)
    safe = jnp.where(drop & ~empty[..., None], -jnp.inf, jnp.where(drop, 0.0, x))
    return jnp.where(empty, -jnp.inf, jax.nn.logsumexp(safe, axis=-1))


#: float32 candidates beyond K that :func:`top_k` takes before its float64 check
TOP_K_SLACK = 8


def top_k(x: Array, k: int) -> tuple[Array, Array]:
    r"""``jax.lax.top_k(x, k)``: the same values, indices and order (ties to the
    lower index), with XLA's fast float32 top-k doing the search for float64 ``x``.

    XLA's CPU top-k has a fast kernel for float32 only; for float64 it sorts every
    row (about 100 times slower at V = 49152). Rounding to float32 is monotone
    (:math:`a \le b \Rightarrow \mathrm{fl}(a) \le \mathrm{fl}(b)`), so with
    :math:`t` the float32 value of the M-th float32 candidate (M = K + slack),
    every entry outside the candidates has :math:`\mathrm{fl}(x_i) \le t`. The
    candidates, in index order, give their exact float64 top-K; when its K-th value
    :math:`v_K` has :math:`\mathrm{fl}(v_K) > t`, every entry with
    :math:`x_i \ge v_K` is a candidate, so that is the full top-K, ties included.
    Otherwise (near-ties across the cut, fewer than K finite entries) the row
    block falls back to the full float64 ``jax.lax.top_k`` (a ``lax.cond``: both
    run under ``vmap``, with the same result).
    """
    x = jnp.asarray(x)
    n = x.shape[-1]
    m = min(n, k + TOP_K_SLACK)
    if x.dtype != jnp.float64 or m >= n:
        return jax.lax.top_k(x, k)
    v32, cand = jax.lax.top_k(x.astype(jnp.float32), m)
    # t as the candidates' min, not v32[..., -1]: XLA rewrites a top-k whose
    # output is sliced into a full sort of the row (the slow path again)
    t = jnp.min(v32, axis=-1)
    cand = jnp.sort(cand, axis=-1)  # index order: equal values keep top_k's order
    vals, pos = jax.lax.top_k(_take(x, cand), k)
    ids = _take(cand, pos)
    ok = jnp.all(vals[..., -1].astype(jnp.float32) > t)
    return jax.lax.cond(ok, lambda: (vals, ids), lambda: tuple(jax.lax.top_k(x, k)))


def _behavior_topk(behavior, vocab: int, topk: int):
    """Top-K log-probs and ids of the behavior (full log-probs or TopKBehavior)."""
    if isinstance(behavior, TopKBehavior):
        logp = jnp.asarray(behavior.logp)
        ids = jnp.asarray(behavior.ids)
        kk = min(topk, logp.shape[-1])
        vals, pos = jax.lax.top_k(logp, kk)
        return vals, _take(ids, pos)
    return top_k(jnp.asarray(behavior), min(topk, vocab))


def sampled_behavior_logp(behavior, sampled: Array) -> Array:
    """log mu_k for the sampled token; NaN where a TopKBehavior cannot tell."""
    k = jnp.asarray(sampled)[..., None]
    if not isinstance(behavior, TopKBehavior):
        return _take(jnp.asarray(behavior), k)[..., 0]
    logp, ids = jnp.asarray(behavior.logp), jnp.asarray(behavior.ids)
    hit = ids == k
    found = jnp.max(jnp.where(hit, logp, -jnp.inf), axis=-1)
    if behavior.sampled_logp is None:
        other = jnp.full(found.shape, jnp.nan, found.dtype)
    else:
        other = jnp.asarray(behavior.sampled_logp, found.dtype)
    return jnp.where(jnp.any(hit, axis=-1), found, other)


def support_slots(ids, vals, k, logmu_k, k_in, support: str):
    """Slots of S (ids, log μ, valid) from the behavior top-K and the sampled token.

    ``"union"`` appends k as an extra slot (invalid when k is already in the top-K);
    ``"k_slots"`` writes k over the K-th slot when it is missing (module doc).
    """
    if support == "union":
        slot_ids = jnp.concatenate([ids, k.astype(ids.dtype)], axis=-1)
        slot_mu = jnp.concatenate([vals, logmu_k], axis=-1)
        valid = jnp.concatenate([jnp.ones_like(ids, bool), ~k_in], axis=-1)
    else:
        last = jax.lax.broadcasted_iota(ids.dtype, ids.shape, ids.ndim - 1) == (
            ids.shape[-1] - 1
        )
        replace = ~k_in & last
        slot_ids = jnp.where(replace, k.astype(ids.dtype), ids)
        slot_mu = jnp.where(replace, logmu_k, vals)
        valid = jnp.ones_like(ids, bool)
    slot_mu = jnp.where(valid, slot_mu, -jnp.inf)
    return slot_ids, slot_mu, valid


def reduce_to_support(
    behavior,
    logp: Float[Array, "*batch V"],
    sampled: Int[Array, "*batch"],
    *,
    topk: int,
    support: str = "union",
) -> Reduced:
    r"""Restricts behavior and policy to the top-K support plus one tail bucket.

    .. math::
        S = \mathrm{TopK}(\mu, K) \cup \{k\}, \qquad
        \mu_T = \sum_{i \notin S} \mu_i, \quad \pi_T = \sum_{i \notin S} \pi_i

    Args:
        behavior: ``[..., V]`` full behavior log-probs, or a :class:`TopKBehavior`.
        logp: ``[..., V]`` policy log-probs ``log_softmax(logits)``.
        sampled: ``[...]`` sampled token ids.
        topk: K (clamped to V, or to the K the engine returned).
        support: ``"union"`` (DPPO Eq. 15-16) or ``"k_slots"`` (DPPO reference code).

    Returns:
        A :class:`Reduced` record; tail quantities are exact for full behavior, and
        :math:`\mu_T = \max(0, 1 - \sum_S \mu_a)` for a TopKBehavior.

    References:
        DPPO (Qi et al., arXiv 2602.04879) Eq. 15-16 [PAPER]; Stable-RL
        ``compute_topk_kl`` [CODE] for ``k_slots``.
    """
    if support not in SUPPORTS:
        raise ValueError(
            f"support must be one of {', '.join(SUPPORTS)}, got {support!r}"
        )
    vocab = logp.shape[-1]
    k = jnp.asarray(sampled)[..., None]
    vals, ids = _behavior_topk(behavior, vocab, topk)
    vals = vals.astype(logp.dtype)
    logmu_k = sampled_behavior_logp(behavior, sampled).astype(logp.dtype)[..., None]
    k_in = jnp.any(ids == k, axis=-1, keepdims=True)
    slot_ids, slot_mu, valid = support_slots(ids, vals, k, logmu_k, k_in, support)
    is_k = (slot_ids == k) & valid
    in_s = _support_mask(slot_ids, valid, vocab)
    tail_logp = jnp.where(in_s, -jnp.inf, logp)
    p_tail = jnp.exp(tail_logp)
    if isinstance(behavior, TopKBehavior):
        mu_s = jnp.sum(jnp.where(valid, jnp.exp(slot_mu), 0.0), axis=-1)
        n_tail = vocab - jnp.sum(valid, axis=-1)
        mu_t = jnp.where(n_tail > 0, jnp.maximum(1.0 - mu_s, 0.0), 0.0)
        logmu_tail = jnp.log(mu_t)
    else:
        behavior_logp = jnp.asarray(behavior).astype(logp.dtype)
        logmu_tail = _masked_logsumexp(
            behavior_logp, in_s | (behavior_logp == -jnp.inf)
        )
    return Reduced(
        logpi=_take(logp, slot_ids),
        logmu=slot_mu,
        valid=valid,
        is_k=is_k,
        logpi_tail=_masked_logsumexp(logp, in_s),
        logmu_tail=logmu_tail,
        tail_norm2=jnp.sum(p_tail * p_tail, axis=-1),
        tail_cube=jnp.sum(p_tail * p_tail * p_tail, axis=-1),
        n_tail=vocab - jnp.sum(valid, axis=-1),
    )

r"""Divergences :math:`D(\mu \| \pi)` between behavior and policy, full and reduced.

With :math:`\mu = \exp(\text{behavior\_logp})`, :math:`\pi = \mathrm{softmax}(z)`
and the sampled token k:

.. math::
    D_{KL} = \sum_i \mu_i \log\frac{\mu_i}{\pi_i}, \quad
    D_{rKL} = \sum_i \pi_i \log\frac{\pi_i}{\mu_i}, \quad
    D_{TV} = \tfrac12 \sum_i |\mu_i - \pi_i|

    D_{Bin\,TV} = |\mu_k - \pi_k|, \quad
    D_{Bin\,KL} = \mu_k \log\frac{\mu_k}{\pi_k}
                 + (1-\mu_k)\log\frac{1-\mu_k}{1-\pi_k}

and the top-K forms apply KL / TV to the reduced distribution on
:math:`S \cup \{\text{tail}\}` (see :mod:`theorycheck.numeric._support`).

References: DPPO (Qi et al., arXiv 2602.04879) Eq. 13-16 [PAPER]; the ``k_slots``
support is the Stable-RL reference code [CODE]. ``0 log 0 = 0``; a token with
:math:`\mu_i > 0 = \pi_i` (impossible for finite logits) or :math:`\pi_i > 0 = \mu_i`
(reverse KL) gives ``+inf``, never NaN.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike
from jaxtyping import Array, Float

from theorycheck._errors import BadInput
from theorycheck.numeric import _checks
from theorycheck.numeric._choices import Divergence, Support, choose
from theorycheck.numeric._support import (
    Reduced,
    TopKBehavior,
    reduce_to_support,
    sampled_behavior_logp,
)

KINDS = tuple(Divergence)
_FULL_KINDS = (Divergence.KL, Divergence.REVERSE_KL, Divergence.TV)
_TOPK_KINDS = (Divergence.TOPK_KL, Divergence.TOPK_TV)


def _xlogy_ratio(logq: Array, logp: Array) -> Array:
    """q (log q - log p) with 0 log 0 = 0 (q = exp(logq)); NaN-free gradients."""
    live = logq > -jnp.inf
    safe_q, safe_p = jnp.where(live, logq, 0.0), jnp.where(live, logp, 0.0)
    return jnp.where(live, jnp.exp(safe_q) * (safe_q - safe_p), 0.0)


def binary_kl(p: ArrayLike, q: ArrayLike) -> Array:
    r"""Binary KL of the sampled token: behavior probability q = mu_k, policy p = pi_k.

    .. math::
        D_{Bin\,KL}(q \| p) = q \log\frac{q}{p} + (1-q)\log\frac{1-q}{1-p}

    Args:
        p: policy probability :math:`\pi_k` (any shape), in [0, 1].
        q: behavior probability :math:`\mu_k`, broadcastable with ``p``, in [0, 1].

    Returns:
        The binary KL with the shape of ``p``; ``0 log 0 = 0``, ``+inf`` where p hits 0
        or 1 while q does not.

    Examples:
        >>> round(float(binary_kl(0.5, 0.5)), 12)
        0.0

    References:
        DPPO (Qi et al., arXiv 2602.04879) Eq. 14 [PAPER].
    """
    p, q = jnp.asarray(p), jnp.asarray(q)
    if _checks.is_concrete(p, q):
        _check_prob("p", p)
        _check_prob("q", q)
    first = jnp.where(q > 0, q * (jnp.log(q) - jnp.log(p)), 0.0)
    second = jnp.where(q < 1, (1 - q) * (jnp.log1p(-q) - jnp.log1p(-p)), 0.0)
    return first + second


def binary_tv(p: ArrayLike, q: ArrayLike) -> Array:
    r"""Binary TV of the sampled token: :math:`|\mu_k - \pi_k|` with q = mu_k, p = pi_k.

    .. math::
        D_{Bin\,TV} = |q - p|

    Args:
        p: policy probability :math:`\pi_k`, in [0, 1].
        q: behavior probability :math:`\mu_k`, broadcastable with ``p``, in [0, 1].

    Returns:
        ``|q - p|`` with the broadcast shape.

    Examples:
        >>> round(float(binary_tv(0.8, 0.99)), 6)
        0.19

    References:
        DPPO (Qi et al., arXiv 2602.04879) Eq. 13 [PAPER].
    """
    p, q = jnp.asarray(p), jnp.asarray(q)
    if _checks.is_concrete(p, q):
        _check_prob("p", p)
        _check_prob("q", q)
    return jnp.abs(q - p)


def _check_prob(name: str, x: Array) -> None:
    import numpy as np

    a = np.asarray(x, dtype=np.float64)
    bad = ~((a >= 0) & (a <= 1))
    if bad.any():
        raise BadInput(f"{name} = {a[bad].flat[0]!r} is not a probability in [0, 1]")


def full_divergence(
    behavior_logp: Float[ArrayLike, "... V"], logp: Float[ArrayLike, "... V"], kind: str
) -> Float[Array, " ..."]:
    r"""Full-vocabulary KL / reverse KL / TV per row from log-probs (no checks).

    .. math::
        D_{KL} = \sum_i \mu_i(\log\mu_i - \log\pi_i),\quad
        D_{rKL} = \sum_i \pi_i(\log\pi_i - \log\mu_i),\quad
        D_{TV} = \tfrac12\sum_i |\mu_i - \pi_i|

    with ``0 log 0 = 0`` and gradients free of NaN where :math:`\mu_i = 0` (KL).
    The jit-safe core of :func:`divergence` (which validates its inputs first), for
    callers inside a traced function (the probes' per-token D and its JVPs).

    Args:
        behavior_logp: ``[..., V]`` log μ (``-inf`` allowed where μ_i = 0).
        logp: ``[..., V]`` log π (normalised log-probs, e.g. ``log_softmax(z)``).
        kind: ``"kl"``, ``"reverse_kl"`` or ``"tv"``.

    Returns:
        ``[...]`` the divergence of each row.

    Examples:
        >>> import numpy as np
        >>> mu = np.array([np.log(0.5), np.log(0.5), -np.inf])
        >>> round(float(full_divergence(mu, np.log([0.25, 0.25, 0.5]), "kl")), 6)
        0.693147
    """
    if kind == "kl":
        return jnp.sum(_xlogy_ratio(behavior_logp, logp), axis=-1)
    if kind == "reverse_kl":
        return jnp.sum(jnp.exp(logp) * (logp - behavior_logp), axis=-1)
    if kind == "tv":
        return 0.5 * jnp.sum(jnp.abs(jnp.exp(behavior_logp) - jnp.exp(logp)), axis=-1)
    raise ValueError(kind)


def reduced_divergence(r: Reduced, kind: str) -> Array:
    """Top-K KL / TV of the reduced distribution S + tail (no checks; jit-safe)."""
    if kind == "topk_kl":
        inside = jnp.where(r.valid, _xlogy_ratio(r.logmu, r.logpi), 0.0)
        return jnp.sum(inside, axis=-1) + _xlogy_ratio(r.logmu_tail, r.logpi_tail)
    if kind == "topk_tv":
        gap = jnp.where(r.valid, jnp.abs(jnp.exp(r.logmu) - jnp.exp(r.logpi)), 0.0)
        tail = jnp.abs(jnp.exp(r.logmu_tail) - jnp.exp(r.logpi_tail))
        return 0.5 * (jnp.sum(gap, axis=-1) + tail)
    raise ValueError(kind)


@functools.partial(jax.jit, static_argnames=("kind", "topk", "support"))
def _divergence(behavior, logits, sampled, kind, topk, support):
    logp = jax.nn.log_softmax(logits, axis=-1)
    if kind in _FULL_KINDS:
        return full_divergence(jnp.asarray(behavior, logp.dtype), logp, kind)
    if kind in _TOPK_KINDS:
        r = reduce_to_support(behavior, logp, sampled, topk=topk, support=support)
        return reduced_divergence(r, kind)
    k = jnp.asarray(sampled)[..., None]
    p = jnp.exp(jnp.take_along_axis(logp, k, axis=-1)[..., 0])
    q = jnp.exp(sampled_behavior_logp(behavior, sampled).astype(logp.dtype))
    if kind == "binary_tv":
        return jnp.abs(q - p)
    first = jnp.where(q > 0, q * (jnp.log(q) - jnp.log(p)), 0.0)
    second = jnp.where(q < 1, (1 - q) * (jnp.log1p(-q) - jnp.log1p(-p)), 0.0)
    return first + second


def _sampled_logp_np(behavior, sampled) -> np.ndarray:
    """numpy twin of ``sampled_behavior_logp`` for eager checks (no JAX dispatch)."""
    k = np.asarray(sampled)[..., None]
    if not isinstance(behavior, TopKBehavior):
        return np.take_along_axis(np.asarray(behavior), k, axis=-1)[..., 0]
    logp, ids = np.asarray(behavior.logp), np.asarray(behavior.ids)
    hit = ids == k
    found = np.max(np.where(hit, logp, -np.inf), axis=-1)
    other = (
        np.nan if behavior.sampled_logp is None else np.asarray(behavior.sampled_logp)
    )
    return np.where(hit.any(-1), found, other)


def default_topk(behavior, topk):
    """K defaults to the number of entries a TopKBehavior carries."""
    if topk is None and isinstance(behavior, TopKBehavior):
        return int(jnp.shape(behavior.logp)[-1])
    return topk


def validate(behavior, logits, sampled, *, need_full: bool, topk=None) -> None:
    """Eager checks shared by the public functions (skipped for traced inputs)."""
    if not _checks.is_concrete(behavior, logits, sampled):
        return
    _checks.check_logits(logits)
    shape = np.shape(logits)
    _checks.check_sampled(sampled, shape[:-1], shape[-1])
    if isinstance(behavior, TopKBehavior):
        if need_full:
            raise BadInput(
                "this quantity needs the full behavior distribution; got top-K behavior"
            )
        _checks.check_same_shape(
            "behavior.logp", behavior.logp, "behavior.ids", behavior.ids
        )
        if jnp.shape(behavior.logp)[:-1] != shape[:-1]:
            raise BadInput(
                f"behavior.logp has shape {jnp.shape(behavior.logp)}, leading axes "
                f"must match logits {shape}"
            )
        if topk is not None and topk > jnp.shape(behavior.logp)[-1]:
            raise BadInput(
                f"topk {topk} exceeds the {jnp.shape(behavior.logp)[-1]} behavior "
                "entries the engine returned"
            )
        _checks.check_behavior_logp_partial(behavior.logp)
    else:
        _checks.check_same_shape("behavior_logp", behavior, "logits", logits)
        _checks.check_behavior_logp(behavior)
    mu_k = _sampled_logp_np(behavior, sampled)
    if np.isnan(mu_k).any():
        raise BadInput(
            "the sampled token is not among the top-K behavior ids and "
            "TopKBehavior.sampled_logp was not given"
        )
    _checks.check_sampled_possible(mu_k)


def divergence(
    behavior_logp,
    logits: ArrayLike,
    sampled: ArrayLike,
    *,
    kind: str,
    topk: int | None = None,
    support: str = "union",
) -> Float[Array, "*batch"]:
    r"""Divergence :math:`D(\mu \| \pi)` of the given ``kind`` (see module formulas).

    .. math::
        D_{TopK\,KL} = \sum_{a \in S \cup \{T\}} \mu_a \log\frac{\mu_a}{\pi_a}

    Args:
        behavior_logp: ``[..., V]`` behavior log-probs (``-inf`` allowed), or a
            :class:`TopKBehavior` (top-K and binary kinds only).
        logits: ``[..., V]`` policy logits z.
        sampled: ``[...]`` integer sampled token k.
        kind: one of ``"kl", "reverse_kl", "tv", "binary_kl", "binary_tv",
            "topk_kl", "topk_tv"``.
        topk: K for the top-K kinds (clamped to V).
        support: ``"union"`` = TopK(mu, K) + {k} + tail (DPPO Eq. 15-16) or
            ``"k_slots"`` = k replaces the K-th entry (DPPO reference code).

    Returns:
        ``[...]`` divergence per position.

    Examples:
        >>> import numpy as np
        >>> mu = np.log(np.array([0.5, 0.3, 0.2]))
        >>> float(divergence(mu, mu, 0, kind="kl"))
        0.0

    References:
        DPPO (Qi et al., arXiv 2602.04879) Eq. 13-16 [PAPER]; Stable-RL [CODE].
    """
    kind = choose(Divergence, kind, "kind")
    support = choose(Support, support, "support")
    if kind in _TOPK_KINDS:
        topk = default_topk(behavior_logp, topk)
        _checks.check_topk(topk)
    validate(behavior_logp, logits, sampled, need_full=kind in _FULL_KINDS, topk=topk)
    logits = jnp.asarray(logits)
    topk = min(int(topk), logits.shape[-1]) if kind in _TOPK_KINDS else None
    return _divergence(behavior_logp, logits, jnp.asarray(sampled), kind, topk, support)

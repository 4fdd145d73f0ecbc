r"""Directional derivative :math:`\dot D = \langle \nabla_z D, v \rangle`, v = e_k - pi.

Split into a local (sampled-token) and a global (softmax-coupling) term,
:math:`\text{local} = \langle \nabla_z D, e_k \rangle`,
:math:`\text{global} = -\langle \nabla_z D, \pi \rangle`.

Forward KL (Predictive Divergence Masks, arXiv 2607.10848, Prop. 1 / Eq. 7-9; paper text
NOT FOUND, formula DERIVED in research notes §1.3 and checked here by autodiff):

.. math::
    \dot D_{KL} = \underbrace{(\pi_k - \mu_k)}_{\text{local}}
                + \underbrace{\textstyle\sum_i \pi_i(\mu_i - \pi_i)}_{\text{global}}

Total variation (same paper, Appendix D / Eq. 34: NOT FOUND, DERIVED §1.10), with
:math:`s_i = \mathrm{sign}(\pi_i - \mu_i)` (0 at a tie, a subgradient; a difference
below float64's resolution of the log-probs is a tie, :func:`tie_sign`) and
:math:`\bar S = \sum_i s_i \pi_i`:

.. math::
    \dot D_{TV} = \underbrace{\tfrac12 \pi_k (s_k - \bar S)}_{\text{local}}
        \underbrace{- \tfrac12 \textstyle\sum_i \pi_i^2 (s_i - \bar S)}_{\text{global}}

Top-K estimators (support S and tail T as in :mod:`._support`) replace the tail part of
the global sum. With an effective tail sum of squares :math:`\hat Q`,

.. math::
    \text{global}_{KL} = \sum_{a \in S} \pi_a(\mu_a - \pi_a) + \hat Q (\mu_T/\pi_T - 1),
    \quad
    \text{global}_{TV} = -\tfrac12\Big[\sum_{a \in S} \pi_a^2(s_a - \bar S)
                          + \hat Q (s_T - \bar S)\Big]

* aggregated tail, :math:`\hat Q = \pi_T^2`: the exact Ḋ of the reduced (|S|+1)-category
  distribution with its own direction (Eq. 10; INFERRED from third-party code);
* uniform tail, :math:`\hat Q = \pi_T^2 / (V - |S|)`: exact when both tails are uniform
  (Eq. 11; INFERRED);
* proportional tail, :math:`\hat Q = Q_T = \sum_{i \notin S} \pi_i^2` (exact:
  the trainer holds the full logits), the unseen behavior tail taken proportional to
  pi's tail, :math:`\mu_i = \mu_T \pi_i / \pi_T`. Not in the papers (DERIVED here).
  It equals the *exact* derivative of :math:`D_{TopK}` (KL or TV) along the true
  full-vocabulary direction v, because :math:`D_{TopK}` sees the tail only through
  :math:`\pi_T`, and :math:`d\pi_T/dt = -Q_T - \pi_T\,\pi\cdot v`.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike
from jaxtyping import Array

from theorycheck.numeric import _checks
from theorycheck.numeric._choices import Divergence, Estimator, Support, choose
from theorycheck.numeric._divergence import default_topk, validate
from theorycheck.numeric._support import Reduced, reduce_to_support

DDOT_KINDS = (Divergence.KL, Divergence.TV)
ESTIMATORS = tuple(Estimator)


class DdotResult(NamedTuple):
    r"""Ḋ with its local (sampled-token) and global (softmax-coupling) parts.

    Args:
        ddot: ``[...]`` Ḋ = local + global.
        local: ``[...]`` :math:`\langle \nabla_z D, e_k \rangle`.
        global_: ``[...]`` :math:`-\langle \nabla_z D, \pi \rangle`.

    Examples:
        >>> DdotResult(1.0, 0.25, 0.75).global_
        0.75
    """

    ddot: Array
    local: Array
    global_: Array


#: ⌈log₂ n⌉ assumed for a sum over a tail bucket of unknown size (vocabularies up to
#: 2^18 = 262144 tokens).
TAIL_LOG2_TERMS = 18


def tie_sign(
    pi: Array, mu: Array, logpi: Array, logmu: Array, log2_terms: int
) -> Array:
    r""":math:`\mathrm{sign}(\pi_i - \mu_i)`, 0 where the difference is below what
    float64 log-probs resolve (a tie, the subgradient 0 of the TV kink).

    A probability computed as :math:`\exp(\log p)` carries a relative error of at
    most :math:`\varepsilon(|\log p| + 1)`, and :math:`\pi = \exp(\text{log\_softmax}
    (z))` a further :math:`\varepsilon(\lceil\log_2 n\rceil + 1)` from the
    normaliser's sum over ``n`` terms; so a difference with

    .. math::
        |\pi_i - \mu_i| \le \tau_i = 4\varepsilon\big(\pi_i(|\log\pi_i|
            + \lceil\log_2 n\rceil + 2) + \mu_i(|\log\mu_i| + 2)\big)

    (:math:`\varepsilon` = machine epsilon, a factor 4 of margin) has no reliable
    sign and counts as a tie. Without it ``theorycheck predict`` at μ = π gave a TV Ḋ
    of up to 0.15 from rounding alone (the signs of the noise).

    Examples:
        >>> import numpy as np
        >>> p = np.array([0.5, 0.5 + 1e-17, 0.25])
        >>> tie_sign(p, np.array([0.5, 0.5, 0.5]), np.log(p),
        ...          np.log(np.array([0.5, 0.5, 0.5])), 2).tolist()
        [0.0, 0.0, -1.0]
    """
    eps = jnp.finfo(jnp.result_type(pi, mu)).eps
    scale_pi = jnp.where(pi > 0, pi * (jnp.abs(logpi) + log2_terms + 2), 0.0)
    scale_mu = jnp.where(mu > 0, mu * (jnp.abs(logmu) + 2), 0.0)
    diff = pi - mu
    return jnp.where(
        jnp.abs(diff) <= 4 * eps * (scale_pi + scale_mu), 0.0, jnp.sign(diff)
    )


def log2_terms(n: int) -> int:
    """⌈log₂ n⌉ (at least 1): the rounding steps of a pairwise sum of n terms,
    bounded below by ``TAIL_LOG2_TERMS`` so that the tolerance, and with it the
    program of a loss that uses it, is the same for every V up to 2^18 (a literal
    that changed with V would make a loss's formula depend on V)."""
    return max(TAIL_LOG2_TERMS, (max(int(n), 2) - 1).bit_length())


def full_ddot(
    behavior_logp: Array, logp: Array, sampled: Array, kind: str
) -> DdotResult:
    """Exact full-vocabulary Ḋ from log-probs (no checks; jit-safe)."""
    pi = jnp.exp(logp)
    mu = jnp.exp(behavior_logp)
    k = sampled[..., None]
    pi_k = jnp.take_along_axis(pi, k, axis=-1)[..., 0]
    if kind == "kl":
        mu_k = jnp.take_along_axis(mu, k, axis=-1)[..., 0]
        local = pi_k - mu_k
        glob = jnp.sum(pi * (mu - pi), axis=-1)
    else:
        s = tie_sign(pi, mu, logp, behavior_logp, log2_terms(pi.shape[-1]))
        s_bar = jnp.sum(s * pi, axis=-1)
        s_k = jnp.take_along_axis(s, k, axis=-1)[..., 0]
        local = 0.5 * pi_k * (s_k - s_bar)
        glob = -0.5 * jnp.sum(pi * pi * (s - s_bar[..., None]), axis=-1)
    return DdotResult(local + glob, local, glob)


def tail_norm2_estimate(r: Reduced, estimator: str) -> Array:
    """The effective tail sum of squares Q-hat of each top-K estimator."""
    pi_t = jnp.exp(r.logpi_tail)
    if estimator == "topk_aggregated":
        return pi_t * pi_t
    if estimator == "topk_uniform":
        n = jnp.maximum(r.n_tail, 1).astype(pi_t.dtype)
        return jnp.where(r.n_tail > 0, pi_t * pi_t / n, 0.0)
    if estimator == "topk_proportional":
        return r.tail_norm2
    raise ValueError(estimator)


def reduced_ddot(r: Reduced, kind: str, estimator: str) -> DdotResult:
    """Ḋ from the support slots and a tail model (no checks; jit-safe)."""
    pi = jnp.where(r.valid, jnp.exp(r.logpi), 0.0)
    mu = jnp.where(r.valid, jnp.exp(r.logmu), 0.0)
    pi_t, mu_t = jnp.exp(r.logpi_tail), jnp.exp(r.logmu_tail)
    pi_k = jnp.sum(jnp.where(r.is_k, pi, 0.0), axis=-1)
    q_hat = tail_norm2_estimate(r, estimator)
    if kind == "kl":
        mu_k = jnp.sum(jnp.where(r.is_k, mu, 0.0), axis=-1)
        local = pi_k - mu_k
        safe = jnp.where(pi_t > 0, pi_t, 1.0)
        tail = jnp.where(pi_t > 0, q_hat * (mu_t / safe - 1.0), 0.0)
        glob = jnp.sum(pi * (mu - pi), axis=-1) + tail
    else:
        s = tie_sign(pi, mu, r.logpi, r.logmu, TAIL_LOG2_TERMS)
        s_t = tie_sign(pi_t, mu_t, r.logpi_tail, r.logmu_tail, TAIL_LOG2_TERMS)
        s_bar = jnp.sum(s * pi, axis=-1) + s_t * pi_t
        s_k = jnp.sum(jnp.where(r.is_k, s, 0.0), axis=-1)
        local = 0.5 * pi_k * (s_k - s_bar)
        inside = jnp.sum(pi * pi * (s - s_bar[..., None]), axis=-1)
        glob = -0.5 * (inside + q_hat * (s_t - s_bar))
    return DdotResult(local + glob, local, glob)


@functools.partial(jax.jit, static_argnames=("kind", "estimator", "topk", "support"))
def _ddot(behavior, logits, sampled, kind, estimator, topk, support):
    logp = jax.nn.log_softmax(logits, axis=-1)
    if estimator == "full":
        return full_ddot(jnp.asarray(behavior, logp.dtype), logp, sampled, kind)
    r = reduce_to_support(behavior, logp, sampled, topk=topk, support=support)
    return reduced_ddot(r, kind, estimator)


def ddot(
    behavior_logp,
    logits: ArrayLike,
    sampled: ArrayLike,
    *,
    kind: str = "kl",
    estimator: str = "full",
    topk: int | None = None,
    support: str = "union",
) -> DdotResult:
    r"""Directional derivative of :math:`D(\mu\|\pi)` along v = e_k - pi (module doc).

    .. math::
        \dot D = \frac{d}{dt} D\big(\mu \,\|\, \mathrm{softmax}(z + t(e_k - \pi))\big)
                 \Big|_{t=0}

    Args:
        behavior_logp: ``[..., V]`` behavior log-probs (``-inf`` allowed), or a
            :class:`TopKBehavior` (top-K estimators only).
        logits: ``[..., V]`` policy logits z.
        sampled: ``[...]`` integer sampled token k.
        kind: ``"kl"`` (forward KL) or ``"tv"``.
        estimator: ``"full"`` (exact), ``"topk_aggregated"``, ``"topk_uniform"`` or
            ``"topk_proportional"``.
        topk: K for the top-K estimators.
        support: ``"union"`` or ``"k_slots"`` (see :func:`divergence`).

    Returns:
        :class:`DdotResult` ``(ddot, local, global_)``, each ``[...]``.

    Examples:
        >>> import numpy as np
        >>> mu = np.log(np.array([0.5, 0.3, 0.2]))
        >>> round(float(ddot(mu, mu, 1).ddot), 6)
        0.0

    References:
        Predictive Divergence Masks (arXiv 2607.10848) Prop. 1 / Eq. 7-11 and
        Appendix D: paper text NOT FOUND; formulas DERIVED (research notes §1.3-1.10).
    """
    kind = choose(Divergence, kind, "kind", DDOT_KINDS)
    estimator = choose(Estimator, estimator, "estimator")
    support = choose(Support, support, "support")
    full = estimator == "full"
    if not full:
        topk = default_topk(behavior_logp, topk)
        _checks.check_topk(topk)
    else:
        topk = None
    validate(behavior_logp, logits, sampled, need_full=full, topk=topk)
    if topk is not None:  # K >= V means the whole vocabulary: one compiled shape
        topk = min(int(topk), jnp.shape(logits)[-1])
    return _ddot(
        behavior_logp,
        jnp.asarray(logits),
        jnp.asarray(sampled),
        kind,
        estimator,
        topk,
        support,
    )

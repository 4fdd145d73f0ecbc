r"""Every divergence, Ḋ and mask for a batch of positions, row-blocked at scale.

:func:`token_stats` evaluates, per position, the quantities of
:mod:`._divergence`, :mod:`._ddot`, :mod:`._second_order` and :mod:`._masks` in one
jitted pass. Rows are processed by ``jax.lax.map`` over blocks of ``block_rows`` rows
(on CPU this beats whole-array kernels: each ``[block_rows, V]`` slab stays in cache,
and no more than a few such slabs are ever alive), so ``[8192, 151936]`` float32 inputs
fit in memory next to their own storage. The full-vocabulary terms come from one fused
pass (:func:`fused_full`); the top-K and second-order terms reuse the single-position
code. Tests hold all of it equal to the single-position API.

Inputs sharded over rows with ``jax.sharding`` work unchanged: the row map is
independent per row, and XLA keeps the shards where they are (see the multidevice test).
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike
from jaxtyping import Array

from theorycheck._errors import BadInput
from theorycheck.numeric import _checks
from theorycheck.numeric._choices import Support, choose
from theorycheck.numeric._ddot import ESTIMATORS, reduced_ddot
from theorycheck.numeric._divergence import (
    reduced_divergence,
    validate,
)
from theorycheck.numeric._second_order import (
    full_radius,
    full_second_order,
)
from theorycheck.numeric._support import reduce_to_support

PARTS = ("full", "topk", "second_order")


class MaskConfig(NamedTuple):
    """Thresholds for :func:`token_stats` (defaults: DPPO / survey settings).

    Args:
        topk: K of the top-K support (clamped to V).
        support: :class:`Support` (``"union"``: DPPO Eq. 15-16; ``"k_slots"``:
            reference code).
        delta_kl: KL threshold (DPPO recommends 0.05).
        delta_tv: TV threshold (DPPO recommends 0.15).
        eps_low: PPO lower clip width.
        eps_high: PPO upper clip width.

    Examples:
        >>> MaskConfig().delta_kl
        0.05
    """

    topk: int = 20
    support: Support = Support.UNION
    delta_kl: float = 0.05
    delta_tv: float = 0.15
    eps_low: float = 0.2
    eps_high: float = 0.2


def _keep(masked: Array, dtype) -> Array:
    return jnp.where(masked, 0, 1).astype(dtype)


def rows_stats(
    behavior_logp, logits, sampled, adv, cfg: MaskConfig, parts: tuple[str, ...] = PARTS
) -> dict[str, Array]:
    """The quantities of ``parts`` for a ``[rows, V]`` block (no checks; jit-safe)."""
    out = fused_full(behavior_logp, logits, sampled)
    dt = out["kl"].dtype
    behavior_logp, adv = behavior_logp.astype(dt), adv.astype(dt)
    topk = "topk" in parts
    if topk or "second_order" in parts:
        logp = jax.nn.log_softmax(logits, axis=-1)
    if topk:
        red = reduce_to_support(
            behavior_logp, logp, sampled, topk=cfg.topk, support=cfg.support
        )
        for kind in ("kl", "tv"):
            out["topk_" + kind] = reduced_divergence(red, "topk_" + kind)
            for est in ESTIMATORS[1:]:
                r = reduced_ddot(red, kind, est)
                out[f"ddot_{kind}_{est}"] = r.ddot
                out[f"local_{kind}_{est}"] = r.local
                out[f"global_{kind}_{est}"] = r.global_
    if "second_order" in parts:
        for kind in ("kl", "tv"):
            out[f"second_order_{kind}"] = full_second_order(
                behavior_logp, logp, sampled, kind
            )
            out[f"radius_{kind}"] = full_radius(behavior_logp, logp, sampled, kind)
    estimators = ESTIMATORS if topk else ESTIMATORS[:1]
    r = out["ratio"]
    up, down = (adv > 0) & (r > 1), (adv < 0) & (r < 1)
    out["mask_ppo"] = _keep(
        ((adv > 0) & (r > 1 + cfg.eps_high)) | ((adv < 0) & (r < 1 - cfg.eps_low)), dt
    )
    for name in ("binary_kl", "binary_tv") + (("topk_kl", "topk_tv") if topk else ()):
        delta = cfg.delta_kl if name.endswith("kl") else cfg.delta_tv
        out["mask_dppo_" + name] = _keep((out[name] > delta) & (up | down), dt)
    for kind in ("kl", "tv"):
        delta = cfg.delta_kl if kind == "kl" else cfg.delta_tv
        for est in estimators:
            div = out[kind] if est == "full" else out["topk_" + kind]
            pushes = jnp.sign(adv) * jnp.sign(out[f"ddot_{kind}_{est}"]) > 0
            out[f"mask_pred_{kind}_{est}"] = _keep((div > delta) & pushes, dt)
    return out


def fused_full(behavior_logp, logits, sampled) -> dict[str, Array]:
    r"""Full-vocabulary D, binary D, ratio and exact Ḋ (KL, TV) in one fused pass.

    The same formulas as ``full_divergence`` / ``full_ddot``, arranged so that XLA
    reads each row once: :math:`e = \exp(z - \max z)`, :math:`\pi = e / \sum e` (no
    second exp), :math:`d = \mu - \pi`, then six row sums. Tested equal to the
    per-position API (``tests/numeric/test_token_stats.py``).
    """
    m = jnp.max(logits, axis=-1, keepdims=True)
    e = jnp.exp(logits - m)
    z_sum = jnp.sum(e, axis=-1, keepdims=True)
    pi = e * (1.0 / z_sum)
    logp = logits - (m + jnp.log(z_sum))
    behavior_logp = behavior_logp.astype(pi.dtype)
    mu = jnp.exp(behavior_logp)
    d = mu - pi
    live = behavior_logp > -jnp.inf
    kl = jnp.sum(
        jnp.where(live, mu * (jnp.where(live, behavior_logp, 0.0) - logp), 0.0), -1
    )
    s = jnp.sign(-d)
    s_bar = jnp.sum(s * pi, axis=-1)
    pi2 = pi * pi
    norm2, norm2_s = jnp.sum(pi2, axis=-1), jnp.sum(pi2 * s, axis=-1)
    k = sampled[..., None]
    lp_k = jnp.take_along_axis(logp, k, axis=-1)[..., 0]
    lm_k = jnp.take_along_axis(behavior_logp, k, axis=-1)[..., 0]
    p_k, q_k = jnp.exp(lp_k), jnp.exp(lm_k)
    s_k = jnp.sign(p_k - q_k)
    out = {
        "ratio": jnp.exp(lp_k - lm_k),
        "kl": kl,
        "tv": 0.5 * jnp.sum(jnp.abs(d), axis=-1),
        "binary_tv": jnp.abs(q_k - p_k),
        "binary_kl": q_k * (lm_k - lp_k)
        + jnp.where(q_k < 1, (1 - q_k) * (jnp.log1p(-q_k) - jnp.log1p(-p_k)), 0.0),
    }
    terms = {
        "kl": (p_k - q_k, jnp.sum(pi * d, axis=-1)),
        "tv": (0.5 * p_k * (s_k - s_bar), -0.5 * (norm2_s - s_bar * norm2)),
    }
    for kind, (local, glob) in terms.items():
        out[f"ddot_{kind}_full"] = local + glob
        out[f"local_{kind}_full"] = local
        out[f"global_{kind}_full"] = glob
    return out


def _block_size(rows: int, block_rows: int) -> int:
    """Largest block size <= block_rows dividing rows (no padded copy of the data)."""
    for b in range(min(block_rows, rows), 0, -1):
        if rows % b == 0:
            return b
    return 1


@functools.partial(jax.jit, static_argnames=("cfg", "block", "parts"))
def _token_stats(behavior_logp, logits, sampled, adv, cfg, block, parts):
    n, v = logits.shape
    shaped = lambda x: x.reshape(n // block, block, *x.shape[1:])
    xs = (shaped(behavior_logp), shaped(logits), shaped(sampled), shaped(adv))
    out = jax.lax.map(lambda a: rows_stats(*a, cfg, parts), xs)
    return {name: x.reshape(n) for name, x in out.items()}


def token_stats(
    behavior_logp: ArrayLike,
    logits: ArrayLike,
    sampled: ArrayLike,
    adv: ArrayLike,
    *,
    config: MaskConfig | None = None,
    block_rows: int = 4,
    check: bool = True,
    parts: tuple[str, ...] = PARTS,
) -> dict[str, Array]:
    r"""Divergences, Ḋ (all estimators), second order, radius and masks, row-blocked.

    .. math::
        M^{pred}_{D,est} = 0 \iff D > \delta \wedge \hat A\,\dot D_{est} > 0

    Args:
        behavior_logp: ``[..., V]`` full behavior log-probs (``-inf`` allowed).
        logits: ``[..., V]`` policy logits (float32 or float64).
        sampled: ``[...]`` integer sampled tokens.
        adv: ``[...]`` advantages.
        config: thresholds, K and support (:class:`MaskConfig`; default settings
            when None).
        block_rows: rows per ``lax.map`` block (2-8 is fastest on CPU).
        check: run the eager input checks (one extra pass over the inputs).
        parts: any of ``"full"`` (always computed: full D, exact Ḋ, binary D, PPO /
            DPPO-binary / full predictive masks), ``"topk"`` (top-K D, the three
            top-K estimators and their masks), ``"second_order"`` (vᵀ∇²D v, radius).

    Returns:
        A dict of ``[...]`` arrays: ``ratio``; divergences ``kl, tv, binary_kl,
        binary_tv, topk_kl, topk_tv``; ``ddot_/local_/global_{kl,tv}_{estimator}``;
        ``second_order_{kl,tv}``; ``radius_{kl,tv}``; masks (1 = keep) ``mask_ppo``,
        ``mask_dppo_{binary_kl,binary_tv,topk_kl,topk_tv}`` and
        ``mask_pred_{kl,tv}_{estimator}`` (full estimator with the full D, top-K
        estimators with the top-K D).

    Examples:
        >>> import numpy as np
        >>> b = np.log(np.full((2, 4), 0.25))
        >>> s = token_stats(b, np.zeros((2, 4)), np.array([0, 1]), np.ones(2))
        >>> s["mask_pred_kl_full"].tolist()
        [1.0, 1.0]

    References:
        DPPO (arXiv 2602.04879) Eq. 12-16 [PAPER]; Predictive Divergence Masks
        (arXiv 2607.10848) Eq. 7-13: text NOT FOUND, DERIVED/INFERRED.
    """
    config = MaskConfig() if config is None else config
    config = config._replace(support=choose(Support, config.support, "support"))
    _checks.check_topk(config.topk)
    for name in ("delta_kl", "delta_tv", "eps_low", "eps_high"):
        _checks.check_nonnegative(name, getattr(config, name))
    if not set(parts) <= set(PARTS):
        raise BadInput(f"parts must be a subset of {PARTS}, got {parts!r}")
    if int(block_rows) < 1:
        raise BadInput(f"block_rows must be >= 1, got {block_rows!r}")
    shape = jnp.shape(logits)
    if check:
        validate(behavior_logp, logits, sampled, need_full=True)
        if np.shape(adv) != shape[:-1]:
            raise BadInput(f"adv has shape {np.shape(adv)}, expected {shape[:-1]}")
        if _checks.is_concrete(adv) and not np.all(np.isfinite(np.asarray(adv))):
            raise BadInput("adv holds a non-finite value")
    config = config._replace(topk=min(int(config.topk), shape[-1]))
    rows = math.prod(shape[:-1])
    flat = lambda x, *tail: jnp.reshape(x, (rows, *tail))
    out = _token_stats(
        flat(behavior_logp, shape[-1]),
        flat(logits, shape[-1]),
        flat(sampled),
        flat(adv),
        config,
        _block_size(rows, int(block_rows)),
        tuple(sorted(set(parts))),
    )
    return {name: x.reshape(shape[:-1]) for name, x in out.items()}

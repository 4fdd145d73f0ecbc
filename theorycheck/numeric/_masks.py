r"""Trust-region masks (1 = keep, 0 = masked), token by token.

PPO ratio mask (the clipped surrogate's zero-gradient region; blog "RL Surrogate Losses
in 2026", PPO rule [PAPER]):

.. math::
    M^{PPO} = 0 \iff (\hat A > 0 \wedge r > 1 + \epsilon_{high})
                     \vee (\hat A < 0 \wedge r < 1 - \epsilon_{low})

DPPO mask, Eq. 12 direction rule (DPPO, arXiv 2602.04879, Eq. 12 [PAPER]):

.. math::
    M^{DPPO} = 0 \iff D > \delta \wedge \big((\hat A > 0 \wedge r > 1)
                     \vee (\hat A < 0 \wedge r < 1)\big)

Predictive divergence mask (Predictive Divergence Masks, arXiv 2607.10848, Eq. 13: paper
text NOT FOUND; structure INFERRED from third-party code, research notes §1.5):

.. math::
    M^{pred} = 0 \iff D > \delta \wedge \hat A \, \dot D > 0

Boundaries are strict (``>``), as in DPPO Eq. 12; the predictive paper's choice is NOT
FOUND. Masks are returned in the floating dtype of the inputs so they multiply losses.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike
from jaxtyping import Array

from theorycheck._errors import BadInput
from theorycheck.numeric import _checks


def _float_dtype(*xs):
    dt = jnp.result_type(*xs)
    return dt if jnp.issubdtype(dt, jnp.floating) else jnp.result_type(float)


def _check_finite(name: str, x, *, allow_inf: bool = False) -> None:
    if _checks.is_concrete(x):
        a = np.asarray(x, dtype=np.float64)
        ok = ~np.isnan(a) if allow_inf else np.isfinite(a)
        if not np.all(ok):
            raise BadInput(f"{name} holds {a[~np.isfinite(a)].flat[0]!r}")


def _check_ratio(ratio) -> None:
    _check_finite("ratio", ratio)
    if _checks.is_concrete(ratio) and np.any(np.asarray(ratio) < 0):
        raise BadInput(f"ratio {np.min(np.asarray(ratio))!r} is negative")


def ratio_mask(
    ratio: ArrayLike, adv: ArrayLike, *, eps_low: float, eps_high: float
) -> Array:
    r"""PPO ratio mask (1 = keep): masks moves of r beyond the clip range, away from 1.

    .. math::
        M = 0 \iff (\hat A > 0 \wedge r > 1 + \epsilon_{high})
                   \vee (\hat A < 0 \wedge r < 1 - \epsilon_{low})

    Args:
        ratio: importance ratio r = pi_k / mu_k, any shape.
        adv: advantage, broadcastable with ``ratio``.
        eps_low: lower clip width (>= 0).
        eps_high: upper clip width (>= 0).

    Returns:
        The mask with the broadcast shape, floating dtype.

    Examples:
        >>> ratio_mask(1.5, 1.0, eps_low=0.2, eps_high=0.2).tolist()
        0.0

    References:
        PPO (Schulman et al. 2017) clipped surrogate; DPPO (arXiv 2602.04879) Eq. 9.
    """
    _check_ratio(ratio)
    _check_finite("adv", adv)
    _checks.check_nonnegative("eps_low", eps_low)
    _checks.check_nonnegative("eps_high", eps_high)
    ratio, adv = jnp.asarray(ratio), jnp.asarray(adv)
    masked = ((adv > 0) & (ratio > 1 + eps_high)) | ((adv < 0) & (ratio < 1 - eps_low))
    return jnp.where(masked, 0, 1).astype(_float_dtype(ratio, adv))


def dppo_mask(
    div: ArrayLike,
    ratio: ArrayLike,
    adv: ArrayLike,
    *,
    delta: float,
    delta_low: float | None = None,
) -> Array:
    r"""DPPO mask with the Eq. 12 direction rule (1 = keep).

    .. math::
        M = 0 \iff D > \delta \wedge \big((\hat A > 0 \wedge r > 1)
                   \vee (\hat A < 0 \wedge r < 1)\big)

    Args:
        div: divergence D (binary or top-K TV/KL), any shape.
        ratio: importance ratio r, broadcastable.
        adv: advantage, broadcastable.
        delta: threshold (used for A > 0, and for A < 0 unless ``delta_low`` is set).
        delta_low: optional separate threshold for A < 0 (reference code's
            ``clip_ratio_low``).

    Returns:
        The mask with the broadcast shape, floating dtype.

    Examples:
        >>> dppo_mask(0.2, 1.3, 1.0, delta=0.15).tolist()
        0.0

    References:
        DPPO (Qi et al., arXiv 2602.04879) Eq. 12 [PAPER]; Stable-RL [CODE].
    """
    _check_finite("div", div, allow_inf=True)
    _check_ratio(ratio)
    _check_finite("adv", adv)
    _checks.check_nonnegative("delta", delta)
    lo = delta if delta_low is None else delta_low
    _checks.check_nonnegative("delta_low", lo)
    div, ratio, adv = jnp.asarray(div), jnp.asarray(ratio), jnp.asarray(adv)
    masked = ((adv > 0) & (ratio > 1) & (div > delta)) | (
        (adv < 0) & (ratio < 1) & (div > lo)
    )
    return jnp.where(masked, 0, 1).astype(_float_dtype(div, ratio, adv))


def predictive_mask(
    div: ArrayLike, ddot: ArrayLike, adv: ArrayLike, *, delta: float
) -> Array:
    r"""Predictive divergence mask (1 = keep): mask iff D > delta and adv * Ḋ > 0.

    .. math::
        M = 0 \iff D > \delta \wedge \hat A \,\dot D > 0

    Args:
        div: divergence D, any shape.
        ddot: its directional derivative Ḋ along v = e_k - pi, broadcastable.
        adv: advantage, broadcastable.
        delta: threshold (>= 0).

    Returns:
        The mask with the broadcast shape, floating dtype.

    Examples:
        >>> predictive_mask(0.2, -0.01, -1.0, delta=0.15).tolist()
        0.0

    References:
        Predictive Divergence Masks (arXiv 2607.10848) Eq. 13: paper text NOT FOUND;
        INFERRED (research notes §1.5).
    """
    _check_finite("div", div, allow_inf=True)
    _check_finite("ddot", ddot)
    _check_finite("adv", adv)
    _checks.check_nonnegative("delta", delta)
    div, ddot, adv = jnp.asarray(div), jnp.asarray(ddot), jnp.asarray(adv)
    # Signs, not the product: adv * ddot can underflow to 0 (XLA flushes subnormals).
    masked = (div > delta) & (jnp.sign(adv) * jnp.sign(ddot) > 0)
    return jnp.where(masked, 0, 1).astype(_float_dtype(div, ddot, adv))

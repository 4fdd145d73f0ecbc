r"""Off-policy corrections and KL penalty estimators, composable with any rule.

A correction turns the per-token log ratio between the anchor and the rollout policy,
:math:`x_{st} = \log\pi_{old}(y_t) - \log\pi_{roll}(y_t)` (verl's decoupled mode; in
bypass mode, or with the rollout log-prob as anchor, the current policy stands in for
:math:`\pi_{old}`), into a detached per-token multiplier :math:`w_{st}` of the rule's
loss: :math:`\ell'_{st} = w_{st}\ell_{st}`, so every coefficient is multiplied by the
same :math:`w_{st}` (:func:`corrected_coefficient`). With :math:`\rho_{st} = e^{x_{st}}`
and the sequence sum :math:`X_s = \sum_t m_{st}x_{st}` (:math:`L_s` valid tokens):

==========================  ========================================================
correction                  :math:`w_{st}`
==========================  ========================================================
``tis_token``               :math:`\min(\rho_{st}, C)` (truncated IS)
``tis_sequence``            :math:`\min(e^{X_s}, C)`
``mis_token``               :math:`\rho_{st}\,[l \le \rho_{st} \le u]` (masked IS)
``mis_sequence``            :math:`e^{X_s}\,[l \le e^{X_s} \le u]`
``icepop``                  :math:`\rho_{st}\,[l \le \rho_{st} \le u]` (closed window)
``geo_mask_sequence``       :math:`[l \le e^{X_s/L_s} \le u]` (weight 1 when kept)
``product_mask_sequence``   :math:`[l \le e^{X_s} \le u]`
``reject_kl``               :math:`[\text{stat} \le u]` (k2, k3) or
                            :math:`[\log l \le \text{stat} \le \log u]` (k1), per
                            token or per sequence (sum, mean, max)
==========================  ========================================================

The rejection statistics follow verl: :math:`k_1 = -x`, :math:`k_2 = x^2/2`,
:math:`k_3 = e^x - 1 - x`, with :math:`x` clamped to ±20. Note :math:`k_1 = -x =
\log(\pi_{roll}/\pi_{old})`: verl's k1 window bounds the *inverse* ratio, which equals
the documented IS-ratio window only for symmetric bounds (:math:`l = 1/u`).

Sources: verl ``compute_rollout_correction_weights``, ``compute_rollout_rejection_mask``
(verl/trainer/ppo/rollout_corr_helper.py) and ``kl_penalty`` (core_algos.py) at
verl-project/verl 1dda039; SkyRL off_policy_correction_utils.py at a956457 (TIS caps 2 /
5, geometric mask [0.99, 1.01], product mask [0.5, 2]); TRL
``vllm_importance_sampling_mode`` (token/sequence truncate/mask, cap 3) at f2cd577;
Miles ``icepop_function`` at 31f1ca9; IcePop (Ling team, 2025, window [0.5, 2]).
"""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from theorycheck._errors import BadInput

#: verl's safety bound on log ratios (exp(20) ~ 4.9e8).
SAFETY = 20.0


@dataclasses.dataclass(frozen=True)
class Correction:
    """A correction's effect on a batch.

    Attributes:
        name: the correction.
        weights: ``[S, T]`` detached multiplier of the per-token loss (0 off-mask).
        truncated: ``[S, T]`` tokens whose weight value was capped.
        rejected: ``[S, T]`` tokens whose loss the correction sets to 0.
    """

    name: str
    weights: np.ndarray
    truncated: np.ndarray
    rejected: np.ndarray


def _arrays(log_ratio, mask):
    x = np.asarray(log_ratio, dtype=np.float64)
    m = np.asarray(mask, dtype=np.float64)
    if x.shape != m.shape or x.ndim != 2:
        raise BadInput(
            f"log_ratio {x.shape} and mask {m.shape} must be the same [S, T] shape"
        )
    return np.clip(x, -SAFETY, SAFETY), m


def _seq(x, m):
    return np.sum(m * x, axis=1, keepdims=True) + np.zeros_like(x)


def _none(x):
    return np.zeros(x.shape, dtype=bool)


def _window(low, high):
    if not (0 <= low <= high):
        raise BadInput(f"window [{low}, {high}]: need 0 <= low <= high")


def _result(name, w, m, truncated, rejected):
    valid = m > 0
    return Correction(name, w * m, truncated & valid, rejected & valid)


def tis_token(log_ratio: ArrayLike, mask: ArrayLike, cap: float = 2.0) -> Correction:
    r"""Token-level truncated IS: :math:`w = \min(\rho_{st}, C)`.

    Args:
        log_ratio: ``[S, T]`` :math:`x = \log\pi_{old} - \log\pi_{roll}`.
        mask: ``[S, T]`` response mask.
        cap: C (verl ``rollout_is_threshold`` 2; SkyRL token cap 2).

    Returns:
        A :class:`Correction`.

    References:
        verl ``compute_rollout_correction_weights`` (``rollout_is="token"``); SkyRL
        ``tis_ratio_type="token"``; TRL ``token_truncate``.
    """
    x, m = _arrays(log_ratio, mask)
    rho = np.exp(x)
    return _result("tis_token", np.minimum(rho, cap), m, rho > cap, _none(x))


def tis_sequence(log_ratio: ArrayLike, mask: ArrayLike, cap: float = 5.0) -> Correction:
    r"""Sequence-level truncated IS: :math:`w = \min(e^{X_s}, C)` on every token.

    Args:
        log_ratio: ``[S, T]`` log ratios.
        mask: ``[S, T]`` response mask.
        cap: C (SkyRL sequence cap 5; verl uses ``rollout_is_threshold``, 2).

    Returns:
        A :class:`Correction`.

    References:
        verl ``rollout_is="sequence"`` (sum clamped to ±20); SkyRL
        ``tis_ratio_type="sequence"``; TRL ``sequence_truncate``.
    """
    x, m = _arrays(log_ratio, mask)
    rho = np.exp(np.clip(_seq(x, m), -SAFETY, SAFETY))
    return _result("tis_sequence", np.minimum(rho, cap), m, rho > cap, _none(x))


def mis_token(
    log_ratio: ArrayLike, mask: ArrayLike, low: float = 0.0, high: float = 3.0
) -> Correction:
    r"""Token-level masked IS: :math:`w = \rho_{st}` inside :math:`[l, u]`, else 0.

    Args:
        log_ratio: ``[S, T]`` log ratios.
        mask: ``[S, T]`` response mask.
        low: l (TRL ``vllm_importance_sampling_clip_min``, unset = 0).
        high: u (TRL ``vllm_importance_sampling_clip_max``, 3).

    Returns:
        A :class:`Correction`.

    References:
        TRL ``vllm_importance_sampling_mode="token_mask"``.
    """
    _window(low, high)
    x, m = _arrays(log_ratio, mask)
    rho = np.exp(x)
    out = (rho < low) | (rho > high)
    return _result("mis_token", np.where(out, 0.0, rho), m, _none(x), out)


def mis_sequence(
    log_ratio: ArrayLike, mask: ArrayLike, low: float = 0.0, high: float = 3.0
) -> Correction:
    r"""Sequence-level masked IS: :math:`w = e^{X_s}` inside :math:`[l, u]`, else 0.

    Args:
        log_ratio: ``[S, T]`` log ratios.
        mask: ``[S, T]`` response mask.
        low: l (TRL clip_min, unset = 0).
        high: u (TRL clip_max, 3).

    Returns:
        A :class:`Correction`.

    References:
        TRL ``vllm_importance_sampling_mode="sequence_mask"`` (its default mode).
    """
    _window(low, high)
    x, m = _arrays(log_ratio, mask)
    rho = np.exp(np.clip(_seq(x, m), -SAFETY, SAFETY))
    out = (rho < low) | (rho > high)
    return _result("mis_sequence", np.where(out, 0.0, rho), m, _none(x), out)


def icepop(
    log_ratio: ArrayLike, mask: ArrayLike, low: float = 0.5, high: float = 2.0
) -> Correction:
    r"""IcePop: keep the token's ratio as its weight inside the closed window.

    .. math::
        w = \rho_{st}\,[l \le \rho_{st} \le u]

    Args:
        log_ratio: ``[S, T]`` log ratios.
        mask: ``[S, T]`` response mask.
        low: l (IcePop 0.5; Miles ``tis_clip_low`` 0).
        high: u (IcePop 2; Miles ``tis_clip`` 2).

    Returns:
        A :class:`Correction`.

    References:
        IcePop (Ling team, 2025); Miles ``icepop_function``; SkyRL token mask
        (closed interval, weight 1 instead of ρ).
    """
    c = mis_token(log_ratio, mask, low, high)
    return dataclasses.replace(c, name="icepop")


def geo_mask_sequence(
    log_ratio: ArrayLike, mask: ArrayLike, low: float = 0.99, high: float = 1.01
) -> Correction:
    r"""Geometric sequence mask: keep a response iff :math:`l \le e^{X_s/L_s} \le u`.

    Args:
        log_ratio: ``[S, T]`` log ratios.
        mask: ``[S, T]`` response mask.
        low: l (SkyRL ``geo_mask_low`` 0.99).
        high: u (SkyRL ``geo_mask_high`` 1.01).

    Returns:
        A :class:`Correction` (weight 1 on kept responses).

    References:
        SkyRL ``sequence_mask_metric="geometric"`` (SkyRL #1665 asks how it behaves).
    """
    _window(low, high)
    x, m = _arrays(log_ratio, mask)
    lengths = np.maximum(m.sum(axis=1, keepdims=True), 1.0)
    geo = np.exp(_seq(x, m) / lengths)
    out = (geo < low) | (geo > high)
    return _result("geo_mask_sequence", np.where(out, 0.0, 1.0), m, _none(x), out)


def product_mask_sequence(
    log_ratio: ArrayLike, mask: ArrayLike, low: float = 0.5, high: float = 2.0
) -> Correction:
    r"""Product sequence mask: keep a response iff :math:`l \le e^{X_s} \le u`.

    Args:
        log_ratio: ``[S, T]`` log ratios.
        mask: ``[S, T]`` response mask.
        low: l (SkyRL 0.5).
        high: u (SkyRL 2).

    Returns:
        A :class:`Correction`.

    References:
        SkyRL ``sequence_mask_metric="product"``.
    """
    _window(low, high)
    x, m = _arrays(log_ratio, mask)
    prod = np.exp(np.clip(_seq(x, m), -SAFETY, SAFETY))
    out = (prod < low) | (prod > high)
    name = "product_mask_sequence"
    return _result(name, np.where(out, 0.0, 1.0), m, _none(x), out)


_LEVELS = ("token", "seq_sum", "seq_mean", "seq_max")


def reject_kl(
    log_ratio: ArrayLike,
    mask: ArrayLike,
    estimator: str = "k3",
    level: str = "token",
    upper: float = 0.01,
    lower: float | None = None,
) -> Correction:
    r"""verl's rejection sampling by a k1 / k2 / k3 statistic, per token or sequence.

    .. math::
        k_1 = -x,\quad k_2 = x^2/2,\quad k_3 = e^x - 1 - x;\qquad
        \text{keep} = \begin{cases}\log l \le \text{stat} \le \log u & k_1\\
        \text{stat} \le u & k_2, k_3\end{cases}

    Args:
        log_ratio: ``[S, T]`` log ratios x.
        mask: ``[S, T]`` response mask.
        estimator: ``"k1"``, ``"k2"`` or ``"k3"``.
        level: ``"token"``, ``"seq_sum"``, ``"seq_mean"`` or ``"seq_max"`` (verl has no
            ``seq_max_k1``).
        upper: u.
        lower: l (k1 only; ``None`` = 1/u, as verl's single-float threshold).

    Returns:
        A :class:`Correction` (weight 1 on kept tokens).

    References:
        verl ``compute_rollout_rejection_mask`` (``rollout_rs`` options ``token_k1``
        ... ``seq_max_k3``).
    """
    if estimator not in ("k1", "k2", "k3") or level not in _LEVELS:
        raise BadInput(
            f"reject_kl: estimator {estimator!r} / level {level!r}; expected k1, k2, "
            f"k3 and one of {', '.join(_LEVELS)}"
        )
    if level == "seq_max" and estimator == "k1":
        raise BadInput("reject_kl: verl has no seq_max_k1")
    x, m = _arrays(log_ratio, mask)
    stat = {"k1": -x, "k2": 0.5 * x**2, "k3": np.expm1(x) - x}[estimator]
    if level == "seq_sum":
        stat = _seq(stat, m)
    elif level == "seq_mean":
        stat = _seq(stat, m) / np.maximum(m.sum(axis=1, keepdims=True), 1e-8)
    elif level == "seq_max":
        peak = np.where(m > 0, stat, -np.inf).max(axis=1, keepdims=True)
        stat = np.where(np.isfinite(peak), peak, 0.0) + np.zeros_like(x)
    if estimator == "k1":
        lo = 1.0 / upper if lower is None else lower
        keep = (stat >= math.log(lo)) & (stat <= math.log(upper))
    else:
        keep = stat <= upper
    name = f"reject_{level}_{estimator}"
    return _result(name, keep.astype(np.float64), m, _none(x), ~keep)


#: correction name -> function, for ``audit --corrections``.
CORRECTIONS = {
    f.__name__: f
    for f in (
        tis_token,
        tis_sequence,
        mis_token,
        mis_sequence,
        icepop,
        geo_mask_sequence,
        product_mask_sequence,
        reject_kl,
    )
}


def combine(*corrections: Correction) -> Correction:
    """Several corrections applied together: weights multiply, masks OR (verl ANDs
    its rejection options; SkyRL applies its masks and TIS in sequence)."""
    if not corrections:
        raise BadInput("combine: give at least one correction")
    w = np.prod([c.weights for c in corrections], axis=0)
    trunc = np.any([c.truncated for c in corrections], axis=0)
    rej = np.any([c.rejected for c in corrections], axis=0)
    return Correction("+".join(c.name for c in corrections), w, trunc, rej)


def corrected_coefficient(coefficient: ArrayLike, correction: Correction) -> np.ndarray:
    r"""A rule's coefficients under a correction: :math:`c'_{st} = w_{st}c_{st}`.

    Args:
        coefficient: ``[S, T]`` coefficients of any rule.
        correction: a :class:`Correction` of the same shape.

    Returns:
        ``[S, T]`` corrected coefficients.
    """
    return np.asarray(coefficient) * correction.weights


def sequence_ratio_stats(log_ratio: ArrayLike, mask: ArrayLike) -> dict:
    r"""Why sequence ratios explode: per response, the summed log ratio
    :math:`X_s = L_s\bar x_s` grows with the length (0.012 per token over 100 tokens is
    :math:`e^{1.2} \approx 3.3`).

    Args:
        log_ratio: ``[S, T]`` log ratios.
        mask: ``[S, T]`` response mask.

    Returns:
        JSON-ready dict: ``mean_token_log_ratio``, ``mean_abs_token_log_ratio``,
        ``mean_length``, quantiles (``min``, ``median``, ``max``) of the product ratio
        :math:`e^{X_s}` and of the geometric ratio :math:`e^{X_s/L_s}` over non-empty
        responses.
    """
    x, m = _arrays(log_ratio, mask)
    lengths = m.sum(axis=1)
    ok = lengths > 0
    if not ok.any():
        return {"responses": 0}
    total = np.sum(m * x, axis=1)[ok]
    geo = total / lengths[ok]
    prod = np.exp(np.clip(total, -SAFETY, SAFETY))

    def q(v):
        return {
            "min": float(np.min(v)),
            "median": float(np.median(v)),
            "max": float(np.max(v)),
        }

    return {
        "responses": int(ok.sum()),
        "mean_length": float(lengths[ok].mean()),
        "mean_token_log_ratio": float(np.sum(m * x) / m.sum()),
        "mean_abs_token_log_ratio": float(np.sum(m * np.abs(x)) / m.sum()),
        "product_ratio": q(prod),
        "geometric_ratio": q(np.exp(geo)),
    }


# --- KL penalty estimators (per token, differentiable) --------------------------------


def kl_k1(logp: ArrayLike, ref_logp: ArrayLike) -> jax.Array:
    r"""k1: :math:`\log\pi - \log\pi_{ref}` (unbiased value of KL(π‖π_ref), gradient
    biased). verl ``kl_penalty="k1"``; Schulman (2020) "Approximating KL divergence"."""
    return jnp.asarray(logp) - jnp.asarray(ref_logp)


def kl_k2(logp: ArrayLike, ref_logp: ArrayLike) -> jax.Array:
    r"""k2: :math:`\tfrac12(\log\pi - \log\pi_{ref})^2`; its gradient is the unbiased
    KL gradient. verl ``"k2"``/``"mse"``."""
    d = jnp.asarray(logp) - jnp.asarray(ref_logp)
    return 0.5 * d * d


def kl_k3(logp: ArrayLike, ref_logp: ArrayLike) -> jax.Array:
    r"""k3 (low-variance KL): :math:`e^{u} - u - 1`, :math:`u = \operatorname{clip}(
    \log\pi_{ref} - \log\pi, \pm 20)`, the result clipped to ±10 (verl
    ``"low_var_kl"``/``"k3"``; TRL's ``beta`` term and SkyRL ``k3`` are the same
    expression)."""
    u = jnp.clip(jnp.asarray(ref_logp) - jnp.asarray(logp), -20.0, 20.0)
    return jnp.clip(jnp.expm1(u) - u, -10.0, 10.0)


def kl_straight_through(
    logp: ArrayLike, ref_logp: ArrayLike, estimator: str = "k3"
) -> jax.Array:
    r"""Straight-through KL: the value of k1 or k3, the gradient of k2.

    .. math::
        k_2 - \operatorname{sg}(k_2) + \operatorname{sg}(k)

    Args:
        logp: log π (carries the gradient).
        ref_logp: log π_ref.
        estimator: ``"k1"`` or ``"k3"`` (verl ``"k1+"`` / ``"k3+"``; ``"k2+"`` is k2).

    Returns:
        The per-token penalty.

    References:
        verl ``kl_penalty`` with a ``+`` suffix (verl-project/verl 1dda039).
    """
    forward = {"k1": kl_k1, "k2": kl_k2, "k3": kl_k3}.get(estimator)
    if forward is None:
        raise BadInput(f"estimator {estimator!r}: expected k1, k2 or k3")
    back = kl_k2(logp, ref_logp)
    value = forward(logp, ref_logp)
    return back - jax.lax.stop_gradient(back) + jax.lax.stop_gradient(value)

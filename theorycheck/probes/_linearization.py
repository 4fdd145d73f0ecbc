r"""NTK-linearization residuals of a real parameter update (LCO Assumption 4.2).

The LCO stability argument (arXiv 2603.00963, Assumption 4.2 / Eq. 14; the paper's text
is NOT FOUND, research notes §2, so the form below is the spec) linearizes the logits in
the parameters,

.. math::
    z(\theta + \alpha\Delta\theta) \approx z(\theta) + \alpha J\Delta\theta,
    \qquad J = \partial z / \partial\theta .

For an actual update :math:`\Delta\theta` and a grid of scales α this module measures,
per token t (one row of logits over the vocabulary),

.. math::
    \rho_t(\alpha) = \frac{\lVert z_t(\theta+\alpha\Delta\theta) - z_t(\theta)
    - \alpha (J\Delta\theta)_t\rVert_2}{\lVert z_t(\theta+\alpha\Delta\theta)
    - z_t(\theta)\rVert_2},

with :math:`J\Delta\theta` from ONE ``jax.jvp`` (J is never formed), and the first-order
predictions of the quantities a user cares about against their realized change: the
sampled token's log-probability (:math:`\nabla_z\log\pi_k = e_k - \pi`), the forward KL
:math:`D(\mu\|\pi)` (:math:`\nabla_z D = \pi - \mu`) and the loss
(:math:`\nabla_z L` from ``jax.grad``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax import Array
from jaxtyping import Float

from theorycheck._errors import BadInput
from theorycheck.probes._taylor import kl_rows

ApplyFn = Callable[[Any, Any], Float[Array, "... V"]]


class TokenInputs(NamedTuple):
    """What the per-token first-order predictions need, flattened to N positions.

    Attributes:
        mask: ``[N]`` 1 where a position counts (response tokens), 0 elsewhere.
        sampled: ``[N]`` sampled token k at each position.
        behavior_logp: ``[N, V]`` log μ (the rollout anchor), or None (no D).
    """

    mask: Array
    sampled: Array
    behavior_logp: Array | None = None


class Linearization(NamedTuple):
    """Residuals and predicted vs realized changes over an α grid (``[A, N]`` arrays).

    Attributes:
        alphas: ``[A]`` the scales of the update.
        residual: ``[A, N]`` per-token relative residual ρ_t(α) (NaN where the token
            did not move at all).
        dz_norm: ``[A, N]`` ‖z_t(θ+αΔθ) − z_t(θ)‖.
        logp_pred, logp_real: ``[A, N]`` predicted (first order) and realized change
            of log π_k.
        logp_lin: ``[A, N]`` its change under the linearized logits
            z(θ) + αJΔθ (exact in z: isolates Assumption 4.2 from the curvature of
            the function of z).
        div_pred, div_real, div_lin: ``[A, N]`` the same for D(μ‖π) (zeros without
            μ).
        loss_pred, loss_real, loss_lin: ``[A]`` the same for the loss (NaN without a
            loss).
        mask: ``[N]`` the positions that count.
    """

    alphas: np.ndarray
    residual: np.ndarray
    dz_norm: np.ndarray
    logp_pred: np.ndarray
    logp_real: np.ndarray
    logp_lin: np.ndarray
    div_pred: np.ndarray
    div_real: np.ndarray
    div_lin: np.ndarray
    loss_pred: np.ndarray
    loss_real: np.ndarray
    loss_lin: np.ndarray
    mask: np.ndarray


@functools.partial(jax.jit, static_argnums=0)
def _jvp(apply_fn, params, delta, batch):
    return jax.jvp(lambda q: apply_fn(q, batch), (params,), (delta,))


@functools.partial(jax.jit, static_argnums=0)
def _apply(apply_fn, params, batch):
    return apply_fn(params, batch)


def _flat(z: Array) -> Array:
    return z.reshape(-1, z.shape[-1])


def linearization_curve(
    apply_fn: ApplyFn,
    params,
    delta,
    batch,
    tokens: TokenInputs,
    *,
    alphas: Sequence[float],
    loss_fn: Callable[[Array], Array] | None = None,
) -> Linearization:
    r"""Per-token linearization residuals of the update ``delta`` scaled by each α.

    .. math::
        \rho_t(\alpha) = \lVert \Delta z_t - \alpha (J\Delta\theta)_t\rVert /
        \lVert \Delta z_t\rVert,\quad \Delta z = z(\theta+\alpha\Delta\theta)-z(\theta)

    Predicted changes (first order in α): :math:`\alpha\langle e_k-\pi,
    (J\Delta\theta)_t\rangle` for log π_k, :math:`\alpha\langle \pi-\mu,
    (J\Delta\theta)_t\rangle` for D(μ‖π), :math:`\alpha\langle\nabla_z L,
    J\Delta\theta\rangle` for the loss.

    Args:
        apply_fn: ``(params, batch) -> logits [..., V]``; the leading axes flatten to
            the N positions of ``tokens``.
        params: θ (a pytree).
        delta: Δθ (same structure).
        batch: passed to ``apply_fn`` unchanged.
        tokens: mask, sampled tokens and (optionally) the behavior log-probs.
        alphas: positive scales.
        loss_fn: optional ``logits [..., V] -> scalar`` (the training loss with its
            targets/anchors frozen).

    Returns:
        :class:`Linearization`.

    Examples:
        >>> import jax.numpy as jnp
        >>> f = lambda p, x: jnp.stack([p * x, p**2 * x])[None]
        >>> toks = TokenInputs(mask=jnp.ones(1), sampled=jnp.zeros(1, int))
        >>> out = linearization_curve(f, 1.0, 1.0, 1.0, toks, alphas=[0.1])
        >>> round(float(out.residual[0, 0]), 4)  # quadratic term 0.01, change 0.2326
        0.043
    """
    alphas = np.asarray(alphas, dtype=float)
    if alphas.ndim != 1 or alphas.size == 0 or not np.all(alphas > 0):
        raise BadInput(f"alphas = {alphas.tolist()} must be a non-empty list of α > 0")
    z0, jd = _jvp(apply_fn, params, delta, batch)
    shape = z0.shape
    z0f, jdf = _flat(z0), _flat(jd)
    mask = jnp.asarray(tokens.mask).reshape(-1)
    sampled = jnp.asarray(tokens.sampled).reshape(-1)
    if mask.shape[0] != z0f.shape[0] or sampled.shape[0] != z0f.shape[0]:
        raise BadInput(
            f"token inputs cover {mask.shape[0]} positions; the logits have "
            f"{z0f.shape[0]}"
        )
    logp0 = jax.nn.log_softmax(z0f, axis=-1)
    pi0 = jnp.exp(logp0)
    rows = jnp.arange(z0f.shape[0])
    dlogp_dir = jdf[rows, sampled] - jnp.sum(pi0 * jdf, axis=-1)
    blogp = tokens.behavior_logp
    if blogp is not None:
        blogp = _flat(jnp.asarray(blogp))
        ddiv_dir = jnp.sum((pi0 - jnp.exp(blogp)) * jdf, axis=-1)
        div0 = kl_rows(blogp, z0f)
    if loss_fn is not None:
        loss0, gz = jax.value_and_grad(loss_fn)(z0)
        dloss_dir = jnp.vdot(gz, jd)

    keys = ("residual", "dz", "lp", "lr", "ll", "dp", "dr", "dl", "Lp", "Lr", "Ll")
    out = {k: [] for k in keys}
    for a in alphas:
        za = _apply(apply_fn, optax.tree.add_scale(params, a, delta), batch)
        dz = _flat(za) - z0f
        num = jnp.linalg.norm(dz - a * jdf, axis=-1)
        den = jnp.linalg.norm(dz, axis=-1)
        out["residual"].append(
            jnp.where(den > 0, num / jnp.where(den > 0, den, 1), jnp.nan)
        )
        out["dz"].append(den)
        zl = z0f + a * jdf
        logpa = jax.nn.log_softmax(_flat(za), axis=-1)
        logpl = jax.nn.log_softmax(zl, axis=-1)
        out["lp"].append(a * dlogp_dir)
        out["lr"].append(logpa[rows, sampled] - logp0[rows, sampled])
        out["ll"].append(logpl[rows, sampled] - logp0[rows, sampled])
        zeros = jnp.zeros_like(den)
        if blogp is not None:
            out["dp"].append(a * ddiv_dir)
            out["dr"].append(kl_rows(blogp, _flat(za)) - div0)
            out["dl"].append(kl_rows(blogp, zl) - div0)
        else:
            out["dp"].append(zeros)
            out["dr"].append(zeros)
            out["dl"].append(zeros)
        if loss_fn is not None:
            out["Lp"].append(a * dloss_dir)
            out["Lr"].append(loss_fn(za.reshape(shape)) - loss0)
            out["Ll"].append(loss_fn(zl.reshape(shape)) - loss0)
        else:
            for k in ("Lp", "Lr", "Ll"):
                out[k].append(jnp.nan)
    arr = {
        k: np.asarray(jnp.stack([jnp.asarray(x) for x in v])) for k, v in out.items()
    }
    return Linearization(
        alphas=alphas,
        residual=arr["residual"],
        dz_norm=arr["dz"],
        logp_pred=arr["lp"],
        logp_real=arr["lr"],
        logp_lin=arr["ll"],
        div_pred=arr["dp"],
        div_real=arr["dr"],
        div_lin=arr["dl"],
        loss_pred=arr["Lp"],
        loss_real=arr["Lr"],
        loss_lin=arr["Ll"],
        mask=np.asarray(mask),
    )


def _relative_error(pred: np.ndarray, real: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.abs(pred - real) / np.abs(real)


def summarize(curve: Linearization) -> dict:
    """Per-α summaries over the masked tokens (plain floats, JSON-ready).

    Per α: the median, mean and 90th percentile of ρ_t; the aggregate residual
    ‖Δz − αJΔθ‖/‖Δz‖ over all masked tokens together; for log π_k and D(μ‖π) the median
    relative error of the first-order prediction (``*_relerr_median``) and of the
    linearized-logits prediction (``*_lin_relerr_median``) and the share of tokens
    whose first-order sign is the realized one; for the loss the same two relative
    errors.

    Args:
        curve: from :func:`linearization_curve`.

    Returns:
        ``{"alphas": [...], "<statistic>": [... one per α]}``.
    """
    keep = curve.mask > 0
    res = curve.residual[:, keep]
    dz = curve.dz_norm[:, keep]
    num = np.sqrt(np.nansum((res * dz) ** 2, axis=1))
    den = np.sqrt(np.nansum(dz**2, axis=1))

    def sign_agree(p, r):
        return np.mean(np.sign(p[:, keep]) == np.sign(r[:, keep]), axis=1)

    def med_rel(p, r):
        return np.nanmedian(_relative_error(p[:, keep], r[:, keep]), axis=1)

    out = {
        "alphas": curve.alphas.tolist(),
        "tokens": int(keep.sum()),
        "residual_median": np.nanmedian(res, axis=1).tolist(),
        "residual_mean": np.nanmean(res, axis=1).tolist(),
        "residual_p90": np.nanpercentile(res, 90, axis=1).tolist(),
        "residual_aggregate": (num / den).tolist(),
        "logp_relerr_median": med_rel(curve.logp_pred, curve.logp_real).tolist(),
        "logp_sign_agreement": sign_agree(curve.logp_pred, curve.logp_real).tolist(),
        "logp_lin_relerr_median": med_rel(curve.logp_lin, curve.logp_real).tolist(),
        "loss_relerr": _relative_error(curve.loss_pred, curve.loss_real).tolist(),
        "loss_lin_relerr": _relative_error(curve.loss_lin, curve.loss_real).tolist(),
        "loss_pred": curve.loss_pred.tolist(),
        "loss_real": curve.loss_real.tolist(),
    }
    if np.any(curve.div_real[:, keep] != 0):
        out["div_relerr_median"] = med_rel(curve.div_pred, curve.div_real).tolist()
        out["div_sign_agreement"] = sign_agree(curve.div_pred, curve.div_real).tolist()
        out["div_lin_relerr_median"] = med_rel(curve.div_lin, curve.div_real).tolist()
    return out


def crossing_alpha(
    alphas: Sequence[float], values: Sequence[float], level: float
) -> dict:
    r"""The smallest α at which a residual curve reaches ``level``.

    Interpolates linearly in :math:`(\log\alpha, \log\rho)` between the two grid
    points around the first crossing.

    Args:
        alphas: increasing α grid.
        values: the curve on that grid (e.g. the median residual).
        level: the threshold (0.1 for 10%, 0.5 for 50%).

    Returns:
        ``{"alpha": float | None, "kind": "interpolated" | "below_grid" |
        "not_reached"}``: ``below_grid`` = already above at the smallest α (the
        crossing is ≤ that α); ``not_reached`` = below on the whole grid.

    Examples:
        >>> round(crossing_alpha([0.1, 1.0, 10.0], [0.01, 0.1, 1.0], 0.5)["alpha"], 3)
        5.0
    """
    a = np.asarray(alphas, float)
    v = np.asarray(values, float)
    if a.shape != v.shape or a.ndim != 1 or np.any(np.diff(a) <= 0):
        raise BadInput("alphas must be increasing and match the curve's length")
    above = np.nonzero(v >= level)[0]
    if above.size == 0:
        return {"alpha": None, "kind": "not_reached"}
    i = int(above[0])
    if i == 0:
        return {"alpha": float(a[0]), "kind": "below_grid"}
    x0, x1 = np.log(a[i - 1]), np.log(a[i])
    y0, y1 = np.log(max(v[i - 1], 1e-300)), np.log(v[i])
    t = (np.log(level) - y0) / (y1 - y0) if y1 != y0 else 1.0
    return {"alpha": float(np.exp(x0 + t * (x1 - x0))), "kind": "interpolated"}

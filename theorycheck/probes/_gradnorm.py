r"""Gradient-norm bounds through the logit Jacobian (LCO Props. 4.4 and 4.7).

For a loss of the logits, :math:`L(\theta) = \ell(z_\theta)`, the chain rule gives
:math:`\nabla_\theta L = J^\top\nabla_z\ell` with :math:`J = \partial z/\partial\theta`,
hence

.. math::
    \lVert\nabla_\theta L\rVert \le \sigma_{\max}(J)\,\lVert\nabla_z \ell\rVert .

The LCO paper's Prop. 4.7 (Eqs. 16-18; text NOT FOUND, research notes §2.5: the form
"with σ_max" is INFERRED) combines this with a bound of the logit gradient by the loss
value. For the registered LCO forms the DERIVED per-token bounds used here are
:math:`\lVert\nabla_z\ell_t\rVert^2 \le \kappa\,\ell_t` with κ from :data:`KAPPA`
(MSE: equality; log-cosh: :math:`\tanh^2 x \le 2\log\cosh x`; KL and SFT:
:math:`\lVert p-q\rVert_2^2 \le \lVert p-q\rVert_1^2 \le 2\,\mathrm{KL}` by Pinsker), so
for :math:`L = \sum_t w_t \ell_t`

.. math::
    \lVert\nabla_\theta L\rVert \le \sigma_{\max}(J)\sqrt{\textstyle\sum_t w_t^2
    \kappa\,\ell_t}.

σ_max(J) comes from power iteration on :math:`J^\top J` with one ``jax.jvp`` and one
``jax.vjp`` per iteration; J is never formed.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import optax
from jax import Array

from theorycheck._errors import BadInput
from theorycheck.probes._linearization import ApplyFn


def kappa(name: str, vocab: int) -> float:
    r"""κ in :math:`\lVert\nabla_z\ell\rVert^2 \le \kappa\,\ell` for a registered loss.

    Args:
        name: ``sft``, ``lco_mse``, ``lco_lch``, ``lco_kld`` or their ``_code`` forms.
        vocab: V (the paper forms normalise by it).

    Returns:
        κ (DERIVED; see the module docstring).

    Examples:
        >>> kappa("lco_mse", 4), kappa("lco_kld", 4)
        (0.5, 2.0)
    """
    table = {
        "lco_mse": 2.0 / vocab,  # ℓ = |d|²/(2V), ∇ = d/V: |∇|² = 2ℓ/V exactly
        "lco_lch": 2.0 / vocab,  # ℓ = Σ logcosh(d)/V, ∇ = tanh(d)/V
        "lco_kld": 2.0,  # ∇ = π − π*, Pinsker
        "sft": 2.0,  # ∇ = π − e_k, |π − e_k|² ≤ 2(1 − π_k) ≤ 2(−log π_k)
        "lco_mse_code": 4.0,  # ℓ = Σ (A/β)², ∇ = −2A/β
        "lco_lch_code": 2.0,
        "lco_kld_code": 2.0,
    }
    if name not in table:
        raise BadInput(
            f"loss {name!r} has no loss-based gradient bound; known: {sorted(table)}"
        )
    return table[name]


class SigmaMax(NamedTuple):
    """A power-iteration estimate of σ_max(J).

    Attributes:
        value: the final estimate ‖JᵀJv‖/‖Jv‖ (a lower bound on σ_max; it increases
            to σ_max as v converges).
        history: ``[iters]`` the estimate after each iteration.
        vector: the last unit vector v (warm start for the next call).
    """

    value: float
    history: np.ndarray
    vector: object


@functools.lru_cache(maxsize=32)
def power_iteration_fn(apply_fn: ApplyFn, iters: int) -> Callable:
    r"""A jitted ``(params, batch, mask, v0) -> (sigma, history, v)`` (power iteration).

    J is the Jacobian of the masked logits ``apply_fn(params, batch) * mask[..., None]``
    (positions with mask 0 do not count). Each iteration: :math:`u = Jv`,
    :math:`w = J^\top u`, estimate :math:`\lVert w\rVert/\lVert u\rVert` (between
    :math:`\lVert Jv\rVert` and σ_max by Cauchy-Schwarz), :math:`v \leftarrow
    w/\lVert w\rVert`.

    Args:
        apply_fn: ``(params, batch) -> logits [..., V]``.
        iters: iterations per call (static).

    Returns:
        The jitted function.
    """

    def run(params, batch, mask, v0):
        def f(p):
            z = apply_fn(p, batch)
            return z * mask.reshape(z.shape[:-1])[..., None].astype(z.dtype)

        _, jvp = jax.linearize(f, params)
        vjp = jax.linear_transpose(jvp, params)

        def body(i, carry):
            v, hist = carry
            u = jvp(v)
            (w,) = vjp(u)
            wn = optax.tree.norm(w)
            hist = hist.at[i].set(wn / jnp.maximum(jnp.linalg.norm(u), 1e-300))
            return jax.tree_util.tree_map(lambda a: a / wn, w), hist

        v0 = jax.tree_util.tree_map(lambda a: a / optax.tree.norm(v0), v0)
        dtype = jax.tree_util.tree_leaves(params)[0].dtype
        v, hist = jax.lax.fori_loop(0, iters, body, (v0, jnp.zeros(iters, dtype)))
        return hist[-1], hist, v

    return jax.jit(run)


def sigma_max(
    apply_fn: ApplyFn,
    params,
    batch,
    mask,
    *,
    iters: int = 30,
    key: Array | None = None,
    init=None,
) -> SigmaMax:
    r"""σ_max of the logit Jacobian by power iteration on :math:`J^\top J`.

    Args:
        apply_fn: ``(params, batch) -> logits [..., V]``.
        params: θ.
        batch: passed to ``apply_fn``.
        mask: ``[...]`` 1 for the positions whose logits count.
        iters: power iterations.
        key: PRNG key for the random start (when ``init`` is None).
        init: a start vector (same structure as ``params``), e.g. a previous
            :attr:`SigmaMax.vector`.

    Returns:
        :class:`SigmaMax`.
    """
    if iters < 1:
        raise BadInput(f"iters = {iters} must be ≥ 1")
    if init is None:
        init = optax.tree.random_like(jr.key(0) if key is None else key, params)
    s, hist, v = power_iteration_fn(apply_fn, iters)(
        params, batch, jnp.asarray(mask), init
    )
    return SigmaMax(float(s), np.asarray(hist), v)


@functools.lru_cache(maxsize=32)
def gradient_terms_fn(apply_fn: ApplyFn, loss_fn: Callable) -> Callable:
    r"""A jitted ``(params, batch, inputs) -> dict`` of the chain-rule terms.

    ``loss_fn(logits, inputs) -> (L, token_losses)``. Returns ``loss``,
    ``token_losses``, ``grad`` (∇_θL), ``grad_norm`` ‖∇_θL‖ and ``logit_grad_norm``
    ‖∇_zL‖ (∇_θL = Jᵀ∇_zL from one ``jax.vjp``).

    Args:
        apply_fn: ``(params, batch) -> logits``.
        loss_fn: the loss of the logits with its anchors and targets in ``inputs``.

    Returns:
        The jitted function.
    """

    def run(params, batch, inputs):
        z, vjp = jax.vjp(lambda p: apply_fn(p, batch), params)
        (loss, tok), gz = jax.value_and_grad(
            lambda zz: loss_fn(zz, inputs), has_aux=True
        )(z)
        (g,) = vjp(gz)
        return {
            "loss": loss,
            "token_losses": tok,
            "grad": g,
            "grad_norm": optax.tree.norm(g),
            "logit_grad_norm": jnp.linalg.norm(gz),
        }

    return jax.jit(run)


@functools.lru_cache(maxsize=32)
def directionality_fn(apply_fn: ApplyFn, loss_fn: Callable) -> Callable:
    r"""A jitted ``(params, params_star, batch, inputs) -> dict`` for LCO Prop. 4.4.

    Prop. 4.4 (Eq. 15; text NOT FOUND, the reviewer's reading is the spec): under
    Assumption 4.2, :math:`\langle\nabla_\theta L, \theta-\theta^*\rangle \approx
    \langle\nabla_z\ell, z_\theta - z_{\theta^*}\rangle \ge \ell(z_\theta) -
    \ell(z_{\theta^*}) \ge -\varepsilon` (convexity in z; the ε-slack because θ* is
    only near-optimal). Returns

    * ``param_inner`` :math:`\langle\nabla_\theta L, \theta-\theta^*\rangle` (vjp),
    * ``jvp_inner`` :math:`\langle\nabla_z\ell, J(\theta-\theta^*)\rangle` (one jvp;
      equal to ``param_inner`` exactly: two routes),
    * ``logit_inner`` :math:`\langle\nabla_z\ell, z_\theta-z_{\theta^*}\rangle`,
    * ``loss`` and ``loss_star`` (:math:`\ell` at θ and θ*).

    ``param_inner − logit_inner`` is the Assumption 4.2 error.

    Args:
        apply_fn: ``(params, batch) -> logits``.
        loss_fn: ``(logits, inputs) -> (L, token_losses)``.

    Returns:
        The jitted function.
    """

    def run(params, params_star, batch, inputs):
        f = lambda p: apply_fn(p, batch)
        diff = optax.tree.sub(params, params_star)
        z, jd = jax.jvp(f, (params,), (diff,))
        z_star = f(params_star)
        (loss, _), gz = jax.value_and_grad(
            lambda zz: loss_fn(zz, inputs), has_aux=True
        )(z)
        _, vjp = jax.vjp(f, params)
        (g,) = vjp(gz)
        return {
            "param_inner": optax.tree.vdot(g, diff),
            "jvp_inner": jnp.vdot(gz, jd),
            "logit_inner": jnp.vdot(gz, z - z_star),
            "loss": loss,
            "loss_star": loss_fn(z_star, inputs)[0],
        }

    return jax.jit(run)


@functools.partial(jax.jit, static_argnums=(0, 1))
def _lin_step(apply_fn, loss_fn, delta, params0, batch, inputs, eta):
    f = lambda p: apply_fn(p, batch)
    z0, jd = jax.jvp(f, (params0,), (delta,))
    (loss, _), gz = jax.value_and_grad(lambda zz: loss_fn(zz, inputs), has_aux=True)(
        z0 + jd
    )
    _, vjp = jax.vjp(f, params0)
    (g,) = vjp(gz)
    return optax.tree.add_scale(delta, -eta, g), loss


def linearized_descent(
    apply_fn: ApplyFn, loss_fn: Callable, params0, batch, inputs, *, eta, steps
) -> np.ndarray:
    r"""Loss along gradient descent on the linearized model (Props. 4.8/4.9's setting).

    .. math::
        z^{lin}_j = z(\theta_0) + J_0\delta_j,\qquad
        \delta_{j+1} = \delta_j - \eta J_0^\top\nabla_z\ell(z^{lin}_j),

    J_0 at θ_0 (one jvp and one vjp per step). Under Assumption 4.2 the real model's
    descent follows this curve.

    Args:
        apply_fn: ``(params, batch) -> logits``.
        loss_fn: ``(logits, inputs) -> (L, token_losses)``.
        params0: θ_0.
        batch: passed to ``apply_fn``.
        inputs: passed to ``loss_fn``.
        eta: the step size η.
        steps: the number of steps.

    Returns:
        ``[steps + 1]`` losses ℓ(z^lin_j), j = 0..steps.
    """

    delta = optax.tree.zeros_like(params0)
    losses = []
    for _ in range(steps + 1):
        delta, loss = _lin_step(apply_fn, loss_fn, delta, params0, batch, inputs, eta)
        losses.append(float(loss))
    return np.asarray(losses)


def contraction_rate(losses) -> float:
    r"""Geometric-mean per-step contraction :math:`(\ell_K/\ell_0)^{1/K}` of a curve.

    For linear convergence :math:`\ell_K \le \rho^{2K}\ell_0` (Prop. 4.9's form,
    seed review) this is :math:`\rho^2`; the square root is the logit-residual rate.

    Args:
        losses: ``[K + 1]`` positive losses.

    Returns:
        The per-step loss ratio (NaN if a loss is not positive).

    Examples:
        >>> round(contraction_rate([1.0, 0.5, 0.25]), 6)
        0.5
    """
    x = np.asarray(losses, float)
    if x.size < 2 or np.any(x <= 0):
        return float("nan")
    return float((x[-1] / x[0]) ** (1.0 / (x.size - 1)))


def spikes(norms, factor: float = 3.0) -> list[int]:
    """Indices where a gradient norm exceeds ``factor`` × the run's median.

    Examples:
        >>> spikes([1.0, 1.1, 0.9, 5.0, 1.0])
        [3]
    """
    x = np.asarray(norms, float)
    med = np.median(x)
    return [int(i) for i in np.nonzero(x > factor * med)[0]]

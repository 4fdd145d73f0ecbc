r"""The NTK-coupled prediction of every token's ΔD from one JVP of a real update.

For parameters θ, an update Δθ and the per-token divergence
:math:`D_i(\theta) = \mathrm{KL}(\mu_i \,\|\, \pi_i(\theta))`, the line
:math:`g_i(\varepsilon) = D_i(\theta + \varepsilon\Delta\theta)` has

.. math::
    g_i'(0) = \langle \nabla_{z_i} D_i,\ J_i \Delta\theta \rangle, \qquad
    \Delta D_i \approx g_i'(0) + \tfrac12 g_i''(0),

where :math:`J_i = \partial z_i / \partial\theta` is the Jacobian of token i's logits:
:math:`J_i\Delta\theta` moves token i's logits through *all* tokens' gradients that
built Δθ (cross-token coupling through shared weights; the empirical NTK
:math:`J_i J_j^\top` of Jacot et al. 2018 applied to the update). One forward-mode pass
gives :math:`g'(0)` for every token at once; the JVP of that JVP gives :math:`g''(0)`
from the same tangent. The tabular prediction of the predictive-mask paper (arXiv
2607.10848, Prop. 1; paper text NOT FOUND, DERIVED in research notes §1.3) is the
special case :math:`J_i\Delta\theta \propto v_i = e_k - \pi_i` with no coupling.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import optax
from jax.typing import ArrayLike
from jaxtyping import Array, Float

from theorycheck.numeric import full_divergence


def kl_rows(
    behavior_logp: Float[ArrayLike, "... V"], logits: Float[ArrayLike, "... V"]
) -> Float[Array, " ..."]:
    r"""Forward KL :math:`\sum_i \mu_i(\log\mu_i - \log\pi_i)` per row (jit-safe).

    :func:`theorycheck.numeric.full_divergence` (``kind="kl"``, ``0 log 0 = 0``) of
    :math:`\log\pi = \mathrm{log\_softmax}(z)`: the same D as
    ``theorycheck.numeric.divergence(..., kind="kl")``, without its eager checks.

    Args:
        behavior_logp: ``[..., V]`` log μ (``-inf`` allowed where μ_i = 0).
        logits: ``[..., V]`` policy logits z.

    Returns:
        ``[...]`` divergences.

    Examples:
        >>> import numpy as np
        >>> float(kl_rows(np.log([0.5, 0.5]), np.zeros(2)))
        0.0
    """
    logp = jax.nn.log_softmax(jnp.asarray(logits), axis=-1)
    return full_divergence(jnp.asarray(behavior_logp, logp.dtype), logp, "kl")


def taylor_fn(divergence_fn):
    r"""``(params, delta) -> (D, g'(0), g''(0))`` along the line θ + εΔθ.

    Args:
        divergence_fn: ``params -> [...]`` per-token divergences (any pytree params).

    Returns:
        A function returning three ``[...]`` arrays: the divergence at θ, the first
        and the second derivative along ``delta`` (nested forward mode).

    Examples:
        >>> f = taylor_fn(lambda p: p["x"] ** 3)
        >>> [float(a) for a in f({"x": jnp.array(2.0)}, {"x": jnp.array(1.0)})]
        [8.0, 12.0, 12.0]
    """

    def line(eps, params, delta):
        moved = optax.tree.add_scale(params, eps, delta)
        return divergence_fn(moved)

    def first(eps, params, delta):
        return jax.jvp(lambda e: line(e, params, delta), (eps,), (jnp.ones_like(eps),))

    def taylor(params, delta):
        leaf = jax.tree_util.tree_leaves(params)[0]
        zero = jnp.zeros((), leaf.dtype)
        (d0, d1), (_, d2) = jax.jvp(
            lambda e: first(e, params, delta), (zero,), (jnp.ones_like(zero),)
        )
        return d0, d1, d2

    return taylor


@functools.partial(jax.jit, static_argnames=("config", "rows"))
def trainer_taylor(
    trainable, delta, head_params, behavior_logp, hidden, mask, config, rows
):
    """:func:`taylor_fn` of the trainer's per-token KL for one chunk of sequences."""
    from theorycheck.models import logits_from_hidden

    def d_fn(tr):
        z = logits_from_hidden(tr, head_params, config, hidden, mask, rows=rows)
        return kl_rows(behavior_logp, z)

    return taylor_fn(d_fn)(trainable, delta)


def predict_change(trainer, trainable, delta, rows=None, *, chunk: int | None = None):
    """``(D, first, second)`` ``[b, N]`` numpy arrays for ``rows`` of the trainer batch.

    ``first`` = :math:`g'(0)`, ``second`` = :math:`g''(0)`; the second-order
    prediction of ΔD is ``first + second / 2``. Rows run in chunks of ``chunk``
    sequences (memory); each sequence is independent given the weights, so chunking is
    exact.

    Args:
        trainer: a :class:`theorycheck.rl.Trainer`.
        trainable: parameters θ.
        delta: the update Δθ (same pytree).
        rows: row indices (None = every row).
        chunk: sequences per call (None: ``trainer.chunk``; ≥ b: one call).

    Returns:
        Three ``[b, N]`` float64 numpy arrays.
    """
    import numpy as np

    batch = trainer.batch
    idx = np.arange(batch.sampled.shape[0]) if rows is None else np.asarray(rows)
    chunk = trainer.chunk if chunk is None else chunk
    chunk = len(idx) if not chunk or chunk >= len(idx) else chunk
    outs = []
    for s in range(0, len(idx), chunk):
        sub = idx[s : s + chunk]
        outs.append(
            trainer_taylor(
                trainable,
                delta,
                trainer.head_params,
                batch.behavior_logp[sub],
                batch.hidden[sub],
                batch.attention_mask[sub],
                trainer.model_config,
                trainer.rows,
            )
        )
    return tuple(np.concatenate([np.asarray(o[i]) for o in outs]) for i in range(3))


@functools.partial(jax.jit, static_argnames=("config", "rows"))
def _trainer_kl(trainable, head_params, behavior_logp, hidden, mask, config, rows):
    from theorycheck.models import logits_from_hidden

    z = logits_from_hidden(trainable, head_params, config, hidden, mask, rows=rows)
    return kl_rows(behavior_logp, z)


def divergences(trainer, trainable, rows=None, *, chunk: int | None = None):
    """``[b, N]`` per-token KL(μ‖π_θ) (float64 numpy) for ``rows`` of the batch.

    Args:
        trainer: a :class:`theorycheck.rl.Trainer`.
        trainable: parameters θ.
        rows: row indices (None = every row).
        chunk: sequences per call (None: ``trainer.chunk``).

    Returns:
        ``[b, N]`` divergences.
    """
    import numpy as np

    batch = trainer.batch
    idx = np.arange(batch.sampled.shape[0]) if rows is None else np.asarray(rows)
    chunk = trainer.chunk if chunk is None else chunk
    chunk = len(idx) if not chunk or chunk >= len(idx) else chunk
    return np.concatenate(
        [
            np.asarray(
                _trainer_kl(
                    trainable,
                    trainer.head_params,
                    batch.behavior_logp[sub],
                    batch.hidden[sub],
                    batch.attention_mask[sub],
                    trainer.model_config,
                    trainer.rows,
                )
            )
            for sub in (idx[s : s + chunk] for s in range(0, len(idx), chunk))
        ]
    )

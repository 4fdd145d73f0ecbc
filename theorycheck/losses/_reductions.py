r"""Loss reductions as effective per-token weights: loss = :math:`\sum_{s,t} w_{st}\,
\ell_{st}`.

With token objectives :math:`j_{st}` of response s (prompt :math:`i(s)`), mask
:math:`m_{st}`, lengths :math:`L_s = \sum_t m_{st}`, S responses, P prompts:

============================  ==========================================================
mode                          :math:`w_{st} / m_{st}`
============================  ==========================================================
``token_mean``                :math:`1 / \sum_{s} L_s`
``seq_mean_token_mean``       :math:`1 / (N_{seq} L_s)`
``seq_mean_token_sum``        :math:`1 / N_{seq}`
``token_sum``                 :math:`1` (verl ``token-sum``, no normaliser)
``seq_mean_token_sum_norm``   :math:`1 / (N_{seq} L_{max})` (Dr. GRPO); verl omits
                              :math:`N_{seq}` (``divide_by_sequences=False``)
``prompt_mean``               :math:`1 / (P\,\sum_{s'\in i(s)} L_{s'})`
``sample_mean``               Miles: :math:`1/(N_{seq} L_s)` with :math:`N_{seq}` =
                              every row, empty ones included
============================  ==========================================================

:math:`N_{seq}` counts non-empty responses (verl) or every row (``count_empty=True``:
SkyRL, TRL, Miles). With ``micro_batch_size`` the denominators are computed inside each
micro-batch of consecutive rows and the micro-batch losses are averaged (verl's legacy
worker, TRL ``bnpo``/``grpo``, SkyRL ``token_mean_legacy``): a mean of local means,
not a global mean. With ``length_eps`` the response length enters as :math:`L_s +
\epsilon` instead of :math:`\max(L_s, 1)` (verl's ``seq-mean-token-mean`` divides by
:math:`L_s + 10^{-8}`). :func:`reduction_weights` can take the counts (token counts,
lengths, :math:`N_{seq}`) from a second mask ``count_mask`` while the numerator uses
``mask``: a rejection mask applied after the counts were taken shrinks the loss instead
of renormalising it (verl issue #4852). References: survey, "Let j_igt be token t's
objective ..." (J_seq, J_prompt, J_token); verl ``agg_loss``
(verl/trainer/ppo/core_algos.py at verl-project/verl 1dda039), SkyRL
``apply_loss_reduction_to_advantages_minibatch``, TRL ``_compute_loss``, Miles
``get_sum_of_sample_mean``.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike
from jaxtyping import Array, Float

from theorycheck._errors import BadInput

#: the reduction modes :class:`Reduction` accepts (table in the module docstring).
MODES = (
    "token_mean",
    "seq_mean_token_mean",
    "seq_mean_token_sum",
    "seq_mean_token_sum_norm",
    "token_sum",
    "prompt_mean",
    "sample_mean",
)


@dataclasses.dataclass(frozen=True)
class Reduction:
    r"""A reduction as a framework computes it.

    Attributes:
        mode: one of :data:`MODES`.
        count_empty: count fully-masked rows in :math:`N_{seq}`.
        micro_batch_size: rows per micro-batch (``None`` = one global scope).
        max_len: :math:`L_{max}` of ``seq_mean_token_sum_norm`` (``None`` = padded
            width T).
        divide_by_sequences: ``seq_mean_token_sum_norm`` divides by :math:`N_{seq}`
            (False reproduces verl before 2026-02-24).
        length_eps: ``None``: lengths enter as :math:`\max(L_s, 1)`; a float
            :math:`\epsilon`: as :math:`L_s + \epsilon` (verl: 1e-8).
    """

    mode: str
    count_empty: bool = False
    micro_batch_size: int | None = None
    max_len: int | None = None
    divide_by_sequences: bool = True
    length_eps: float | None = None

    def __post_init__(self):
        if self.mode not in MODES:
            raise BadInput(
                f"unknown reduction {self.mode!r}; valid: {', '.join(MODES)}"
            )
        if self.micro_batch_size is not None and self.micro_batch_size < 1:
            raise BadInput(f"micro_batch_size {self.micro_batch_size} must be >= 1")
        if self.max_len is not None and self.max_len < 1:
            raise BadInput(f"max_len {self.max_len} must be >= 1")
        if self.length_eps is not None and not self.length_eps > 0:
            raise BadInput(f"length_eps {self.length_eps} must be > 0")


def _scope_weights(mask, count_mask, group_ids, num_groups, r: Reduction):
    lengths = jnp.sum(count_mask, axis=-1)
    rows = mask.shape[0]
    n_seq = rows if r.count_empty else jnp.sum(lengths > 0)
    n_seq = jnp.maximum(n_seq, 1)
    if r.length_eps is None:
        safe_len = jnp.maximum(lengths, 1)
    else:
        safe_len = lengths + r.length_eps
    if r.mode == "token_sum":
        per_row = jnp.ones_like(lengths)
    elif r.mode == "token_mean":
        per_row = jnp.ones_like(lengths) / jnp.maximum(jnp.sum(lengths), 1)
    elif r.mode in ("seq_mean_token_mean", "sample_mean"):
        n = rows if r.mode == "sample_mean" else n_seq
        per_row = 1.0 / (n * safe_len)
    elif r.mode == "seq_mean_token_sum":
        per_row = jnp.ones_like(lengths) / n_seq
    elif r.mode == "seq_mean_token_sum_norm":
        width = mask.shape[1] if r.max_len is None else r.max_len
        per_row = jnp.ones_like(lengths) / (
            width * (n_seq if r.divide_by_sequences else 1)
        )
    else:  # prompt_mean
        tokens = jax.ops.segment_sum(lengths, group_ids, num_segments=num_groups)
        present = (
            jax.ops.segment_sum(
                jnp.ones_like(lengths), group_ids, num_segments=num_groups
            )
            > 0
        )
        n_prompts = jnp.maximum(jnp.sum(present), 1)
        per_row = 1.0 / (n_prompts * jnp.maximum(tokens[group_ids], 1))
    return mask * per_row[:, None]


@functools.partial(jax.jit, static_argnames=("reduction", "num_groups"))
def reduction_weights(
    mask: ArrayLike,
    reduction: Reduction,
    *,
    group_ids: ArrayLike | None = None,
    num_groups: int = 1,
    count_mask: ArrayLike | None = None,
) -> Float[Array, "S T"]:
    r"""Effective per-token weights :math:`w_{st}` of a reduction (module table).

    Args:
        mask: ``[S, T]`` response mask (1 = valid token).
        reduction: the :class:`Reduction` (static).
        group_ids: ``[S]`` prompt ids (``prompt_mean`` only).
        num_groups: number of prompts (static).
        count_mask: ``[S, T]`` mask the denominators are counted from (``None``:
            ``mask``). verl #4852: counts taken before a rejection mask.

    Returns:
        ``[S, T]`` weights, zero on masked positions.

    Examples:
        >>> import numpy as np
        >>> m = np.array([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0]])
        >>> reduction_weights(m, Reduction("token_mean")).tolist()
        [[0.25, 0.25, 0.25], [0.25, 0.0, 0.0]]
        >>> reduction_weights(m, Reduction("seq_mean_token_sum")).tolist()
        [[0.5, 0.5, 0.5], [0.5, 0.0, 0.0]]

    References:
        Survey, reductions J_seq, J_prompt, J_token; peers.md §1.4 (verl ``agg_loss``),
        §2.4 (SkyRL), §3.3 (TRL), §4 (Miles).
    """
    mask = jnp.asarray(mask)
    mask = mask.astype(jnp.result_type(mask.dtype, jnp.float32))
    gid = (
        jnp.zeros(mask.shape[0], dtype=jnp.int32)
        if group_ids is None
        else jnp.asarray(group_ids)
    )
    counts = mask if count_mask is None else jnp.asarray(count_mask, mask.dtype)
    mb = reduction.micro_batch_size
    if mb is None or mb >= mask.shape[0]:
        return _scope_weights(mask, counts, gid, num_groups, reduction)
    pieces = [
        _scope_weights(
            mask[i : i + mb], counts[i : i + mb], gid[i : i + mb], num_groups, reduction
        )
        for i in range(0, mask.shape[0], mb)
    ]
    return jnp.concatenate(pieces, axis=0) / len(pieces)


def sequence_gradient_norms(token_grads: ArrayLike, weights: ArrayLike) -> Array:
    r"""Norm of each response's weighted gradient :math:`\|\sum_t w_{st} g_{st}\|`.

    Equal total weights :math:`\sum_t w_{st}` do not give equal norms: the token
    gradients :math:`g_{st}` of one response point in different directions, so the norm
    depends on the length and on their alignment.

    Args:
        token_grads: ``[S, T, P]`` per-token gradients (any parameterisation).
        weights: ``[S, T]`` reduction weights.

    Returns:
        ``[S]`` norms.

    Examples:
        >>> import numpy as np
        >>> g = np.array([[[1.0, 0.0], [0.0, 1.0]]])
        >>> round(float(sequence_gradient_norms(g, np.array([[0.5, 0.5]]))[0]), 6)
        0.707107
    """
    g = jnp.asarray(token_grads)
    w = jnp.asarray(weights)
    return jnp.linalg.norm(jnp.sum(w[..., None] * g, axis=1), axis=-1)

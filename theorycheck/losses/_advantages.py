r"""Group-relative advantages (GRPO, RLOO, Dr. GRPO), zero-advantage groups flagged.

For response i in group g (responses to the same prompt), group size :math:`G_g` and
mean :math:`\bar R_g`:

.. math::
    A^{GRPO}_i = \frac{R_i - \bar R_g}{\sigma_g + \epsilon}, \qquad
    A^{RLOO}_i = R_i - \frac{1}{G_g - 1}\sum_{j\ne i} R_j
               = \frac{G_g}{G_g-1}(R_i - \bar R_g), \qquad
    A^{Dr}_i = R_i - \bar R_g,

with the sample (:math:`G_g-1`, the survey's experiment, verl, TRL) or population
(:math:`G_g`, the survey's worked example) standard deviation. A group whose rewards are
all equal carries no relative signal: every advantage in it is exactly 0 and it is
flagged. A one-response group is flagged as well (its advantage is defined as 0).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike
from jaxtyping import Array, Bool, Float

from theorycheck._errors import BadInput

STD_KINDS = ("sample", "population")


class Advantages(NamedTuple):
    """Per-response advantages and the per-group zero-signal flag."""

    adv: Float[Array, " S"]
    zero_group: Bool[Array, " G"]


def _group_stats(rewards, group_ids, num_groups):
    r = jnp.asarray(rewards)
    g = jnp.asarray(group_ids)
    count = jax.ops.segment_sum(jnp.ones_like(r), g, num_segments=num_groups)
    mean = jax.ops.segment_sum(r, g, num_segments=num_groups) / jnp.maximum(count, 1)
    hi = jax.ops.segment_max(r, g, num_segments=num_groups)
    lo = jax.ops.segment_min(r, g, num_segments=num_groups)
    zero = (hi == lo) | (count < 2)
    centred = jnp.where(zero[g], 0.0, r - mean[g])
    return r, g, count, centred, zero


@functools.partial(jax.jit, static_argnames=("num_groups", "std"))
def grpo_advantages(
    rewards: ArrayLike,
    group_ids: ArrayLike,
    *,
    num_groups: int,
    std: str = "sample",
    eps: float = 1e-6,
) -> Advantages:
    r"""GRPO advantages :math:`(R_i - \bar R_g)/(\sigma_g + \epsilon)`.

    Args:
        rewards: ``[S]`` response rewards.
        group_ids: ``[S]`` integer group (prompt) ids in ``[0, num_groups)``.
        num_groups: number of groups (static).
        std: ``"sample"`` (divide by G−1) or ``"population"`` (divide by G).
        eps: ε added to σ (verl 1e-6).

    Returns:
        :class:`Advantages` ``(adv [S], zero_group [num_groups])``.

    Examples:
        >>> import numpy as np
        >>> a = grpo_advantages(np.array([1.0, 0.0]), np.array([0, 0]), num_groups=1,
        ...                     std="population", eps=0.0)
        >>> a.adv.tolist()
        [1.0, -1.0]

    References:
        DeepSeekMath (arXiv 2402.03300) §4.1.2 (GRPO outcome supervision); survey,
        "For response reward R_i ...".
    """
    if std not in STD_KINDS:
        raise BadInput(f"std must be one of {STD_KINDS}, got {std!r}")
    r, g, count, centred, zero = _group_stats(rewards, group_ids, num_groups)
    ss = jax.ops.segment_sum(centred * centred, g, num_segments=num_groups)
    dof = jnp.maximum(count - 1, 1) if std == "sample" else jnp.maximum(count, 1)
    sigma = jnp.sqrt(ss / dof)
    return Advantages(centred / (sigma[g] + eps), zero)


@functools.partial(jax.jit, static_argnames=("num_groups",))
def rloo_advantages(
    rewards: ArrayLike, group_ids: ArrayLike, *, num_groups: int
) -> Advantages:
    r"""RLOO (leave-one-out baseline) advantages :math:`\frac{G}{G-1}(R_i - \bar R_g)`.

    Args:
        rewards: ``[S]`` response rewards.
        group_ids: ``[S]`` integer group ids.
        num_groups: number of groups (static).

    Returns:
        :class:`Advantages`.

    Examples:
        >>> import numpy as np
        >>> rloo_advantages(np.array([1.0, 0.0]), np.array([0, 0]),
        ...                 num_groups=1).adv.tolist()
        [1.0, -1.0]

    References:
        Ahmadian et al., "Back to Basics: Revisiting REINFORCE-Style Optimization"
        (2024), RLOO; survey, "RLOO changes the reward baseline".
    """
    r, g, count, centred, zero = _group_stats(rewards, group_ids, num_groups)
    scale = count / jnp.maximum(count - 1, 1)
    return Advantages(centred * scale[g], zero)


@functools.partial(jax.jit, static_argnames=("num_groups",))
def dr_grpo_advantages(
    rewards: ArrayLike, group_ids: ArrayLike, *, num_groups: int
) -> Advantages:
    r"""Dr. GRPO advantages: mean-centred, no standard-deviation division.

    .. math::
        A_i = R_i - \bar R_g

    Args:
        rewards: ``[S]`` response rewards.
        group_ids: ``[S]`` integer group ids.
        num_groups: number of groups (static).

    Returns:
        :class:`Advantages`.

    Examples:
        >>> import numpy as np
        >>> dr_grpo_advantages(np.array([1.0, 0.0]), np.array([0, 0]),
        ...                    num_groups=1).adv.tolist()
        [0.5, -0.5]

    References:
        Liu et al., "Understanding R1-Zero-Like Training: A Critical Perspective"
        (arXiv 2503.20783), Dr. GRPO; verl ``norm_adv_by_std_in_grpo=False``.
    """
    _, _, _, centred, zero = _group_stats(rewards, group_ids, num_groups)
    return Advantages(centred, zero)

"""Dynamic sampling: draw new prompts until a GRPO group has mixed rewards.

A batch in which every group's rewards are equal has every GRPO advantage 0: the update
is 0 and nothing can be measured. DAPO (Yu et al., 2025, §3.2, "dynamic sampling")
filters such groups and samples again; :func:`collect_mixed` does it per batch.
"""

from __future__ import annotations

import numpy as np

from theorycheck._errors import BadInput
from theorycheck.rl._rollout import Rollouts, collect
from theorycheck.rl._tasks import make_problems

#: draw d > 0 uses the seed ``seed + DRAW_STRIDE * d`` (prompts and sampler).
DRAW_STRIDE = 10_000


def mixed_groups(rollouts: Rollouts) -> int:
    """Number of GRPO groups whose rewards are not all equal (the groups that train).

    Examples:
        >>> import types
        >>> r = types.SimpleNamespace(reward=np.array([0.0, 1, 0, 0]),
        ...                           group=np.array([0, 0, 1, 1]))
        >>> mixed_groups(r)
        1
    """
    reward = np.asarray(rollouts.reward)
    group = np.asarray(rollouts.group)
    return sum(int(np.ptp(reward[group == g]) > 0) for g in np.unique(group))


def collect_mixed(
    model,
    task: str,
    prompts: int,
    *,
    seed: int,
    redraws: int = 4,
    min_mixed: int = 1,
    draw: int | None = None,
    decide_dtype: str = "bfloat16",
    engine_dtype: str = "bfloat16",
    **collect_kwargs,
) -> tuple[Rollouts, int]:
    """Rollouts of ``prompts`` problems of ``task``, redrawn while fewer than
    ``min_mixed`` groups have mixed rewards; returns ``(rollouts, draw)``.

    Draw 0 uses problems and sampler seeded with ``seed``; draw d with
    ``seed + DRAW_STRIDE * d``. The draw is decided with the ``decide_dtype`` engine, so
    rollouts of another engine (``engine_dtype``) score the same prompts; ``draw``
    skips the search (a draw found earlier). After ``redraws`` redraws the last draw is
    returned as it is (its ``mixed_groups`` may be 0: the caller records it).

    Args:
        model: a loaded model.
        task: a name in :data:`theorycheck.rl.TASKS`.
        prompts: problems per draw (one GRPO group each).
        seed: the base seed.
        redraws: the most new draws (>= 0).
        min_mixed: the fewest groups with mixed rewards a draw must have (>= 1).
        draw: use this draw without searching.
        decide_dtype: the engine whose rewards decide the draw.
        engine_dtype: the engine of the returned rollouts.
        **collect_kwargs: passed to :func:`collect` (samples, new_tokens, topk, ...).
    """
    if redraws < 0:
        raise BadInput(f"redraws = {redraws} must be >= 0")
    if min_mixed < 1:
        raise BadInput(f"min_mixed = {min_mixed} must be >= 1")

    def one(d: int, dtype: str) -> Rollouts:
        s = seed + DRAW_STRIDE * d
        problems = make_problems(task, prompts, seed=s)
        return collect(model, problems, seed=s, engine_dtype=dtype, **collect_kwargs)

    if draw is not None:
        return one(draw, engine_dtype), draw
    for d in range(redraws + 1):
        out = one(d, decide_dtype)
        if mixed_groups(out) >= min_mixed:
            break
    return (out if engine_dtype == decide_dtype else one(d, engine_dtype)), d

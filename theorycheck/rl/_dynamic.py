"""Dynamic sampling: draw new prompts until GRPO groups have mixed rewards.

A group whose rewards are all equal has every GRPO advantage 0: it does not train and
nothing can be measured on it. DAPO (Yu et al., 2025, §3.2, "dynamic sampling")
over-samples, filters such groups out and keeps sampling until the batch is filled
with groups of mixed rewards: :func:`collect_filled` does that (groups kept across
draws). :func:`collect_mixed` is the older per-batch rule: the whole batch is redrawn
until it holds at least ``min_mixed`` mixed groups.
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
    return len(_mixed_ids(rollouts))


def _mixed_ids(rollouts: Rollouts) -> list:
    """The group ids whose rewards are not all equal, in id order."""
    reward = np.asarray(rollouts.reward)
    group = np.asarray(rollouts.group)
    return [g for g in np.unique(group) if np.ptp(reward[group == g]) > 0]


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
    _check(redraws, min_mixed)

    def one(d: int, dtype: str) -> Rollouts:
        return _draw(model, task, prompts, seed, d, dtype, collect_kwargs)

    if draw is not None:
        return one(draw, engine_dtype), draw
    for d in range(redraws + 1):
        out = one(d, decide_dtype)
        if mixed_groups(out) >= min_mixed:
            break
    return (out if engine_dtype == decide_dtype else one(d, engine_dtype)), d


def _check(redraws: int, min_mixed: int) -> None:
    if redraws < 0:
        raise BadInput(f"redraws = {redraws} must be >= 0")
    if min_mixed < 1:
        raise BadInput(f"min_mixed = {min_mixed} must be >= 1")


def _draw(model, task, prompts, seed, d, dtype, collect_kwargs) -> Rollouts:
    """Draw ``d``: ``prompts`` problems, problems and sampler seeded
    ``seed + DRAW_STRIDE·d``."""
    s = seed + DRAW_STRIDE * d
    problems = make_problems(task, prompts, seed=s)
    return collect(model, problems, seed=s, engine_dtype=dtype, **collect_kwargs)


def collect_filled(
    model,
    task: str,
    prompts: int,
    *,
    seed: int,
    redraws: int = 8,
    min_mixed: int | None = None,
    engine_dtype: str = "bfloat16",
    **collect_kwargs,
) -> tuple[Rollouts, dict]:
    """A batch of ``prompts`` GRPO groups filled with mixed-reward groups across
    draws (DAPO's dynamic sampling); returns ``(rollouts, meta)``.

    Draw d (d = 0, 1, …, at most ``redraws`` new draws) samples ``prompts`` problems of
    ``task`` with problems and sampler seeded ``seed + DRAW_STRIDE·d`` (draw 0 is
    :func:`collect_mixed`'s draw 0). Its groups with mixed rewards are kept, in draw
    and group order, until ``min_mixed`` (default ``prompts``: the whole batch) are
    kept; the batch is the first ``prompts`` kept groups, completed, if the draws ran
    out first, by the drawn groups of equal rewards (earliest first), and put back in
    draw and group order. A batch whose draw 0 is mixed enough is draw 0 unchanged.
    Groups of several draws are joined by left-padding every prompt to the widest
    (mask 0), which is how :func:`collect` pads one draw.

    ``meta``: ``draws`` (how many were sampled), ``kept`` (``[draw, group]`` of each
    group of the batch, in the batch's group order) and ``mixed_groups``.

    Args:
        model: a loaded model.
        task: a name in :data:`theorycheck.rl.TASKS`.
        prompts: GRPO groups in the batch (and problems per draw).
        seed: the base seed.
        redraws: the most new draws (>= 0).
        min_mixed: mixed groups to find before stopping (1 to ``prompts``).
        engine_dtype: the engine that samples, and whose rewards decide.
        **collect_kwargs: passed to :func:`collect` (samples, new_tokens, topk, ...).
    """
    need = prompts if min_mixed is None else min_mixed
    _check(redraws, need)
    if need > prompts:
        raise BadInput(f"min_mixed = {need} must be <= prompts = {prompts}")
    mixed, rest, draws = [], [], {}
    for d in range(redraws + 1):
        out = _draw(model, task, prompts, seed, d, engine_dtype, collect_kwargs)
        draws[d] = out
        ids = set(_mixed_ids(out))
        for g in range(prompts):
            (mixed if g in ids else rest).append((d, g))
        if len(mixed) >= need:
            break
    chosen = mixed[:prompts]
    chosen = sorted(chosen + rest[: prompts - len(chosen)])
    meta = {
        "draws": len(draws),
        "kept": [list(c) for c in chosen],
        "mixed_groups": min(len(mixed), prompts),
    }
    return join_groups(draws, chosen), meta


def join_groups(draws: dict, chosen: list) -> Rollouts:
    """The :class:`Rollouts` of the groups ``chosen`` (``(draw, group)`` pairs) of the
    batches ``draws`` (``{draw: Rollouts}`` of one engine), numbered 0, 1, … in that
    order, prompts left-padded to the widest (mask 0)."""
    used = [draws[d] for d, _ in chosen]
    if len(set(map(id, used))) == 1 and [g for _, g in chosen] == list(
        range(len(np.unique(used[0].group)))
    ):
        return used[0]
    width = max(r.prompt_ids.shape[1] for r in used)
    parts = {f: [] for f in Rollouts._fields if f != "engine_dtype"}
    for new, ((_, g), r) in enumerate(zip(chosen, used)):
        rows = np.flatnonzero(np.asarray(r.group) == g)
        pad = ((0, 0), (width - r.prompt_ids.shape[1], 0))
        parts["prompt_ids"].append(np.pad(r.prompt_ids[rows], pad))
        parts["prompt_mask"].append(np.pad(r.prompt_mask[rows], pad))
        parts["group"].append(np.full(len(rows), new, np.asarray(r.group).dtype))
        parts["text"].append([r.text[i] for i in rows])
        for f in parts.keys() - {"prompt_ids", "prompt_mask", "group", "text"}:
            v = getattr(r, f)
            parts[f].append(None if v is None else np.asarray(v)[rows])
    (engine_dtype,) = {r.engine_dtype for r in used}
    out = {"text": sum(parts.pop("text"), [])}
    for f, v in parts.items():
        if any(x is None for x in v) and not all(x is None for x in v):
            raise BadInput(f"join_groups: {f} is recorded in some draws only")
        out[f] = None if v[0] is None else np.concatenate(v)
    return Rollouts(**out, engine_dtype=engine_dtype)

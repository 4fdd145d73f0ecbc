"""Rollouts from a causal LM, the way an RL trainer receives them.

The rollout engine samples (in bfloat16 by default, as production engines do) and
reports, per generated token, the sampled token, its behavior log-prob and the top-K
log-probs (as vLLM / SGLang do); optionally the full-vocabulary log-probs too. The
trainer then recomputes the same positions in float32. The precision mismatch is a real
source of the off-policy gap π ≠ μ before any optimizer step; with ``engine_dtype =
float32`` and the trainer's own recomputation as μ (see :mod:`._train`), the first
minibatch is exactly on-policy.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import jax.numpy as jnp
import jax.random as jr
import numpy as np

from theorycheck._errors import BadInput
from theorycheck.rl._tasks import Problem


class Rollouts(NamedTuple):
    """A group-structured batch of sampled responses with both views of each token.

    Attributes:
        tokens: ``[B, N]`` sampled ids (B = groups × samples).
        group: ``[B]`` prompt (group) id of each response.
        reward: ``[B]`` verifiable reward in {0, 1}.
        text: the decoded responses.
        behavior_logp: ``[B, N, V]`` rollout-engine log-probs (full vocabulary), or
            None when ``full_vocab=False``.
        topk_logp, topk_ids: ``[B, N, K]`` what the rollout engine reports.
        logits: ``[B, N, V]`` trainer (float32) logits at the same positions, or None
            when ``full_vocab=False``.
        sampled_logp: ``[B, N]`` the engine's log-prob of each sampled token.
        prompt_ids: ``[B, P]`` left-padded prompt ids.
        prompt_mask: ``[B, P]`` 1 for real prompt tokens.
        engine_dtype: the dtype the engine sampled in (``"bfloat16"``/``"float32"``).
    """

    tokens: np.ndarray
    group: np.ndarray
    reward: np.ndarray
    text: list
    behavior_logp: np.ndarray | None
    topk_logp: np.ndarray
    topk_ids: np.ndarray
    logits: np.ndarray | None
    sampled_logp: np.ndarray
    prompt_ids: np.ndarray
    prompt_mask: np.ndarray
    engine_dtype: str

    def sequences(self) -> tuple[np.ndarray, np.ndarray]:
        """``(ids, attention_mask)`` of prompt + response, ``[B, P + N]``."""
        ids = np.concatenate([self.prompt_ids, self.tokens], axis=1)
        mask = np.concatenate([self.prompt_mask, np.ones_like(self.tokens)], axis=1)
        return ids, mask


def left_pad(
    seqs: list[list[int]], pad: int, multiple: int = 1
) -> tuple[np.ndarray, np.ndarray]:
    """Left-pads token lists to one width (rounded up to ``multiple``, so that
    batches of similar prompts share one compiled shape); returns ``(ids, mask)``."""
    width = -(-max(len(s) for s in seqs) // multiple) * multiple
    ids = np.full((len(seqs), width), pad, np.int32)
    mask = np.zeros((len(seqs), width), np.int32)
    for i, s in enumerate(seqs):
        ids[i, width - len(s) :] = s
        mask[i, width - len(s) :] = 1
    return ids, mask


def collect(
    model,
    problems: Sequence[Problem],
    *,
    samples: int,
    new_tokens: int,
    topk: int,
    temperature: float = 1.0,
    seed: int,
    engine_dtype: str = "bfloat16",
    full_vocab: bool = True,
) -> Rollouts:
    """Samples ``samples`` responses per problem and recomputes them in the trainer.

    Args:
        model: a loaded :class:`theorycheck.models.Model` (float32 parameters).
        problems: the prompts and their verifiers (one GRPO group each).
        samples: responses per prompt (the GRPO group size).
        new_tokens: tokens generated per response (all are trained on).
        topk: K, the number of top log-probs the rollout engine reports.
        temperature: sampling temperature.
        seed: PRNG seed of the sampler.
        engine_dtype: ``"bfloat16"`` (production-like mismatch) or ``"float32"``.
        full_vocab: also record the engine's full log-probs and the trainer logits.

    Returns:
        :class:`Rollouts`.
    """
    from theorycheck.models import cast_params, forward, generate

    if engine_dtype not in ("bfloat16", "float32"):
        raise BadInput(
            f"engine_dtype must be bfloat16 or float32, got {engine_dtype!r}"
        )
    if samples < 1 or not problems:
        raise BadInput(
            f"need samples >= 1 and problems, got {samples}, {len(problems)}"
        )
    cfg, params, tok = model
    prompts = [tok.encode(p.prompt).ids for p in problems for _ in range(samples)]
    group = np.repeat(np.arange(len(problems)), samples)
    ids, mask = left_pad(prompts, pad=0, multiple=16)
    engine = cast_params(params, jnp.dtype(engine_dtype))
    gen = generate(
        engine,
        cfg,
        ids,
        key=jr.key(seed),
        prompt_mask=mask,
        max_new_tokens=new_tokens,
        temperature=temperature,
        topk_logprobs=topk,
        return_full_logprobs=full_vocab,
    )
    tokens = np.asarray(gen.tokens)
    trainer = None
    if full_vocab:
        full = np.concatenate([ids, tokens], axis=1)
        full_mask = np.concatenate([mask, np.ones_like(tokens)], axis=1)
        logits = forward(params, cfg, full, attention_mask=full_mask)
        start = ids.shape[1] - 1  # row t scores the token at t + 1
        trainer = np.asarray(logits[:, start : start + new_tokens], np.float32)
    text = [tok.decode(list(map(int, row))) for row in tokens]
    reward = np.array([problems[g].reward(t) for g, t in zip(group, text)])
    return Rollouts(
        tokens=tokens,
        group=group,
        reward=reward,
        text=text,
        behavior_logp=(
            np.asarray(gen.full_logprobs, np.float32) if full_vocab else None
        ),
        topk_logp=np.asarray(gen.topk_logprobs, np.float32),
        topk_ids=np.asarray(gen.topk_ids, np.int32),
        logits=trainer,
        sampled_logp=np.asarray(gen.logprobs, np.float32),
        prompt_ids=ids,
        prompt_mask=mask,
        engine_dtype=engine_dtype,
    )

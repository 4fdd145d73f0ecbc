"""Rollouts from a real checkpoint, the way an RL trainer sees them.

The rollout engine samples in bfloat16 and reports, per generated token, the sampled
log-prob and the top-K log-probs (as vLLM / SGLang do); the trainer recomputes the same
positions in float32. The precision mismatch is the real source of the off-policy gap
(π ≠ μ) that trust-region masks act on before any optimizer step.
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
import jax.random as jr
import numpy as np

#: a small verifiable task: the continuation must name the capital.
TASKS = (
    (
        "The capital of France is Paris. The capital of Germany is Berlin. "
        "The capital of Italy is",
        "Rome",
    ),
    (
        "The capital of Spain is Madrid. The capital of Portugal is Lisbon. "
        "The capital of Japan is",
        "Tokyo",
    ),
    (
        "The capital of Egypt is Cairo. The capital of Kenya is Nairobi. "
        "The capital of Russia is",
        "Moscow",
    ),
    (
        "The capital of Canada is Ottawa. The capital of Brazil is Brasilia. "
        "The capital of Greece is",
        "Athens",
    ),
)


class Rollouts(NamedTuple):
    """A group-structured batch of sampled responses with both views of each token.

    Attributes:
        tokens: ``[B, N]`` sampled ids (B = groups × samples).
        group: ``[B]`` prompt (group) id of each response.
        reward: ``[B]`` verifiable reward in {0, 1}.
        text: the decoded responses.
        behavior_logp: ``[B, N, V]`` rollout-engine (bfloat16) log-probs, full.
        topk_logp, topk_ids: ``[B, N, K]`` what the rollout engine reports.
        logits: ``[B, N, V]`` trainer (float32) logits at the same positions.
    """

    tokens: np.ndarray
    group: np.ndarray
    reward: np.ndarray
    text: list
    behavior_logp: np.ndarray
    topk_logp: np.ndarray
    topk_ids: np.ndarray
    logits: np.ndarray


def _left_pad(seqs: list[list[int]], pad: int) -> tuple[np.ndarray, np.ndarray]:
    width = max(len(s) for s in seqs)
    ids = np.full((len(seqs), width), pad, np.int32)
    mask = np.zeros((len(seqs), width), np.int32)
    for i, s in enumerate(seqs):
        ids[i, width - len(s) :] = s
        mask[i, width - len(s) :] = 1
    return ids, mask


def collect(
    model,
    *,
    tasks=TASKS,
    samples: int,
    new_tokens: int,
    topk: int,
    temperature: float,
    seed: int,
) -> Rollouts:
    """Samples ``samples`` responses per task and recomputes them in the trainer.

    Args:
        model: a loaded :class:`theorycheck.models.Model` (float32 parameters).
        tasks: ``(prompt, answer)`` pairs; reward 1 iff the answer is in the response.
        samples: responses per prompt (the GRPO group size).
        new_tokens: tokens generated per response.
        topk: K, the number of top log-probs the rollout engine reports.
        temperature: sampling temperature.
        seed: PRNG seed.

    Returns:
        :class:`Rollouts`.
    """
    from theorycheck.models import cast_params, forward, generate

    cfg, params, tok = model
    prompts = [tok.encode(p).ids for p, _ in tasks for _ in range(samples)]
    group = np.repeat(np.arange(len(tasks)), samples)
    ids, mask = _left_pad(prompts, pad=0)
    rollout_params = cast_params(params, jnp.bfloat16)
    gen = generate(
        rollout_params,
        cfg,
        ids,
        key=jr.key(seed),
        prompt_mask=mask,
        max_new_tokens=new_tokens,
        temperature=temperature,
        topk_logprobs=topk,
        return_full_logprobs=True,
    )
    tokens = np.asarray(gen.tokens)
    full = np.concatenate([ids, tokens], axis=1)
    full_mask = np.concatenate([mask, np.ones_like(tokens)], axis=1)
    logits = forward(params, cfg, full, attention_mask=full_mask)
    start = ids.shape[1] - 1  # row t scores the token at t + 1
    trainer = np.asarray(logits[:, start : start + new_tokens], np.float32)
    text = [tok.decode(list(map(int, row))) for row in tokens]
    reward = np.array([float(tasks[g][1] in t) for g, t in zip(group, text)])
    return Rollouts(
        tokens=tokens,
        group=group,
        reward=reward,
        text=text,
        behavior_logp=np.asarray(gen.full_logprobs, np.float32),
        topk_logp=np.asarray(gen.topk_logprobs, np.float32),
        topk_ids=np.asarray(gen.topk_ids, np.int32),
        logits=trainer,
    )

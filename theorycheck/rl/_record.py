r"""Recorded rollouts: what a replay needs, compactly; the anchor recomputed from it.

A rollout batch is recorded as the prompt ids and mask, the sampled tokens, the groups
and rewards, the engine's log-prob of each sampled token and its top-K (ids and
log-probs, float16; token ids as uint16 where the vocabulary fits, else int32): about
``B·N·(6 + 4K)`` bytes, no vocabulary-sized array.

The trainer's anchor log μ over the whole vocabulary is not stored: :func:`rescore`
recomputes it by one teacher-forced forward pass of the engine (parameters cast to the
engine dtype) over prompt + response,

.. math:: \log\mu_{st} = \operatorname{log\,softmax}(z^\text{engine}_{st} / T),

the same function of the recorded tokens in the run and in its replay, and on every
machine: by default the pass runs with each operation computed in float64 and rounded
once to the engine's declared dtype (``arithmetic="exact"``), since XLA's own bfloat16
arithmetic rounds differently on different CPUs. The sampled
tokens themselves came from the KV-cached generation, whose own log-probs agree with
this teacher-forced pass only up to the engine's rounding (the recorded sampled
log-probs and top-K let a replay measure that gap); a replay never regenerates.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from theorycheck._errors import BadInput
from theorycheck.rl._config import Arithmetic
from theorycheck.rl._rollout import Rollouts

#: the arrays of one recorded batch (prefixed per batch in a shared ``.npz``).
FIELDS = (
    "prompt_ids",
    "prompt_mask",
    "tokens",
    "group",
    "reward",
    "sampled_logp",
    "topk_ids",
    "topk_logp",
)


def token_ids(ids) -> np.ndarray:
    """Token ids as uint16 when every id fits (exact), else int32."""
    ids = np.asarray(ids)
    fits = ids.size == 0 or (ids.min() >= 0 and ids.max() < 2**16)
    return ids.astype(np.uint16 if fits else np.int32)


def record(rollouts: Rollouts) -> dict[str, np.ndarray]:
    """The compact arrays of ``rollouts`` (:data:`FIELDS`; top-K in float16)."""
    return {
        "prompt_ids": np.asarray(rollouts.prompt_ids, np.int32),
        "prompt_mask": np.asarray(rollouts.prompt_mask, np.int8),
        "tokens": token_ids(rollouts.tokens),
        "group": np.asarray(rollouts.group, np.int16),
        "reward": np.asarray(rollouts.reward, np.float32),
        "sampled_logp": np.asarray(rollouts.sampled_logp, np.float32),
        "topk_ids": token_ids(rollouts.topk_ids),
        "topk_logp": np.asarray(rollouts.topk_logp, np.float16),
    }


def rescore(
    model,
    prompt_ids,
    prompt_mask,
    tokens,
    *,
    engine_dtype: str,
    temperature: float,
    arithmetic: str = "exact",
) -> np.ndarray:
    r"""``[B, N, V]`` float32 engine log-probs of the response positions (teacher
    forced, parameters cast to ``engine_dtype``), computed one of
    :class:`Arithmetic` ways.

    With ``arithmetic="exact"`` the pass is :func:`theorycheck.models.exactly_rounded`:
    the engine's program (bfloat16 activations, float32 norm statistics and softmax)
    with each operation computed in float64 and rounded once to its declared dtype,
    so the anchor is one function of the recorded tokens on every machine. With
    ``"xla"`` it is XLA's compiled engine-dtype pass, whose bfloat16 rounding differs
    between CPUs (results recorded before the choice existed used it)."""
    from theorycheck.models import (
        cast_params,
        distinct_prefixes,
        forward,
        sampling_logprobs,
    )

    if engine_dtype not in ("bfloat16", "float32"):
        raise BadInput(
            f"engine_dtype must be bfloat16 or float32, got {engine_dtype!r}"
        )
    if arithmetic not in {a.value for a in Arithmetic}:
        raise BadInput(
            f"anchor arithmetic must be one of {', '.join(Arithmetic)}, "
            f"got {arithmetic!r}"
        )
    cfg, params, _ = model
    engine = cast_params(params, jnp.dtype(engine_dtype))
    ids = np.concatenate([prompt_ids, tokens], axis=1)
    mask = np.concatenate([prompt_mask, np.ones_like(tokens)], axis=1).astype(np.int32)
    start = prompt_ids.shape[1] - 1  # row t scores the token at t + 1
    n = tokens.shape[1]

    if arithmetic == "xla":  # full sequences, as the results that used it ran

        def score(p, i, m):
            logits = forward(p, cfg, i, attention_mask=m)[:, start : start + n]
            return sampling_logprobs(logits, temperature)

        return np.asarray(score(engine, ids, mask), np.float32)

    # each distinct prompt once, the head at the scored positions only: exactly
    # rounded, the same numbers as the full sequences (each operation is its float64
    # value rounded once, whatever the shapes of the products)
    prefix_ids, prefix_mask, group = distinct_prefixes(prompt_ids, prompt_mask)
    out = _exact_scorer(cfg, float(temperature))(
        engine, prefix_ids, prefix_mask, np.asarray(tokens, np.int32), group
    )
    return np.asarray(out, np.float32)


@functools.cache
def _exact_scorer(cfg, temperature: float):
    """The jitted exactly rounded scoring pass of one model config and temperature,
    built once: a new ``jax.jit`` per call would trace the model through
    ``exactly_rounded``'s interpreter and lower it again for every batch (about a
    quarter of a rescore's CPU time on SmolLM2; the compiled program is the same)."""
    from theorycheck.models import exactly_rounded, response_logits, sampling_logprobs

    def exact(p, pi, pm, t, g):
        logits = response_logits(p, cfg, pi, pm, t, g)
        return sampling_logprobs(logits, temperature)

    return jax.jit(exactly_rounded(exact))


def from_record(
    model,
    rec: dict,
    *,
    engine_dtype: str,
    temperature: float,
    anchor: bool = True,
    tokenizer=None,
    arithmetic: str = "exact",
) -> Rollouts:
    """:class:`Rollouts` rebuilt from a :func:`record` (the trainer's input).

    Args:
        model: the loaded model the batch was sampled from.
        rec: the recorded arrays.
        engine_dtype: the engine's dtype (``"bfloat16"``/``"float32"``).
        temperature: the sampling temperature.
        anchor: recompute the full-vocabulary anchor (:func:`rescore`); False leaves
            ``behavior_logp`` None (an on-policy trainer uses its own policy).
        tokenizer: decodes ``text`` when given (else ``text`` is empty strings).
        arithmetic: how the anchor is computed (:func:`rescore`).
    """
    missing = [f for f in FIELDS if f not in rec]
    if missing:
        raise BadInput(f"recorded rollouts lack {', '.join(missing)}")
    tokens = np.asarray(rec["tokens"], np.int32)
    pid = np.asarray(rec["prompt_ids"], np.int32)
    pmask = np.asarray(rec["prompt_mask"], np.int32)
    blogp = None
    if anchor:
        blogp = rescore(
            model,
            pid,
            pmask,
            tokens,
            engine_dtype=engine_dtype,
            temperature=temperature,
            arithmetic=arithmetic,
        )
    text = (
        [tokenizer.decode(list(map(int, row))) for row in tokens]
        if tokenizer is not None
        else [""] * len(tokens)
    )
    return Rollouts(
        tokens=tokens,
        group=np.asarray(rec["group"], np.int64),
        reward=np.asarray(rec["reward"], np.float64),
        text=text,
        behavior_logp=blogp,
        topk_logp=np.asarray(rec["topk_logp"], np.float32),
        topk_ids=np.asarray(rec["topk_ids"], np.int32),
        logits=None,
        sampled_logp=np.asarray(rec["sampled_logp"], np.float32),
        prompt_ids=pid,
        prompt_mask=pmask,
        engine_dtype=engine_dtype,
    )


def anchor_gap(rollouts: Rollouts) -> dict:
    """How far the rescored anchor is from what the generating engine reported:
    max |Δ| of the sampled token's log-prob and of the top-K log-probs (the top-K
    recorded in float16, so ~1e-3 is its resolution)."""
    if rollouts.behavior_logp is None:
        return {}
    b = rollouts.behavior_logp
    sampled = np.take_along_axis(b, rollouts.tokens[..., None], -1)[..., 0]
    topk = np.take_along_axis(b, rollouts.topk_ids, -1)
    return {
        "max_abs_sampled_logp": float(np.max(np.abs(sampled - rollouts.sampled_logp))),
        "max_abs_topk_logp": float(np.max(np.abs(topk - rollouts.topk_logp))),
    }

"""Recorded rollouts: compact, rebuilt exactly, the anchor recomputed by one
teacher-forced engine pass (and how far that is from the generating engine)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from theorycheck._errors import BadInput
from theorycheck.rl import (
    FIELDS,
    TrainConfig,
    Trainer,
    anchor_gap,
    collect,
    from_record,
    make_problems,
    record,
    rescore,
)


def test_record_has_every_field_and_no_vocabulary_array(rollouts_bf16):
    rec = record(rollouts_bf16)
    assert set(rec) == set(FIELDS)
    b, n = rollouts_bf16.tokens.shape
    assert all(
        a.shape[:2] in ((b, n), (b, rec["prompt_ids"].shape[1])) or a.ndim == 1
        for a in rec.values()
    )
    assert rec["topk_logp"].dtype == np.float16


def test_from_record_rebuilds_tokens_rewards_and_groups(tiny, rollouts_bf16):
    back = from_record(
        tiny, record(rollouts_bf16), engine_dtype="bfloat16", temperature=1.0
    )
    np.testing.assert_array_equal(back.tokens, rollouts_bf16.tokens)
    np.testing.assert_array_equal(back.group, rollouts_bf16.group)
    np.testing.assert_array_equal(back.reward, rollouts_bf16.reward)
    np.testing.assert_array_equal(back.prompt_ids, rollouts_bf16.prompt_ids)
    assert back.behavior_logp.shape == rollouts_bf16.behavior_logp.shape


def test_rescored_anchor_is_close_to_the_generating_engine(tiny, rollouts_bf16):
    # Two routes to log μ: the KV-cached generation and one teacher-forced pass. In
    # float32 they agree to rounding; in bfloat16 only to the engine's precision.
    r32 = collect(
        tiny,
        make_problems("addition", 4, seed=0),
        samples=4,
        new_tokens=5,
        topk=5,
        seed=0,
        engine_dtype="float32",
    )
    f32 = rescore(
        tiny,
        r32.prompt_ids,
        r32.prompt_mask,
        r32.tokens,
        engine_dtype="float32",
        temperature=1.0,
    )
    np.testing.assert_allclose(f32, r32.behavior_logp, atol=1e-4)
    b16 = rescore(
        tiny,
        rollouts_bf16.prompt_ids,
        rollouts_bf16.prompt_mask,
        rollouts_bf16.tokens,
        engine_dtype="bfloat16",
        temperature=1.0,
    )
    assert np.max(np.abs(b16 - rollouts_bf16.behavior_logp)) < 0.2
    gap = anchor_gap(rollouts_bf16._replace(behavior_logp=b16))
    assert gap["max_abs_sampled_logp"] < 0.2 and gap["max_abs_topk_logp"] < 0.2


@pytest.fixture
def rescore_args(tiny, rollouts_bf16):
    """``rescore``'s positional arguments for the bfloat16 batch."""
    return (
        tiny,
        rollouts_bf16.prompt_ids,
        rollouts_bf16.prompt_mask,
        rollouts_bf16.tokens,
    )


def test_rescore_is_deterministic(rescore_args):
    args = rescore_args
    a = rescore(*args, engine_dtype="bfloat16", temperature=1.0)
    b = rescore(*args, engine_dtype="bfloat16", temperature=1.0)
    np.testing.assert_array_equal(a, b)


def test_the_exact_scoring_pass_is_traced_once_per_model_and_temperature(
    rescore_args,
):
    """A second batch of the same model and temperature reuses the jitted exactly
    rounded pass (no new trace through the interpreter); another temperature builds
    its own."""
    from theorycheck.rl import _record

    _record._exact_scorer.cache_clear()
    for _ in range(2):
        rescore(*rescore_args, engine_dtype="bfloat16", temperature=1.0)
    info = _record._exact_scorer.cache_info()
    assert (info.misses, info.hits) == (1, 1)
    rescore(*rescore_args, engine_dtype="bfloat16", temperature=0.5)
    assert _record._exact_scorer.cache_info().misses == 2


def test_an_on_policy_trainer_needs_no_anchor(tiny, rollouts_bf16):
    back = from_record(
        tiny,
        record(rollouts_bf16),
        engine_dtype="float32",
        temperature=1.0,
        anchor=False,
    )
    assert back.behavior_logp is None
    Trainer(tiny, back, TrainConfig(mismatch=False), seed=0)
    with pytest.raises(BadInput, match="full log-probs"):
        Trainer(tiny, back, TrainConfig(mismatch=True), seed=0)


def test_from_record_refuses_a_missing_field(tiny, rollouts_bf16):
    rec = record(rollouts_bf16)
    del rec["tokens"]
    with pytest.raises(BadInput, match="tokens"):
        from_record(tiny, rec, engine_dtype="bfloat16", temperature=1.0)


def test_the_exact_anchor_is_a_bfloat16_anchor_other_than_xlas(
    rescore_args, rollouts_bf16
):
    # two bfloat16 engines: both near the generating engine, not the same numbers
    args = rescore_args
    exact = rescore(*args, engine_dtype="bfloat16", temperature=1.0)
    xla = rescore(*args, engine_dtype="bfloat16", temperature=1.0, arithmetic="xla")
    assert exact.dtype == np.float32 and exact.shape == xla.shape
    assert not np.array_equal(exact, xla)
    assert np.max(np.abs(exact - rollouts_bf16.behavior_logp)) < 0.2
    with pytest.raises(BadInput, match="fast"):
        rescore(*args, engine_dtype="bfloat16", temperature=1.0, arithmetic="fast")


def test_the_exact_anchor_runs_each_prompt_once_with_the_full_passs_numbers(
    rescore_args,
):
    """rescore's exact pass runs each distinct prompt once and the head at the
    scored positions only; exactly rounded, that is the full sequences' exactly
    rounded pass bit for bit (each operation is its float64 value rounded once)."""
    from theorycheck.models import (
        cast_params,
        distinct_prefixes,
        exactly_rounded,
        forward,
        sampling_logprobs,
    )

    model, pid, pmask, tokens = rescore_args
    assert len(distinct_prefixes(pid, pmask)[0]) < len(pid)  # prompts are shared
    cfg, params, _ = model
    ids = np.concatenate([pid, tokens], axis=1)
    mask = np.concatenate([pmask, np.ones_like(tokens)], axis=1).astype(np.int32)
    start, n = pid.shape[1] - 1, tokens.shape[1]

    def full(p, i, m):
        z = forward(p, cfg, i, attention_mask=m)[:, start : start + n]
        return sampling_logprobs(z, 1.0)

    engine = cast_params(params, jnp.bfloat16)
    want = np.asarray(jax.jit(exactly_rounded(full))(engine, ids, mask), np.float32)
    got = rescore(*rescore_args, engine_dtype="bfloat16", temperature=1.0)
    np.testing.assert_array_equal(got, want)

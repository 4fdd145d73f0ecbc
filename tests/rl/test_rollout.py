"""Rollouts: what the engine reports is consistent, the trainer view is float32."""

import numpy as np
import pytest

from theorycheck._errors import BadInput
from theorycheck.rl import collect, make_problems


def test_collect_shapes_and_groups(rollouts_bf16):
    r = rollouts_bf16
    assert r.tokens.shape == (16, 5)
    assert r.behavior_logp.shape == r.logits.shape == (16, 5, 97)
    assert r.group.tolist() == [g for g in range(4) for _ in range(4)]
    assert r.prompt_ids.shape[1] % 16 == 0  # padded to a multiple of 16
    assert set(np.unique(r.reward)) <= {0.0, 1.0}


def test_sampled_logp_is_the_full_logp_at_the_sampled_token(rollouts_bf16):
    r = rollouts_bf16
    gathered = np.take_along_axis(r.behavior_logp, r.tokens[..., None], -1)[..., 0]
    np.testing.assert_array_equal(gathered, r.sampled_logp)
    np.testing.assert_allclose(np.exp(r.behavior_logp).sum(-1), 1.0, atol=1e-2)


def test_topk_is_the_top_of_the_full_logp(rollouts_bf16):
    r = rollouts_bf16
    top = np.sort(r.behavior_logp, axis=-1)[..., ::-1][..., :5]
    np.testing.assert_array_equal(r.topk_logp, top)


def test_float32_engine_matches_the_trainer_bfloat16_does_not(
    rollouts_f32, rollouts_bf16
):
    def gap(r):
        trainer = r.logits - np.log(np.exp(r.logits).sum(-1, keepdims=True))
        return np.max(np.abs(trainer - r.behavior_logp))

    assert gap(rollouts_f32) < 1e-4  # KV-cache vs full forward, both float32
    assert gap(rollouts_bf16) > 1e-3  # the precision mismatch is real


def test_collect_refuses_unknown_engine(tiny):
    with pytest.raises(BadInput, match="float16"):
        collect(
            tiny,
            make_problems("addition", 1, seed=0),
            samples=1,
            new_tokens=2,
            topk=2,
            seed=0,
            engine_dtype="float16",
        )

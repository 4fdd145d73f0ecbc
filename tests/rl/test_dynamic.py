"""Dynamic sampling: redraw prompts until a GRPO group has mixed rewards."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from theorycheck._errors import BadInput
from theorycheck.rl import (
    DRAW_STRIDE,
    collect,
    collect_mixed,
    make_problems,
    mixed_groups,
)

KW = {"samples": 4, "new_tokens": 5, "topk": 5}


class _R:
    def __init__(self, reward, group):
        self.reward, self.group = np.asarray(reward), np.asarray(group)


@given(st.lists(st.tuples(st.integers(0, 3), st.sampled_from([0.0, 1.0])), max_size=20))
def test_mixed_groups_counts_groups_with_two_reward_values(rows):
    reward = [r for _, r in rows]
    group = [g for g, _ in rows]
    brute = sum(len({r for g2, r in rows if g2 == g}) > 1 for g in set(group))
    assert mixed_groups(_R(reward, group)) == brute


def _plain(model, seed, d, engine="bfloat16"):
    s = seed + DRAW_STRIDE * d
    problems = make_problems("addition", 4, seed=s)
    return collect(model, problems, seed=s, engine_dtype=engine, **KW)


def test_collect_mixed_redraws_until_a_group_trains(tiny):
    # find a seed whose first draw has no mixed group on the tiny model
    seed = next(s for s in range(12) if mixed_groups(_plain(tiny, s, 0)) == 0)
    out, draw = collect_mixed(tiny, "addition", 4, seed=seed, redraws=6, **KW)
    # every earlier draw, recomputed with collect itself, had no mixed group
    for d in range(draw):
        assert mixed_groups(_plain(tiny, seed, d)) == 0
    assert draw >= 1
    assert mixed_groups(out) > 0 or draw == 6
    np.testing.assert_array_equal(out.prompt_ids, _plain(tiny, seed, draw).prompt_ids)
    # a known draw is reused without searching; another engine scores the same prompts
    again, same = collect_mixed(tiny, "addition", 4, seed=seed, draw=draw, **KW)
    assert same == draw
    np.testing.assert_array_equal(again.tokens, out.tokens)
    f32, d32 = collect_mixed(
        tiny, "addition", 4, seed=seed, redraws=6, engine_dtype="float32", **KW
    )
    assert d32 == draw and f32.engine_dtype == "float32"
    np.testing.assert_array_equal(f32.prompt_ids, out.prompt_ids)


def test_collect_mixed_with_no_redraws_returns_the_first_draw(tiny):
    out, draw = collect_mixed(tiny, "addition", 4, seed=0, redraws=0, **KW)
    assert draw == 0
    np.testing.assert_array_equal(out.tokens, _plain(tiny, 0, 0).tokens)


def test_collect_mixed_refuses_negative_redraws(tiny):
    with pytest.raises(BadInput, match="redraws = -1"):
        collect_mixed(tiny, "addition", 4, seed=0, redraws=-1, **KW)

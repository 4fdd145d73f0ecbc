"""Dynamic sampling: redraw prompts until GRPO groups have mixed rewards."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from theorycheck._errors import BadInput
from theorycheck.rl import (
    DRAW_STRIDE,
    collect,
    collect_filled,
    collect_mixed,
    join_groups,
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


def _mixed(r, g):
    return len(set(np.asarray(r.reward)[np.asarray(r.group) == g].tolist())) > 1


def test_collect_filled_keeps_the_mixed_groups_of_successive_draws(tiny):
    # a seed whose first draw leaves groups unmixed: the fill must look further
    seed = next(
        s
        for s in range(12)
        if 0 < sum(_mixed(_plain(tiny, s, 0), g) for g in range(4)) < 4
    )
    out, meta = collect_filled(tiny, "addition", 4, seed=seed, redraws=3, **KW)
    # the same choice by brute force from collect's own draws
    draws = [_plain(tiny, seed, d) for d in range(meta["draws"])]
    mixed = [(d, g) for d, r in enumerate(draws) for g in range(4) if _mixed(r, g)]
    rest = [(d, g) for d, r in enumerate(draws) for g in range(4) if not _mixed(r, g)]
    assert meta["draws"] >= 2  # draw 0 alone cannot fill the batch
    assert len(mixed) >= 4 or meta["draws"] == 4
    assert len(mixed[:4]) < 4 or meta["draws"] - 1 == mixed[3][0]  # stops when full
    want = sorted(mixed[:4] + rest[: 4 - len(mixed[:4])])
    assert [tuple(k) for k in meta["kept"]] == want
    assert meta["mixed_groups"] == mixed_groups(out) == min(len(mixed), 4)
    np.testing.assert_array_equal(out.group, np.repeat(np.arange(4), KW["samples"]))
    width = out.prompt_ids.shape[1]
    for new, (d, g) in enumerate(want):
        rows = np.flatnonzero(draws[d].group == g)
        mine = np.flatnonzero(out.group == new)
        for f in ("tokens", "reward", "sampled_logp", "topk_ids", "topk_logp"):
            np.testing.assert_array_equal(
                getattr(out, f)[mine], getattr(draws[d], f)[rows]
            )
        pad = width - draws[d].prompt_ids.shape[1]
        np.testing.assert_array_equal(out.prompt_mask[mine, :pad], 0)
        np.testing.assert_array_equal(
            out.prompt_ids[mine, pad:], draws[d].prompt_ids[rows]
        )
        assert [out.text[i] for i in mine] == [draws[d].text[i] for i in rows]


def test_joined_groups_score_as_in_their_own_draw(tiny):
    # left-padding a prompt further (mask 0) leaves the model's logits unchanged
    from theorycheck.models import forward

    draws = {0: _plain(tiny, 1, 0), 1: _plain(tiny, 1, 1)}
    if draws[0].prompt_ids.shape[1] == draws[1].prompt_ids.shape[1]:
        draws[1] = draws[1]._replace(
            prompt_ids=np.pad(draws[1].prompt_ids, ((0, 0), (16, 0))),
            prompt_mask=np.pad(draws[1].prompt_mask, ((0, 0), (16, 0))),
        )
    out = join_groups(draws, [(0, 1), (1, 2)])
    cfg, params, _ = tiny
    n = out.tokens.shape[1]

    def scores(r, rows):
        ids, mask = r.sequences()
        return np.asarray(forward(params, cfg, ids[rows], attention_mask=mask[rows]))[
            :, -n:
        ]

    for new, (d, g) in enumerate([(0, 1), (1, 2)]):
        mine = scores(out, np.flatnonzero(out.group == new))
        theirs = scores(draws[d], np.flatnonzero(draws[d].group == g))
        np.testing.assert_allclose(mine, theirs, rtol=1e-5, atol=1e-5)


def test_join_groups_of_one_whole_draw_is_that_draw(tiny):
    r = _plain(tiny, 0, 0)
    assert join_groups({0: r}, [(0, g) for g in range(4)]) is r


def test_collect_filled_refuses_more_mixed_groups_than_prompts(tiny):
    with pytest.raises(BadInput, match="min_mixed = 5 must be <= prompts = 4"):
        collect_filled(tiny, "addition", 4, seed=0, min_mixed=5, **KW)

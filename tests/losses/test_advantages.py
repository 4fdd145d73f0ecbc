"""GRPO / RLOO / Dr. GRPO advantages: closed forms, two routes, zero-group flags."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from theorycheck._errors import BadInput
from theorycheck.losses import (
    dr_grpo_advantages,
    grpo_advantages,
    rloo_advantages,
)
from theorycheck.testing import assert_close

REWARDS = np.array([1.0, 0.0, 1.0, 0.0, 1.0, 1.0, 1.0, 1.0, 0.0, 1.0, 0.0, 0.0])
GROUPS = np.repeat(np.arange(3), 4)


def test_grpo_advantages_survey_population_example():
    # Population std of {1, 0, 1, 0} is 0.5: advantages +-1 (up to eps).
    out = grpo_advantages(
        REWARDS[:4], GROUPS[:4], num_groups=1, std="population", eps=0.0
    )
    assert_close(out.adv, [1.0, -1.0, 1.0, -1.0])


def test_grpo_advantages_sample_std_uses_g_minus_1():
    out = grpo_advantages(REWARDS[:4], GROUPS[:4], num_groups=1, eps=0.0)
    assert_close(out.adv, np.array([1.0, -1.0, 1.0, -1.0]) * np.sqrt(3.0) / 2.0)


def test_grpo_advantages_flags_zero_groups():
    out = grpo_advantages(REWARDS, GROUPS, num_groups=3)
    assert np.asarray(out.zero_group).tolist() == [False, True, False]
    assert np.all(np.asarray(out.adv)[4:8] == 0.0)


def test_grpo_advantages_rejects_unknown_std():
    with pytest.raises(BadInput, match="'median'"):
        grpo_advantages(REWARDS, GROUPS, num_groups=3, std="median")


# Fixed batch size and few group counts: every distinct shape recompiles three jitted
# functions, so 60 examples keep this under a few seconds.
@settings(max_examples=60)
@given(st.lists(st.integers(0, 3), min_size=8, max_size=8), st.integers(1, 4))
def test_advantages_match_numpy_reference(values, groups):
    rewards = np.asarray(values, dtype=np.float64)
    gid = np.arange(rewards.size) % groups
    grpo = np.asarray(grpo_advantages(rewards, gid, num_groups=groups, eps=1e-6).adv)
    rloo = np.asarray(rloo_advantages(rewards, gid, num_groups=groups).adv)
    dr = np.asarray(dr_grpo_advantages(rewards, gid, num_groups=groups).adv)
    for g in range(groups):
        r = rewards[gid == g]
        if r.size < 2 or np.all(r == r[0]):
            assert np.all(grpo[gid == g] == 0) and np.all(rloo[gid == g] == 0)
            continue
        loo = np.array([r[i] - np.delete(r, i).mean() for i in range(r.size)])
        assert_close(rloo[gid == g], loo)
        assert_close(dr[gid == g], r - r.mean())
        assert_close(grpo[gid == g], (r - r.mean()) / (r.std(ddof=1) + 1e-6))

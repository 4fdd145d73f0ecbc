"""The dense search compiles the next V's programs while the current V's descent
compiles (``search_tokens(..., then=, prepared=)``): the same outcome as a search
that compiles each V when it gets there, and a loss that fails to trace at a V that
is never searched raises nothing."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from theorycheck.convexity import _search


def _ce(z, k):
    """Cross-entropy -log pi_k: convex, so no start confirms and the descent runs."""
    return -jax.nn.log_softmax(z)[k]


def _not_convex(z, k):
    """+log pi_k: concave in the logits (H = -(diag(pi) - pi pi^T))."""
    return jax.nn.log_softmax(z)[k]


def _fails_at_four(z, k):
    if z.shape[0] == 4:
        raise ValueError("no program at V = 4")
    return -jax.nn.log_softmax(z)[k]


SMALL = {"num_starts": 16, "refine_steps": 3, "dynamic": True}


def _same(a, b):
    assert a.found == b.found and a.num_samples == b.num_samples
    if a.found:
        np.testing.assert_array_equal(a.logits, b.logits)
        np.testing.assert_array_equal(a.direction, b.direction)
        assert a.curvature == b.curvature and a.curvature_fd == b.curvature_fd


def test_programs_of_the_next_v_are_compiled_ahead_and_change_nothing():
    prepared: dict = {}
    first = _search.search_tokens(
        _ce, 3, {0: {}}, seed=3, then=(4, {0: {}}, 4), prepared=prepared, **SMALL
    )
    assert not first[0].found
    assert (4, None) in prepared  # set compiling while V = 3's descent compiled
    ahead = prepared[(4, None)]
    got = _search.search_tokens(_ce, 4, {0: {}}, seed=4, prepared=prepared, **SMALL)
    assert prepared[(4, None)] is ahead  # used, not compiled again
    assert not got[0].found and got[0].num_samples == 16 + 8 * 3


def test_a_hit_at_the_starts_compiles_nothing_ahead_and_ahead_finds_the_same():
    prepared: dict = {}
    out = _search.search_tokens(
        _not_convex, 3, {0: {}}, seed=3, then=(4, {0: {}}, 4), prepared=prepared,
        **SMALL,
    )  # fmt: skip
    assert out[0].found and prepared == {(3, None): prepared[(3, None)]}
    ahead = _search._Prepared(_not_convex, 4, 0, {}, 4, 16, 3, True)
    ahead.start_hess()
    got = _search.search_tokens(
        _not_convex, 4, {0: {}}, seed=4, prepared={(4, None): ahead}, **SMALL
    )
    assert got[0].found
    _same(got[0], _search.search_tokens(_not_convex, 4, {0: {}}, seed=4, **SMALL)[0])


def test_a_trace_failure_is_raised_only_where_the_program_is_used():
    prepared: dict = {}
    out = _search.search_tokens(
        _fails_at_four, 3, {0: {}}, seed=3, then=(4, {0: {}}, 4), prepared=prepared,
        **SMALL,
    )  # fmt: skip
    assert not out[0].found and (4, None) in prepared
    with pytest.raises(ValueError, match="no program at V = 4"):
        _search.search_tokens(
            _fails_at_four, 4, {0: {}}, seed=4, prepared=prepared, **SMALL
        )

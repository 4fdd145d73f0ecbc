"""Tests for theorycheck.numeric._masks: rule tables and the Eq. 12 direction rule."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from theorycheck import BadInput
from theorycheck.numeric import dppo_mask, predictive_mask, ratio_mask

# XLA on CPU treats subnormal inputs as zero (denormals-are-zero), so a subnormal
# advantage *is* 0 to every jitted kernel; the properties are stated on normal floats.
F = st.floats(-3, 3, allow_nan=False, allow_subnormal=False)


def test_ratio_mask_table():
    r = np.array([1.5, 1.5, 0.5, 0.5, 1.1, 0.9, 1.5], np.float64)
    a = np.array([1.0, -1.0, 1.0, -1.0, 1.0, -1.0, 0.0], np.float64)
    got = ratio_mask(r, a, eps_low=0.2, eps_high=0.28)
    assert got.tolist() == [0, 1, 1, 0, 1, 1, 1]


@given(st.floats(0, 3), F, st.floats(0, 1))
def test_dppo_mask_matches_eq12(r, a, d):
    keep = float(dppo_mask(np.float64(d), np.float64(r), np.float64(a), delta=0.15))
    blocked = d > 0.15 and ((a > 0 and r > 1) or (a < 0 and r < 1))
    assert keep == (0.0 if blocked else 1.0)


@given(st.floats(0, 3), F, st.floats(0, 1))
def test_dppo_mask_never_blocks_moves_toward_one(r, a, d):
    # Eq. 12: an update that moves r back toward 1 (A (r - 1) <= 0) is always kept.
    if a * (r - 1) <= 0:
        assert (
            float(dppo_mask(np.float64(d), np.float64(r), np.float64(a), delta=0.0))
            == 1.0
        )


@given(F, F, st.floats(0, 1))
def test_predictive_mask_matches_rule(dd, a, d):
    keep = float(
        predictive_mask(np.float64(d), np.float64(dd), np.float64(a), delta=0.05)
    )
    # Â·Ḋ > 0 means "same nonzero sign"; the float product can underflow to 0.
    pushes = np.sign(a) * np.sign(dd) > 0
    assert keep == (0.0 if (d > 0.05 and pushes) else 1.0)


@given(st.floats(0.01, 3), F, st.floats(0, 1))
def test_predictive_mask_equals_dppo_mask_when_ddot_has_sign_of_ratio(r, a, d):
    # With a direction of the sign of (r - 1) (the binary reduction), the two agree.
    dd = np.float64(np.sign(r - 1) * 0.3)
    assert float(predictive_mask(np.float64(d), dd, np.float64(a), delta=0.1)) == float(
        dppo_mask(np.float64(d), np.float64(r), np.float64(a), delta=0.1)
    )


def test_dppo_mask_separate_low_threshold():
    got = dppo_mask(
        np.array([0.1, 0.1], np.float64),
        np.array([1.2, 0.8], np.float64),
        np.array([1.0, -1.0], np.float64),
        delta=0.2,
        delta_low=0.05,
    )
    assert got.tolist() == [1, 0]


def test_masks_bad_input_raises():
    with pytest.raises(BadInput, match="ratio"):
        ratio_mask(np.float64(np.nan), 1.0, eps_low=0.2, eps_high=0.2)
    with pytest.raises(BadInput, match="eps_low"):
        ratio_mask(1.0, 1.0, eps_low=-0.2, eps_high=0.2)
    with pytest.raises(BadInput, match="delta"):
        predictive_mask(0.1, 0.1, 1.0, delta=-1.0)
    with pytest.raises(BadInput, match="negative"):
        dppo_mask(0.1, -1.0, 1.0, delta=0.1)
    assert float(dppo_mask(np.inf, 2.0, 1.0, delta=0.1)) == 0.0  # inf D is allowed

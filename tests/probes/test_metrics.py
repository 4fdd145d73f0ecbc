"""Sign metrics next to base rates; the unsafe-keep rate; mean ± standard error."""

import numpy as np
import pytest

from theorycheck.probes import mean_se, sign_metrics, unsafe_keep


def test_the_trivial_predictor_scores_the_base_rate():
    real = np.array([1.0, 2.0, -1.0, 3.0, -0.5])
    m = sign_metrics(np.ones(5), real)
    assert m["agreement"] == m["base_rate"] == 0.6
    assert m["balanced_accuracy"] == 0.5
    assert m["precision_decrease"] is None and m["predicted_decrease"] == 0


def test_sign_metrics_by_hand():
    pred = np.array([1, -1, -1, 1, 0, -1])
    real = np.array([1, -1, 1, -1, 1, 0])  # the last one is an exact 0: left out
    m = sign_metrics(pred, real)
    assert m["tokens"] == 5 and m["coverage"] == 0.8
    assert m["agreement"] == 0.5
    # rises: 2 (1 predicted rise) -> TPR 1/2; falls: 2 (1 predicted fall) -> TNR 1/2
    assert m["balanced_accuracy"] == 0.5
    assert m["precision_decrease"] == 0.5


def test_unsafe_keep_counts_only_outside_disagreements():
    d = np.array([0.2, 0.2, 0.01, 0.3])
    ratio = np.array([1.0, -1.0, 1.0, 1.0])
    ddot = np.array([-1.0, 1.0, -1.0, 1.0])
    real = np.array([0.1, 0.1, 0.1, 0.1])
    u = unsafe_keep(d, ratio, ddot, real, delta=0.1)
    assert u["outside"] == 3 and u["disagreement"] == 2
    assert u["ratio"] == {"kept": 1, "unsafe_keep": 1.0}
    assert u["ddot"] == {"kept": 1, "unsafe_keep": 1.0}


def test_mean_se_drops_missing_values():
    assert mean_se([None, 2.0, 4.0]) == pytest.approx({"mean": 3.0, "se": 1.0, "n": 2})
    assert mean_se([None]) == {"mean": None, "se": None, "n": 0}


def test_rounding_noise_in_d_is_inside_the_trust_region():
    # exactly on-policy D is float64 noise of either sign; at δ = 0 it must not count
    # as outside, whatever the order of summation left (1e-16 or -1e-16)
    d = np.array([1e-16, -3e-16, 6e-17, 0.2])
    u = unsafe_keep(d, [1, 1, -1, 1], [-1, -1, 1, -1], [1.0, -1.0, 1.0, 0.5], delta=0)
    assert u["outside"] == 1 and u["disagreement"] == 1
    assert u["ratio"]["kept"] == 0 and u["ddot"] == {"kept": 1, "unsafe_keep": 1.0}

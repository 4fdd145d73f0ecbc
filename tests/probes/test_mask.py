"""The coupled predictive mask: its rules and the recomputed update."""

import jax
import numpy as np
import pytest

from theorycheck._errors import BadInput
from theorycheck.probes import coupled_mask, coupled_update, divergences
from theorycheck.rl import TrainConfig, Trainer


def test_coupled_mask_rules():
    d = np.array([0.2, 0.2, 0.05, 0.05, 0.2])
    pred = np.array([0.1, -0.1, 0.1, 0.01, 0.1])
    adv = np.array([1.0, 1.0, 1.0, -1.0, 0.0])
    sign = coupled_mask(d, pred, adv, delta=0.1, rule="sign")
    thr = coupled_mask(d, pred, adv, delta=0.1, rule="threshold")
    assert sign.tolist() == [0, 1, 1, 1, 1]  # Â = 0 is never masked
    assert thr.tolist() == [0, 1, 0, 1, 1]  # 0.05 + 0.1 > δ: predicted to cross


@pytest.mark.parametrize(
    ("kw", "needle"), [({"rule": "x"}, "x"), ({"delta": -1}, "-1")]
)
def test_coupled_mask_refuses_bad_settings(kw, needle):
    with pytest.raises(BadInput, match=needle):
        coupled_mask([0.1], [0.1], [1.0], **{"delta": 0.0, **kw})


def test_coupled_update_keeps_no_token_predicted_to_rise(tiny, rollouts_bf16):
    tr = Trainer(tiny, rollouts_bf16, TrainConfig(lr=1e-2), seed=0)
    theta = tr.trainable0
    state = tr.optimizer.init(theta)
    adv = np.asarray(tr.batch.adv)
    rows = next(r for r in tr.minibatch_rows if np.any(adv[r] != 0))
    new, _, keep, pred = coupled_update(tr, theta, state, rows, delta=0.0)
    live = adv[rows] != 0
    assert np.all(keep[live & (pred > 0)] == 0) and np.all(keep[pred <= 0] == 1)
    # the recomputed update is the update of the kept tokens only
    _, grads = tr.loss_and_grad(theta, rows, keep)
    want, _, _ = tr.update(theta, state, grads)
    for a, b in zip(jax.tree_util.tree_leaves(new), jax.tree_util.tree_leaves(want)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert divergences(tr, new, rows).shape == (len(rows), 5)

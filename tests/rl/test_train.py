"""The trainer: exact frozen trunk, on-policy start, GRPO advantages, two routes to
the gradient, masked and clipped steps."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from theorycheck._errors import BadInput
from theorycheck.models import forward, merge_params, split_params
from theorycheck.rl import TrainConfig, Trainer, train


def test_trainer_refuses_a_batch_that_does_not_split(tiny, rollouts_bf16):
    with pytest.raises(BadInput, match="minibatches = 3"):
        Trainer(tiny, rollouts_bf16, TrainConfig(minibatches=3), seed=0)


def test_trainer_logits_equal_the_full_forward(tiny, rollouts_bf16):
    cfg, params, _ = tiny
    tr = Trainer(tiny, rollouts_bf16, TrainConfig(trainable_blocks=2), seed=0)
    ids, mask = rollouts_bf16.sequences()
    p64 = jax.tree_util.tree_map(lambda a: a.astype(jnp.float64), params)
    full = forward(p64, cfg, ids[tr.order], attention_mask=mask[tr.order])
    want = np.asarray(full)[:, tr.rows[0] : tr.rows[1]]
    # the trunk runs in float32 and the top in float64: float32 tolerance
    np.testing.assert_allclose(np.asarray(tr.logits(tr.trainable0)), want, atol=2e-4)
    top, _ = split_params(p64, cfg, 2)
    assert jax.tree_util.tree_structure(top) == jax.tree_util.tree_structure(
        tr.trainable0
    )
    assert merge_params(*split_params(params, cfg, 2))["embed"] is params["embed"]


def test_without_mismatch_the_first_step_is_on_policy(tiny, rollouts_f32):
    tr = Trainer(tiny, rollouts_f32, TrainConfig(mismatch=False), seed=0)
    logp = jax.nn.log_softmax(tr.logits(tr.trainable0), axis=-1)
    np.testing.assert_array_equal(np.asarray(logp), np.asarray(tr.batch.behavior_logp))


def test_grpo_advantages_come_from_the_rewards(tiny, rollouts_bf16):
    tr = Trainer(tiny, rollouts_bf16, TrainConfig(), seed=0)
    r, g = rollouts_bf16.reward[tr.order], rollouts_bf16.group[tr.order]
    for group in np.unique(g):
        a = tr.sequence_adv[g == group]
        if np.ptp(r[g == group]) == 0:
            assert np.all(a == 0)
        else:
            assert abs(a.sum()) < 1e-5 and np.all(
                np.sign(a) == np.sign(r[g == group] - r[g == group].mean())
            )
    assert tr.zero_groups < tr.groups  # the fixture's seed has signal


def test_gradient_matches_a_central_difference(tiny, rollouts_bf16):
    tr = Trainer(tiny, rollouts_bf16, TrainConfig(loss="pg"), seed=0)
    rows = _live_rows(tr)
    theta = tr.trainable0
    _, grads = tr.loss_and_grad(theta, rows)
    key = jax.random.key(1)
    leaves, tree = jax.tree_util.tree_flatten(theta)
    keys = jax.random.split(key, len(leaves))
    direction = tree.unflatten(
        [jax.random.normal(k, x.shape, x.dtype) for k, x in zip(keys, leaves)]
    )
    h = 1e-5
    move = lambda s: jax.tree_util.tree_map(
        lambda p, d: p + s * h * d, theta, direction
    )
    fd = (tr.loss_and_grad(move(1), rows)[0] - tr.loss_and_grad(move(-1), rows)[0]) / (
        2 * h
    )
    ad = sum(
        jnp.vdot(g, d)
        for g, d in zip(
            jax.tree_util.tree_leaves(grads), jax.tree_util.tree_leaves(direction)
        )
    )
    assert abs(float(fd) - float(ad)) <= 1e-6 * max(1.0, abs(float(ad)))


def test_a_fully_masked_minibatch_has_zero_gradient(tiny, rollouts_bf16):
    tr = Trainer(tiny, rollouts_bf16, TrainConfig(), seed=0)
    rows = tr.minibatch_rows[1]
    _, grads = tr.loss_and_grad(tr.trainable0, rows, np.zeros((len(rows), 5)))
    assert all(
        float(jnp.max(jnp.abs(g))) == 0.0 for g in jax.tree_util.tree_leaves(grads)
    )


def _live_rows(tr):
    """A minibatch holding a nonzero advantage."""
    adv = np.asarray(tr.batch.adv)
    return next(r for r in tr.minibatch_rows if np.any(adv[r] != 0))


def test_sgd_step_is_minus_lr_times_the_clipped_gradient(tiny, rollouts_bf16):
    cfg = TrainConfig(optimizer="sgd", lr=0.5, grad_clip=1e-3)
    tr = Trainer(tiny, rollouts_bf16, cfg, seed=0)
    theta = tr.trainable0
    _, grads = tr.loss_and_grad(theta, _live_rows(tr))
    norm = float(optax.tree.norm(grads))
    assert norm > 1e-3  # the clip is active
    _, _, delta = tr.update(theta, tr.optimizer.init(theta), grads)
    want = jax.tree_util.tree_map(lambda g: -0.5 * g * 1e-3 / norm, grads)
    for a, b in zip(jax.tree_util.tree_leaves(delta), jax.tree_util.tree_leaves(want)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-9, atol=1e-15)


def test_train_runs_every_step_and_moves_the_weights(tiny, rollouts_bf16):
    cfg = TrainConfig(minibatches=4, epochs=2, lr=1e-2)
    tr = Trainer(tiny, rollouts_bf16, cfg, seed=0)
    calls = []
    final, losses = train(tr, on_step=lambda *a: calls.append(a[:2]))
    assert calls == [(e, s) for e in range(2) for s in range(4)]
    assert len(losses) == 8
    moved = jax.tree_util.tree_map(
        lambda a, b: float(jnp.max(jnp.abs(a - b))), final, tr.trainable0
    )
    assert max(jax.tree_util.tree_leaves(moved)) > 0

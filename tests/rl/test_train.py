"""The trainer: exact frozen trunk, on-policy start, GRPO advantages, two routes to
the gradient, masked and clipped steps."""

import ast
from pathlib import Path

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


def test_a_float64_trunk_is_the_float64_forward(tiny, rollouts_bf16):
    """``trunk_dtype="float64"``: the trainer's logits are the whole model's
    float64 forward to float64 rounding (the float32 trunk's error, ~1e-4 above,
    is gone); the float32 trunk is a different array, and the trunk cache keeps
    the two apart."""
    cfg, params, _ = tiny
    ids, mask = rollouts_bf16.sequences()
    p64 = jax.tree_util.tree_map(lambda a: a.astype(jnp.float64), params)
    trunk = {}
    tr64, tr32 = (
        Trainer(tiny, rollouts_bf16, TrainConfig(trunk_dtype=d), seed=0, trunk=trunk)
        for d in ("float64", "float32")
    )
    assert len(trunk) == 2
    full = forward(p64, cfg, ids[tr64.order], attention_mask=mask[tr64.order])
    want = np.asarray(full)[:, tr64.rows[0] : tr64.rows[1]]
    got = np.asarray(tr64.logits(tr64.trainable0))
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    f32 = np.asarray(tr32.logits(tr32.trainable0))
    assert np.max(np.abs(f32 - want)) > 1e3 * np.max(np.abs(got - want))


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
    final, losses = train(tr, on_step=lambda s: calls.append((s.epoch, s.step)))
    assert calls == [(e, s) for e in range(2) for s in range(4)]
    assert len(losses) == 8
    moved = jax.tree_util.tree_map(
        lambda a, b: float(jnp.max(jnp.abs(a - b))), final, tr.trainable0
    )
    assert max(jax.tree_util.tree_leaves(moved)) > 0


def _leaves_equal(a, b):
    return all(
        np.array_equal(np.asarray(x), np.asarray(y))
        for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b))
    )


def test_steps_chain_theta_through_the_updates(tiny, rollouts_bf16):
    # Each step starts where the previous one ended, its update is the optimizer's
    # for its own minibatch's gradient at θ_t, and train ends at the last θ_{t+1}.
    cfg = TrainConfig(minibatches=2, epochs=2, lr=1e-2)
    tr = Trainer(tiny, rollouts_bf16, cfg, seed=0)
    steps = list(tr.steps())
    assert [(s.epoch, s.step) for s in steps] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert _leaves_equal(steps[0].trainable, tr.trainable0)
    for s, nxt in zip(steps, steps[1:]):
        assert _leaves_equal(nxt.trainable, s.new_trainable)
        assert _leaves_equal(nxt.opt_state, s.new_opt_state)
    s = steps[1]
    loss, grads = tr.loss_and_grad(s.trainable, s.rows)
    assert float(loss) == float(s.value)
    assert _leaves_equal(grads, s.grads)
    new, _, delta = tr.update(s.trainable, s.opt_state, grads)
    assert _leaves_equal(delta, s.delta) and _leaves_equal(new, s.new_trainable)
    final, losses = train(tr)
    assert _leaves_equal(final, steps[-1].new_trainable)
    assert losses == [float(s.value) for s in steps]


def test_steps_take_a_custom_gradient_and_time_its_phases(tiny, rollouts_bf16):
    # A zero gradient under SGD leaves θ where it was; the value is passed through
    # and the timer sees the grad and update calls of every step.
    cfg = TrainConfig(optimizer="sgd", minibatches=2, epochs=1, lr=0.5)
    tr = Trainer(tiny, rollouts_bf16, cfg, seed=0)
    zero = jax.tree_util.tree_map(jnp.zeros_like, tr.trainable0)
    phases = []

    def timer(phase, fn, *args):
        phases.append(phase)
        return fn(*args)

    steps = list(
        tr.steps(grad_fn=lambda th, j, rows: (("custom", j), zero), timer=timer)
    )
    assert [s.value for s in steps] == [("custom", 0), ("custom", 1)]
    assert phases == ["grad", "update"] * 2
    assert _leaves_equal(steps[-1].new_trainable, tr.trainable0)


ROOT = Path(__file__).resolve().parents[2]

#: modules that apply an optimizer's updates themselves: the probe's fast path, whose
#: jitted update of the trainer's optimizer (one and K masks at once) is passed to
#: ``Trainer.steps(update_fn=...)``; its loops iterate ``Trainer.steps`` and are
#: checked number for number against the plain loop by tests/probes/test_fast.py.
OWN_STEP = {"theorycheck/probes/_fast.py"}


def own_loops(root: Path = ROOT) -> set[str]:
    """Files of the package and the experiments that call ``.schedule()`` or
    ``apply_updates`` (the parts of a training loop) outside ``theorycheck/rl``."""
    out = set()
    for path in [
        *root.joinpath("theorycheck").rglob("*.py"),
        *root.glob("experiments/*.py"),
    ]:
        rel = path.relative_to(root).as_posix()
        if rel.startswith("theorycheck/rl/"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                if node.func.attr in ("schedule", "apply_updates"):
                    out.add(rel)
    return out


def test_one_training_loop():
    # The loop is Trainer.steps; a probe or experiment iterates it (grad_fn= for its
    # own objective) instead of stepping the optimizer itself.
    assert own_loops() == OWN_STEP


def test_one_training_loop_check_can_fail(tmp_path):
    (tmp_path / "theorycheck" / "rl").mkdir(parents=True)
    (tmp_path / "experiments").mkdir()
    (tmp_path / "theorycheck" / "rl" / "_train.py").write_text("t.schedule()\n")
    (tmp_path / "experiments" / "x.py").write_text(
        "for e, s, rows in trainer.schedule():\n    p = optax.apply_updates(p, u)\n"
    )
    assert own_loops(tmp_path) == {"experiments/x.py"}


def test_a_float64_trunk_runs_each_prompt_once(tiny, rollouts_bf16):
    """The float64 trunk (distinct prompts once, then the responses) is the full
    sequences' float64 residual stream to float64 rounding at every real position;
    the float32 trunk is the full sequences' pass itself."""
    from theorycheck.models import distinct_prefixes, hidden_states

    cfg, params, _ = tiny
    r = rollouts_bf16
    assert len(distinct_prefixes(r.prompt_ids, r.prompt_mask)[0]) < len(r.tokens)
    ids, mask = r.sequences()
    p64 = jax.tree_util.tree_map(lambda a: a.astype(jnp.float64), params)
    for dtype, params_t, tol in (("float64", p64, 1e-13), ("float32", params, 0.0)):
        tr = Trainer(tiny, r, TrainConfig(trunk_dtype=dtype), seed=0)
        want = hidden_states(
            params_t,
            cfg,
            ids[tr.order],
            num_blocks=cfg.num_layers - 2,
            attention_mask=mask[tr.order],
        )
        live = mask[tr.order] > 0
        got = np.asarray(tr.batch.hidden)[live]
        want = np.asarray(want, np.float64)[live]
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)

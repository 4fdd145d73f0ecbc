"""The trainer's configuration: refused values, the optimizer controls."""

import jax.numpy as jnp
import numpy as np
import pytest

from theorycheck._errors import BadInput
from theorycheck.rl import TrainConfig, make_optimizer


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"loss": "nope"}, "nope"),
        ({"loss": "gspo"}, "sequence"),
        ({"loss": "ppo", "loss_params": (("kappa", 3.0),)}, "kappa"),
        ({"reduction": "mean_of_nothing"}, "mean_of_nothing"),
        ({"optimizer": "lion"}, "lion"),
        ({"minibatches": 17}, "17"),
        ({"epochs": 0}, "epochs"),
        ({"lr": -1.0}, "-1.0"),
        ({"trunk_dtype": "bfloat16"}, "bfloat16"),
    ],
)
def test_train_config_refuses_bad_values(kwargs, needle):
    with pytest.raises(BadInput, match=needle):
        TrainConfig(**kwargs)


def test_adam_without_momentum_first_step_is_lr_times_sign():
    g = {"w": jnp.array([3.0, -0.5, 1e-3])}
    opt = make_optimizer(
        TrainConfig(optimizer="adam_no_momentum", lr=0.1, grad_clip=1e9)
    )
    step, _ = opt.update(g, opt.init(g), g)
    # beta1 = 0, bias-corrected second moment = g^2: the step is -lr·g/(|g| + eps)
    np.testing.assert_allclose(np.asarray(step["w"]), -0.1 * np.sign(g["w"]), rtol=1e-4)


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"beta1": 1.0}, "beta1"),
        ({"beta2": -0.1}, "beta2"),
        ({"eps": 0.0}, "eps"),
        ({"weight_decay": -1.0}, "weight_decay"),
        ({"grad_clip": float("nan")}, "grad_clip"),
    ],
)
def test_optimizer_flags_refuse_bad_values(kwargs, needle):
    with pytest.raises(BadInput, match=needle):
        TrainConfig(**kwargs)


def test_adamw_first_step_follows_beta1_beta2_and_eps():
    # Two routes: optax through make_optimizer, and Adam's first step by hand:
    # m = (1-b1) g / (1-b1), v = (1-b2) g² / (1-b2): step = -lr g / (|g| + eps)
    g = {"w": jnp.array([3.0, -0.5, 1e-3])}
    for b1, b2, eps in ((0.9, 0.95, 1e-8), (0.5, 0.999, 1e-2)):
        cfg = TrainConfig(lr=0.1, beta1=b1, beta2=b2, eps=eps, grad_clip=1e9)
        step, _ = make_optimizer(cfg).update(g, make_optimizer(cfg).init(g), g)
        want = -0.1 * np.asarray(g["w"]) / (np.abs(np.asarray(g["w"])) + eps)
        np.testing.assert_allclose(np.asarray(step["w"]), want, rtol=1e-5)


def test_adamw_second_step_uses_beta1():
    g1, g2 = {"w": jnp.array([1.0])}, {"w": jnp.array([-1.0])}
    steps = []
    for b1 in (0.0, 0.9):
        opt = make_optimizer(TrainConfig(lr=1.0, beta1=b1, beta2=0.5, grad_clip=1e9))
        _, state = opt.update(g1, opt.init(g1), g1)
        step, _ = opt.update(g2, state, g2)
        steps.append(float(step["w"][0]))
    # b1 = 0: the second step follows g2 alone: -lr·g2/sqrt(v̂2) = +1 (v̂2 = 1).
    # b1 = 0.9: m2 = 0.9·0.1 − 0.1 = −0.01, m̂2 = −0.01/(1 − 0.81): step = +0.0526
    np.testing.assert_allclose(steps, [1.0, 0.01 / 0.19], rtol=1e-5)


def test_weight_decay_shrinks_the_parameters_with_zero_gradient():
    w = {"w": jnp.array([2.0])}
    zero = {"w": jnp.array([0.0])}
    opt = make_optimizer(TrainConfig(lr=0.1, weight_decay=0.5, grad_clip=1e9))
    step, _ = opt.update(zero, opt.init(w), w)
    np.testing.assert_allclose(float(step["w"][0]), -0.1 * 0.5 * 2.0, rtol=1e-6)


def test_regime_names_the_anchor():
    assert TrainConfig().regime == "bf16_engine"
    assert TrainConfig(mismatch=False).regime == "on_policy"

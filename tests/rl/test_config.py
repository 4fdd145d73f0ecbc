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

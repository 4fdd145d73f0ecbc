"""RL machinery: rollouts, verifiable tasks, GRPO training with a fixed anchor.

``collect`` samples a rollout batch (bfloat16 engine by default) recording the sampled
token, its behavior log-prob, the engine's top-K and optionally the full vocabulary;
``make_problems`` generates verifiable tasks (Countdown in exact rational arithmetic,
addition, capitals); ``Trainer``/``train`` run M minibatch steps per epoch against the
fixed anchor with any registered token rule and reduction.
"""

from theorycheck.rl._config import (
    MAX_MINIBATCHES,
    OPTIMIZERS,
    TrainConfig,
    make_optimizer,
)
from theorycheck.rl._rollout import Rollouts, collect, left_pad
from theorycheck.rl._tasks import (
    TASKS,
    Problem,
    addition_reward,
    countdown_reward,
    evaluate_expression,
    make_problems,
)
from theorycheck.rl._tiny import CharTokenizer, tiny_model
from theorycheck.rl._train import Batch, Trainer, take_rows, train

__all__ = [
    "MAX_MINIBATCHES",
    "OPTIMIZERS",
    "TASKS",
    "Batch",
    "CharTokenizer",
    "Problem",
    "Rollouts",
    "TrainConfig",
    "Trainer",
    "addition_reward",
    "collect",
    "countdown_reward",
    "evaluate_expression",
    "left_pad",
    "make_optimizer",
    "make_problems",
    "take_rows",
    "tiny_model",
    "train",
]

"""RL machinery: rollouts, verifiable tasks, GRPO training with a fixed anchor.

``collect`` samples a rollout batch (bfloat16 engine by default) recording the sampled
token, its behavior log-prob, the engine's top-K and optionally the full vocabulary;
``collect_filled`` fills a batch with GRPO groups of mixed rewards across draws (DAPO's
dynamic sampling; ``collect_mixed``: the batch redrawn whole until enough groups mix);
``record``/``from_record`` keep a batch compactly and rebuild it, the anchor recomputed
by ``rescore`` (replay); ``make_problems`` generates verifiable
tasks (Countdown in exact rational arithmetic, addition, capitals);
``Trainer``/``train`` run M minibatch steps per epoch against the fixed anchor with
any registered token rule and reduction; ``Trainer.steps`` is the one training loop
(a ``Step`` record per optimizer step), which ``train`` and the probes iterate.
"""

from theorycheck.rl._config import (
    MAX_MINIBATCHES,
    OPTIMIZERS,
    RolloutConfig,
    TrainConfig,
    make_optimizer,
    train_fields,
)
from theorycheck.rl._dynamic import (
    DRAW_STRIDE,
    collect_filled,
    collect_mixed,
    join_groups,
    mixed_groups,
)
from theorycheck.rl._record import FIELDS, anchor_gap, from_record, record, rescore
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
from theorycheck.rl._train import (
    Batch,
    Step,
    Trainer,
    take_rows,
    token_losses,
    train,
)

__all__ = [
    "DRAW_STRIDE",
    "FIELDS",
    "MAX_MINIBATCHES",
    "OPTIMIZERS",
    "TASKS",
    "Batch",
    "CharTokenizer",
    "Problem",
    "RolloutConfig",
    "Rollouts",
    "Step",
    "TrainConfig",
    "Trainer",
    "addition_reward",
    "anchor_gap",
    "collect",
    "collect_filled",
    "collect_mixed",
    "countdown_reward",
    "evaluate_expression",
    "from_record",
    "join_groups",
    "left_pad",
    "make_optimizer",
    "make_problems",
    "mixed_groups",
    "record",
    "rescore",
    "take_rows",
    "token_losses",
    "tiny_model",
    "train",
    "train_fields",
]

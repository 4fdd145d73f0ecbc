"""The trainer's configuration and its optimizer (one frozen record per run)."""

from __future__ import annotations

import dataclasses

import numpy as np
import optax

from theorycheck._errors import BadInput
from theorycheck.losses import LOSSES, Reduction

#: the optimizers of a run (AdamW with the survey defaults, Adam without momentum, SGD).
OPTIMIZERS = ("adamw", "adam_no_momentum", "sgd")
#: the most minibatch updates M against one rollout anchor.
MAX_MINIBATCHES = 16


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Everything the update depends on (frozen: one record per experiment unit).

    Args:
        loss: a registered token rule (``theorycheck.losses.LOSSES``), e.g. ``"ppo"``.
        loss_params: ``((key, value), ...)`` overrides of the rule's defaults.
        reduction: a reduction mode (``theorycheck.losses.MODES``).
        optimizer: ``"adamw"`` (betas 0.9/0.95, the survey's setting),
            ``"adam_no_momentum"`` (beta1 = 0) or ``"sgd"``.
        lr: learning rate.
        weight_decay: AdamW's decoupled weight decay (0 for the other two).
        minibatches: M, optimizer steps per pass over the batch (1-16).
        epochs: passes over the batch, all against the same anchor μ.
        trainable_blocks: how many of the last blocks train (plus the final norm).
        train_head: also train an untied ``lm_head``.
        grad_clip: global-norm gradient clip (the survey's 1.0).
        mismatch: μ = the rollout engine's log-probs (bfloat16 engine) when True;
            μ = the trainer's own policy at the start when False (exactly on-policy).
    """

    loss: str = "ppo"
    loss_params: tuple[tuple[str, float], ...] = ()
    reduction: str = "token_mean"
    optimizer: str = "adamw"
    lr: float = 1e-5
    weight_decay: float = 0.0
    minibatches: int = 4
    epochs: int = 1
    trainable_blocks: int = 2
    train_head: bool = False
    grad_clip: float = 1.0
    mismatch: bool = True

    def __post_init__(self):
        spec = LOSSES.get(self.loss)
        if spec is None:
            raise BadInput(f"unknown loss {self.loss!r}; valid: {', '.join(LOSSES)}")
        if spec.family != "token":
            raise BadInput(
                f"loss {self.loss!r} is a {spec.family} rule; the trainer takes token "
                "rules"
            )
        for key, _ in self.loss_params:
            if key not in spec.defaults:
                raise BadInput(
                    f"loss {self.loss!r} takes no parameter {key!r}; valid: "
                    f"{', '.join(spec.defaults) or 'none'}"
                )
        Reduction(self.reduction)  # raises BadInput for an unknown mode
        if self.optimizer not in OPTIMIZERS:
            raise BadInput(
                f"unknown optimizer {self.optimizer!r}; valid: {', '.join(OPTIMIZERS)}"
            )
        if not (np.isfinite(self.lr) and self.lr > 0):
            raise BadInput(f"lr = {self.lr} must be a positive number")
        if not 1 <= self.minibatches <= MAX_MINIBATCHES:
            raise BadInput(
                f"minibatches = {self.minibatches} must be in [1, {MAX_MINIBATCHES}]"
            )
        if self.epochs < 1:
            raise BadInput(f"epochs = {self.epochs} must be >= 1")
        if self.grad_clip <= 0:
            raise BadInput(f"grad_clip = {self.grad_clip} must be > 0")


def make_optimizer(config: TrainConfig) -> optax.GradientTransformation:
    """Global-norm clip, then AdamW / Adam without momentum / SGD.

    Args:
        config: the :class:`TrainConfig`.

    Returns:
        An optax ``GradientTransformation``.
    """
    clip = optax.clip_by_global_norm(config.grad_clip)
    if config.optimizer == "adamw":
        opt = optax.adamw(config.lr, b1=0.9, b2=0.95, weight_decay=config.weight_decay)
    elif config.optimizer == "adam_no_momentum":
        opt = optax.adam(config.lr, b1=0.0, b2=0.95)
    else:
        opt = optax.sgd(config.lr)
    return optax.chain(clip, opt)

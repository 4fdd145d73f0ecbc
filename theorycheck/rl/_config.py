"""The trainer's configuration and its optimizer (one frozen record per run)."""

from __future__ import annotations

import dataclasses
import enum

import numpy as np
import optax

from theorycheck._errors import BadInput
from theorycheck.losses import LOSSES, Reduction

#: the optimizers of a run (AdamW with the survey defaults, Adam without momentum, SGD).
OPTIMIZERS = ("adamw", "adam_no_momentum", "sgd")
#: the most minibatch updates M against one rollout anchor.
MAX_MINIBATCHES = 16
#: the dtypes the frozen trunk may be computed in.
TRUNK_DTYPES = ("float32", "float64")


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    r"""Everything the update depends on (frozen: one record per experiment unit).

    Args:
        loss: a registered token rule (``theorycheck.losses.LOSSES``), e.g. ``"ppo"``.
        loss_params: ``((key, value), ...)`` overrides of the rule's defaults.
        reduction: a reduction mode (``theorycheck.losses.MODES``).
        optimizer: ``"adamw"`` (Loshchilov & Hutter, 2019: Adam's moment estimates
            with decoupled weight decay), ``"adam_no_momentum"`` (the same with
            beta1 = 0) or ``"sgd"``.
        lr: learning rate.
        beta1, beta2: Adam's decay rates of the first and second moment estimates
            (default 0.9 / 0.95, the survey's setting; ``adam_no_momentum`` ignores
            ``beta1`` and uses 0).
        eps: Adam's ε in :math:`\hat m / (\sqrt{\hat v} + \varepsilon)`.
        weight_decay: AdamW's decoupled weight decay (0 for the other two).
        minibatches: M, optimizer steps per pass over the batch (1-16).
        epochs: passes over the batch, all against the same anchor μ.
        trainable_blocks: how many of the last blocks train (plus the final norm).
        train_head: also train an untied ``lm_head``.
        grad_clip: global-norm gradient clip (the survey's 1.0).
        mismatch: μ = the rollout engine's log-probs (bfloat16 engine) when True;
            μ = the trainer's own policy at the start when False (exactly on-policy).
        trunk_dtype: the dtype the frozen trunk's residual stream is computed in
            (``"float32"``, the model's own, or ``"float64"``: rounding ~1e-16
            instead of ~1e-7, so what a CPU's summation order moves in the top's
            inputs is 1e-16 relative; about twice the trunk's cost).
    """

    loss: str = "ppo"
    loss_params: tuple[tuple[str, float], ...] = ()
    reduction: str = "token_mean"
    optimizer: str = "adamw"
    lr: float = 1e-5
    beta1: float = 0.9
    beta2: float = 0.95
    eps: float = 1e-8
    weight_decay: float = 0.0
    minibatches: int = 4
    epochs: int = 1
    trainable_blocks: int = 2
    train_head: bool = False
    grad_clip: float = 1.0
    mismatch: bool = True
    trunk_dtype: str = "float32"

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
        if self.trunk_dtype not in TRUNK_DTYPES:
            raise BadInput(
                f"trunk_dtype = {self.trunk_dtype!r}; valid: {', '.join(TRUNK_DTYPES)}"
            )
        _check_optimizer(self)

    @property
    def regime(self) -> str:
        """``"bf16_engine"`` (μ = a bfloat16 engine's log-probs) or ``"on_policy"``
        (μ = the trainer's own policy at the start: the first minibatch has π = μ)."""
        return "bf16_engine" if self.mismatch else "on_policy"


def _check_optimizer(c: TrainConfig) -> None:
    """Bad optimizer settings raise :class:`BadInput` naming the value."""
    if not c.grad_clip > 0:
        raise BadInput(f"grad_clip = {c.grad_clip} must be > 0")
    for name in ("beta1", "beta2"):
        if not 0 <= getattr(c, name) < 1:
            raise BadInput(f"{name} = {getattr(c, name)} must be in [0, 1)")
    if not c.eps > 0:
        raise BadInput(f"eps = {c.eps} must be > 0")
    if not c.weight_decay >= 0:
        raise BadInput(f"weight_decay = {c.weight_decay} must be >= 0")


def make_optimizer(config: TrainConfig) -> optax.GradientTransformation:
    """Global-norm clip, then AdamW / Adam without momentum / SGD.

    Args:
        config: the :class:`TrainConfig`.

    Returns:
        An optax ``GradientTransformation``.
    """
    clip = optax.clip_by_global_norm(config.grad_clip)
    c = config
    if c.optimizer == "adamw":
        opt = optax.adamw(
            c.lr, b1=c.beta1, b2=c.beta2, eps=c.eps, weight_decay=c.weight_decay
        )
    elif c.optimizer == "adam_no_momentum":
        opt = optax.adam(c.lr, b1=0.0, b2=c.beta2, eps=c.eps)
    else:
        opt = optax.sgd(config.lr)
    return optax.chain(clip, opt)


class Arithmetic(enum.StrEnum):
    """How the trainer's anchor is rescored (:func:`theorycheck.rl.rescore`): exactly
    rounded, or XLA's engine-dtype pass."""

    EXACT = "exact"
    XLA = "xla"


#: the arithmetics' names, in order (what a config's ``anchor_arithmetic`` holds)
_NAMES = tuple(a.value for a in Arithmetic)


@dataclasses.dataclass(frozen=True)
class RolloutConfig:
    """The rollout settings of an experiment: the model, the verifiable task, the
    batch per seed (``prompts`` GRPO groups × ``samples`` responses × ``new_tokens``),
    the engine's top-K and temperature, and the seeds ``first_seed ...
    first_seed + seeds - 1`` (independent prompts and rollouts per seed)."""

    model: str = "smollm2"
    task: str = "addition"
    prompts: int = 2
    samples: int = 8
    new_tokens: int = 8
    topk: int = 20
    temperature: float = 1.0
    seeds: int = 5
    first_seed: int = 0
    anchor_arithmetic: str = "exact"

    def __post_init__(self):
        for name in ("prompts", "samples", "new_tokens", "topk", "seeds"):
            if getattr(self, name) < 1:
                raise BadInput(f"{name} = {getattr(self, name)} must be >= 1")
        if not (np.isfinite(self.temperature) and self.temperature > 0):
            raise BadInput(f"temperature = {self.temperature} must be > 0")
        if self.anchor_arithmetic not in _NAMES:
            raise BadInput(
                f"anchor_arithmetic = {self.anchor_arithmetic!r} must be one of "
                f"{', '.join(_NAMES)}"
            )

    def seed_list(self) -> list[int]:
        """The seeds of the run."""
        return list(range(self.first_seed, self.first_seed + self.seeds))


def train_fields(config) -> dict:
    """The :class:`TrainConfig` fields of ``config`` (an experiment config that
    extends it), as keyword arguments."""
    return {f.name: getattr(config, f.name) for f in dataclasses.fields(TrainConfig)}

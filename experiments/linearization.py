r"""NTK-linearization residuals of real RL updates (LCO Assumption 4.2, measured).

For every seed: fresh verifiable prompts and independent rollouts (bfloat16 engine),
then for every loss and trainable subset a run of M minibatch steps against the fixed
anchor (AdamW, survey betas, clip 1; LCO losses against the fixed target
:math:`z^* = z_{old} + \hat A/\beta`). For the real update after 1 step and after M
steps, :math:`\Delta\theta_m = \theta_m - \theta_0`, and for scaled updates
:math:`\alpha\Delta\theta_m` on a log-spaced α grid, the per-token relative residual

.. math::
    \rho_t(\alpha) = \lVert z_t(\theta_0 + \alpha\Delta\theta_m) - z_t(\theta_0)
    - \alpha (J\Delta\theta_m)_t\rVert / \lVert z_t(\theta_0+\alpha\Delta\theta_m)
    - z_t(\theta_0)\rVert

(one ``jax.jvp``, evaluated in float64) and the first-order prediction errors of
Δlog π_k, ΔD(μ‖π) and Δloss; the α at which the median residual exceeds 10% and 50%.

Run ``python -m experiments.linearization`` (SmolLM2-135M) or ``--tiny``;
``--replay DIR`` recomputes every unit from DIR/rollouts.npz. Outputs in ``--out``:
results.json (resumable), rollouts.npz, timings.json, report.md, PNG figures.
"""

from __future__ import annotations

import dataclasses

from experiments import _linearization_report as report  # noqa: F401  (the runner's)
from experiments import runner

LEVELS = (0.1, 0.5)


@dataclasses.dataclass(frozen=True)
class Config(runner.RolloutConfig):
    """The experiment's settings (each is a ``--flag``; ``--tiny`` changes several).

    ``losses`` and ``subsets`` are comma-separated; a subset is a number of trainable
    last blocks or ``all`` (every block and the final norm; the tied embedding/head
    stays frozen). ``rewards`` is ``task`` (the verifier's) or ``coin`` (a fair coin
    per response drawn from the seed: a control for a model that solves nothing, as
    the random tiny model).
    """

    rewards: str = "task"
    losses: str = "lco_mse,ppo"
    subsets: str = "2"
    optimizer: str = "adamw"
    lr: float = 1e-5
    minibatches: int = 2
    epochs: int = 2
    alpha_min: float = 1e-2
    alpha_max: float = 1e3
    alpha_count: int = 11
    eval_sequences: int = 8
    out: str = "reports/linearization"

    @classmethod
    def tiny(cls) -> Config:
        """A tiny random model, two seeds (the tests run this)."""
        return cls(
            model="tiny",
            task="addition",
            rewards="coin",
            new_tokens=6,
            topk=5,
            seeds=2,
            lr=1e-3,
            subsets="1,all",
            alpha_count=6,
            out="reports/linearization_tiny",
        )


def alphas(cfg: Config):
    """The log-spaced α grid."""
    import numpy as np

    from theorycheck._errors import BadInput

    if not (0 < cfg.alpha_min < cfg.alpha_max) or cfg.alpha_count < 2:
        raise BadInput(
            f"alpha grid [{cfg.alpha_min}, {cfg.alpha_max}] x {cfg.alpha_count} "
            "needs 0 < alpha_min < alpha_max and alpha_count >= 2"
        )
    return np.logspace(
        np.log10(cfg.alpha_min), np.log10(cfg.alpha_max), cfg.alpha_count
    )


def _names(text: str, what: str, valid=None) -> list[str]:
    from theorycheck._errors import BadInput

    names = [n.strip() for n in text.split(",") if n.strip()]
    bad = [n for n in names if valid is not None and n not in valid]
    if not names or bad:
        raise BadInput(f"{what} = {text!r}: bad entries {bad}")
    return names


def trainer_dtype(blocks: int, vocab: int):
    """The trainer's precision: float64, except float32 for more than 4 trainable
    blocks of a real-vocabulary model (the whole network of SmolLM2 in float64
    needs several GB more and twice the time)."""
    import jax.numpy as jnp

    return jnp.float32 if blocks > 4 and vocab > 1000 else jnp.float64


def _blocks(subset: str, num_layers: int) -> int:
    from theorycheck._errors import BadInput

    if subset == "all":
        return num_layers
    if not subset.isdigit() or not 1 <= int(subset) <= num_layers:
        raise BadInput(f"subset {subset!r} must be 'all' or 1..{num_layers}")
    return int(subset)


def linearization_unit(
    cfg: Config, model, rollouts, loss: str, subset: str, seed: int
) -> dict:
    """One (loss, subset, seed): train M steps, residual curves after 1 and M steps."""
    import jax.numpy as jnp
    import numpy as np
    import optax

    from theorycheck.models import count_params
    from theorycheck.probes import (
        TokenInputs,
        crossing_alpha,
        linearization_curve,
        objective_fn,
        summarize,
        trainer_apply_fn,
        trainer_view,
        value_and_grad,
    )
    from theorycheck.rl import TrainConfig, Trainer

    blocks = _blocks(subset, model.config.num_layers)
    # the trainer's setup (frozen trunk, anchor, optimizer); the objective is ours
    tc = TrainConfig(
        loss="ppo",
        optimizer=cfg.optimizer,
        lr=cfg.lr,
        minibatches=cfg.minibatches,
        epochs=cfg.epochs,
        trainable_blocks=blocks,
    )
    train_dtype = trainer_dtype(blocks, model.config.vocab_size)
    trainer = Trainer(model, rollouts, tc, seed=seed, dtype=train_dtype)
    apply_fn = trainer_apply_fn(trainer.model_config, trainer.rows)
    loss_fn = objective_fn(loss)
    m_last = trainer.config.epochs * len(trainer.minibatch_rows)
    kept, losses = {}, []

    def grad_fn(theta, _step, rows):  # this objective on the step's minibatch
        return value_and_grad(theta, *trainer_view(trainer, rows), apply_fn, loss_fn)

    for m, st in enumerate(trainer.steps(grad_fn=grad_fn), start=1):
        if m in (1, m_last):
            kept[m] = st.new_trainable
        losses.append(float(st.value))
    n_eval = min(cfg.eval_sequences, trainer.batch.sampled.shape[0])
    view, targets = trainer_view(trainer, np.arange(n_eval), dtype=jnp.float64)
    to64 = lambda t: optax.tree.cast(t, jnp.float64)  # noqa: E731
    theta0 = trainer.trainable0
    tokens = TokenInputs(
        mask=targets.weight > 0,
        sampled=targets.sampled,
        behavior_logp=targets.behavior_logp,
    )
    grid = alphas(cfg)
    out = {
        "loss": loss,
        "subset": subset,
        "trainable_blocks": blocks,
        "trainable_params": count_params(theta0),
        "train_dtype": str(jnp.dtype(train_dtype)),
        "eval_dtype": "float64",
        "eval_sequences": n_eval,
        "train_losses": losses,
        "zero_advantage_groups": trainer.zero_groups,
        "groups": trainer.groups,
        "steps": {},
    }
    for m in sorted(kept):
        delta = to64(optax.tree.sub(kept.pop(m), theta0))
        curve = linearization_curve(
            apply_fn,
            to64(theta0),
            delta,
            view,
            tokens,
            alphas=grid,
            loss_fn=lambda z: loss_fn(z, targets)[0],
        )
        s = summarize(curve)
        s["update_norm"] = float(optax.tree.norm(delta))
        s["thresholds"] = {
            stat: {str(level): crossing_alpha(grid, s[stat], level) for level in LEVELS}
            for stat in ("residual_median", "residual_aggregate")
        }
        out["steps"][str(m)] = s
    return out


def units(cfg: Config) -> list[runner.Unit]:
    """(loss, subset, seed) units, seed-major, every one on the bfloat16 engine's
    rollouts of its seed (regime ``bf16_engine``)."""
    from theorycheck.losses import LOSSES

    losses = _names(cfg.losses, "losses", LOSSES)
    subsets = _names(cfg.subsets, "subsets")
    alphas(cfg)
    return [
        runner.Unit(f"{loss}/{sub}/seed{s}", s, "bfloat16", (loss, sub))
        for s in cfg.seed_list()
        for sub in subsets
        for loss in losses
    ]


def generate(ctx: runner.Context, seed: int, engine: str):
    """One seed's rollouts (``rewards = coin``: fair coins drawn from the seed)."""
    return rollouts_for(ctx.cfg, ctx.model, seed), {}


def run_unit(ctx: runner.Context, cfg: Config, unit: runner.Unit) -> dict:
    """One unit from its seed's recorded rollouts."""
    loss, sub = unit.spec
    rollouts, _ = ctx.rollouts(unit.seed, unit.engine)
    out = linearization_unit(cfg, ctx.model, rollouts, loss, sub, unit.seed)
    out.update(
        variant=f"{loss}/{sub}",
        seed=unit.seed,
        regime="bf16_engine",
        reward_mean=float(rollouts.reward.mean()),
    )
    return out


def main(argv=None) -> int:
    """Runs the experiment; returns the exit code (2 on bad input)."""
    import sys

    return runner.main(sys.modules[__name__], argv)


def rollouts_for(cfg, model, seed: int):
    """Rollouts of one seed (bfloat16 engine; the anchor is rescored from the record,
    ``theorycheck.rl.from_record``); ``rewards = coin`` replaces the verifier's
    rewards by fair coins drawn from the seed."""
    import numpy as np

    from theorycheck._errors import BadInput
    from theorycheck.rl import collect, make_problems

    if cfg.rewards not in ("task", "coin"):
        raise BadInput(f"rewards = {cfg.rewards!r} must be 'task' or 'coin'")
    problems = make_problems(cfg.task, cfg.prompts, seed=seed)
    out = collect(
        model,
        problems,
        samples=cfg.samples,
        new_tokens=cfg.new_tokens,
        topk=cfg.topk,
        temperature=cfg.temperature,
        seed=seed,
        full_vocab=False,
    )
    if cfg.rewards == "coin":
        coin = np.random.default_rng(10_000 + seed).integers(0, 2, out.reward.shape)
        out = out._replace(reward=coin.astype(out.reward.dtype))
    return out


if __name__ == "__main__":
    raise SystemExit(main())

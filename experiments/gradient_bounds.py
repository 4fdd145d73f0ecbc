r"""Gradient-norm bounds, directionality and linear convergence on a real checkpoint.

LCO (arXiv 2603.00963; text NOT FOUND, research notes §2.5: the forms below are
DERIVED/INFERRED and are the spec):

* **Prop. 4.7** (``bounds/*`` units): along an AdamW run of LCO-MSE and of PPO on the
  same rollouts (fixed anchor, M minibatches × E epochs), per step: ‖∇_θL‖,
  σ_max(J) of the minibatch's logit Jacobian by power iteration on JᵀJ (warm-started),
  ‖∇_zL‖, the chain-rule bound σ_max‖∇_zL‖ and its tightness ‖∇_θL‖/(σ_max‖∇_zL‖),
  the loss-based bound :math:`\sigma_{\max}\sqrt{\sum_t w_t^2\kappa\ell_t}` (LCO
  forms), and gradient spikes (> 3 × the run's median).
* **Props. 4.4, 4.8, 4.9** (``fixed/*`` units): LCO-MSE / LCO-LCH against a fixed
  target :math:`z^* = z_{old} + \hat A/\beta` by full-batch gradient descent with
  :math:`\eta = c/\lambda_{\max}`, :math:`\lambda_{\max} = \sigma_{\max}(J)^2 \max_t
  w_t/V` (the Gauss-Newton curvature bound of both losses); the measured per-step
  loss contraction of the real model vs the linearized model's (same η, J frozen at
  θ_0), the worst-case rate the linearized analysis gives (1 − ηλ_min; λ_min(JJᵀ) = 0
  when the logits outnumber the parameters), and Prop. 4.4's inner products
  ⟨∇_θL, θ_k − θ*⟩ vs ⟨∇_zL, z_k − z*⟩ with θ* = the run's last iterate.
* **Prop. 4.4 with a reachable target** (``reach/lco_mse/*`` units,
  :mod:`experiments._reachable`): θ* = θ_0 + s·d over the ``reach_scales`` grid, so
  L(θ*) = 0 exactly; the ratio ⟨∇_θL, θ−θ*⟩/⟨∇_zL, z−z*⟩ (the needed inequality is
  ratio ≥ 1/2) and the linearization residual at θ* per s.

Run ``python -m experiments.gradient_bounds`` (SmolLM2-135M) or ``--tiny``;
``--replay DIR`` recomputes every unit from DIR/rollouts.npz. Outputs in ``--out``:
results.json (resumable), rollouts.npz, timings.json, report.md, PNG figures.
"""

from __future__ import annotations

import dataclasses

from experiments import _gradient_report as report  # noqa: F401  (the runner's)
from experiments import _reachable, runner


@dataclasses.dataclass(frozen=True)
class Config(runner.RolloutConfig):
    """The experiment's settings (each is a ``--flag``; ``--tiny`` changes several)."""

    rewards: str = "task"
    trainable_blocks: int = 2
    losses: str = "lco_mse,ppo"
    optimizer: str = "adamw"
    lr: float = 1e-5
    minibatches: int = 2
    epochs: int = 2
    power_iters_first: int = 15
    power_iters: int = 4
    fixed_losses: str = "lco_mse,lco_lch"
    gd_steps: int = 8
    gd_scale: float = 1.0
    gd_sequences: int = 8
    reach_scales: str = "1e-4,3e-4,1e-3,3e-3,1e-2,3e-2,1e-1,3e-1,1"
    reach_midpoint: bool = True
    out: str = "reports/gradient_bounds"

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
            trainable_blocks=1,
            lr=1e-3,
            epochs=1,
            power_iters_first=10,
            power_iters=3,
            gd_steps=6,
            reach_scales="1e-4,1e-3,1e-2,1e-1,3e-1,1,3",
            out="reports/gradient_bounds_tiny",
        )


def _trainer(cfg: Config, model, rollouts, seed: int):
    """The trainer (frozen trunk, anchor, optimizer) of ``cfg.trainable_blocks``
    blocks, in :func:`experiments.linearization.trainer_dtype`'s precision."""
    from experiments.linearization import trainer_dtype
    from theorycheck.rl import TrainConfig, Trainer

    tc = TrainConfig(
        loss="ppo",  # the trainer's setup only; the objective is objective_fn(loss)
        optimizer=cfg.optimizer,
        lr=cfg.lr,
        minibatches=cfg.minibatches,
        epochs=cfg.epochs,
        trainable_blocks=cfg.trainable_blocks,
    )
    dtype = trainer_dtype(cfg.trainable_blocks, model.config.vocab_size)
    return Trainer(model, rollouts, tc, seed=seed, dtype=dtype)


def check_blocks(cfg: Config, model) -> None:
    """``trainable_blocks`` within the model's depth (bad input otherwise)."""
    from theorycheck._errors import BadInput

    layers = model.config.num_layers
    if not 1 <= cfg.trainable_blocks <= layers:
        raise BadInput(
            f"trainable_blocks = {cfg.trainable_blocks} must be in 1..{layers} "
            f"({cfg.model} has {layers} blocks; {layers} trains the whole network)"
        )


def bounds_unit(cfg: Config, model, rollouts, loss: str, seed: int) -> dict:
    """Prop. 4.7 along an AdamW run of ``loss``: one record per optimizer step."""
    import jax.numpy as jnp
    import jax.random as jr
    import numpy as np
    import optax

    from theorycheck._errors import BadInput
    from theorycheck.probes import (
        gradient_terms_fn,
        kappa,
        objective_fn,
        power_iteration_fn,
        spikes,
        trainer_apply_fn,
        trainer_view,
    )

    trainer = _trainer(cfg, model, rollouts, seed)
    vocab = trainer.model_config.vocab_size
    apply_fn = trainer_apply_fn(trainer.model_config, trainer.rows)
    terms = gradient_terms_fn(apply_fn, objective_fn(loss))
    first = power_iteration_fn(apply_fn, cfg.power_iters_first)
    warm = power_iteration_fn(apply_fn, cfg.power_iters)
    views = [trainer_view(trainer, rows) for rows in trainer.minibatch_rows]
    try:
        k = kappa(loss, vocab)
    except BadInput:  # no loss-based bound for this rule (PPO and token rules)
        k = None
    vectors: dict = {}
    steps = []

    def grad_fn(theta, j, _rows):  # this objective's terms; the gradient drives
        t = terms(theta, *views[j])
        return t, t["grad"]

    for st in trainer.steps(grad_fn=grad_fn):  # the trainer's one loop
        epoch, j, theta, t = st.epoch, st.step, st.trainable, st.value
        view, tg = views[j]
        mask = tg.weight > 0
        if j in vectors:
            sigma, hist, vectors[j] = warm(theta, view, mask, vectors[j])
        else:
            v0 = optax.tree.random_like(jr.key(1000 * seed + j), theta)
            sigma, hist, vectors[j] = first(theta, view, mask, v0)
        sigma = float(sigma)
        bound = sigma * float(t["logit_grad_norm"])
        rec = {
            "epoch": epoch,
            "minibatch": j,
            "loss": float(t["loss"]),
            "grad_norm": float(t["grad_norm"]),
            "logit_grad_norm": float(t["logit_grad_norm"]),
            "sigma_max": sigma,
            "sigma_rel_change": float(hist[-1] / hist[-2] - 1)
            if len(hist) > 1
            else None,
            "bound": bound,
            "tightness": float(t["grad_norm"]) / bound if bound > 0 else None,
        }
        if k is not None:
            w2l = jnp.sum(tg.weight**2 * jnp.maximum(t["token_losses"], 0.0))
            rec["loss_bound"] = sigma * float(jnp.sqrt(k * w2l))
        steps.append(rec)
    norms = [s["grad_norm"] for s in steps]
    return {
        "loss": loss,
        "kappa": k,
        "steps": steps,
        "spikes": spikes(norms),
        "sigma_growth": steps[-1]["sigma_max"] / steps[0]["sigma_max"],
        "tightness_mean": float(np.mean([s["tightness"] or np.nan for s in steps])),
        "bound_violations": sum(
            s["grad_norm"] > s["bound"] * (1 + 1e-6) for s in steps
        ),
        "loss_bound_violations": sum(
            s["grad_norm"] > s.get("loss_bound", np.inf) * (1 + 1e-6) for s in steps
        ),
        "zero_advantage_groups": trainer.zero_groups,
        "groups": trainer.groups,
    }


def fixed_unit(cfg: Config, model, rollouts, loss: str, seed: int) -> dict:
    """Props. 4.4/4.8/4.9: GD on a fixed LCO target, real vs linearized model."""
    import jax.numpy as jnp
    import numpy as np
    import optax

    from theorycheck.models import count_params
    from theorycheck.probes import (
        contraction_rate,
        directionality_fn,
        linearized_descent,
        objective_fn,
        sigma_max,
        trainer_apply_fn,
        trainer_view,
        value_and_grad,
    )

    trainer = _trainer(cfg, model, rollouts, seed)
    vocab = trainer.model_config.vocab_size
    apply_fn = trainer_apply_fn(trainer.model_config, trainer.rows)
    loss_fn = objective_fn(loss)
    n = min(cfg.gd_sequences, trainer.batch.sampled.shape[0])
    view, tg = trainer_view(trainer, np.arange(n))
    mask = tg.weight > 0
    theta0 = trainer.trainable0
    sig = sigma_max(
        apply_fn, theta0, view, mask, iters=2 * cfg.power_iters_first, key=jr_key(seed)
    )
    lam_max = sig.value**2 * float(jnp.max(tg.weight)) / vocab
    eta = cfg.gd_scale / lam_max

    def trajectory():
        theta = theta0
        for _ in range(cfg.gd_steps):
            yield theta
            _, g = value_and_grad(theta, view, tg, apply_fn, loss_fn)
            theta = optax.tree.add_scale(theta, -eta, g)
        yield theta

    real = []
    for theta in trajectory():
        real.append(float(loss_fn(apply_fn(theta, view), tg)[0]))
    star = theta
    lin = linearized_descent(
        apply_fn, loss_fn, theta0, view, tg, eta=eta, steps=cfg.gd_steps
    )
    direction = directionality_fn(apply_fn, loss_fn)
    inner = []
    for k, theta in enumerate(trajectory()):
        if k == cfg.gd_steps:
            break
        d = direction(theta, star, view, tg)
        inner.append({key: float(v) for key, v in d.items()})
    outputs = int(mask.sum()) * vocab
    params = count_params(theta0)
    eps = real[-1]  # L* = 0 (the target is exact in z): ε = L(θ*) − L*
    pi = np.array([r["param_inner"] for r in inner])
    li = np.array([r["logit_inner"] for r in inner])
    gap = np.array([r["loss"] - r["loss_star"] for r in inner])
    return {
        "loss": loss,
        "eta": eta,
        "sigma_max": sig.value,
        "sigma_rel_change": float(sig.history[-1] / sig.history[-2] - 1),
        "lambda_max": lam_max,
        "outputs": outputs,
        "params": params,
        "lambda_min_zero": outputs > params,
        "worst_case_loss_rate": 1.0 if outputs > params else None,
        "real_losses": real,
        "linearized_losses": lin.tolist(),
        "real_rate": contraction_rate(real),
        "linearized_rate": contraction_rate(lin),
        "epsilon": eps,
        "inner": inner,
        "param_inner_negative": int(np.sum(pi < 0)),
        "logit_inner_negative": int(np.sum(li < 0)),
        "needed_inequality_fails": int(np.sum(pi < gap)),
        "within_epsilon_slack": int(np.sum((pi < 0) & (pi >= -eps))),
        "assumption_error_rel": float(
            np.median(np.abs(pi - li) / np.maximum(np.abs(li), 1e-300))
        ),
        "zero_advantage_groups": trainer.zero_groups,
    }


def reach_unit(cfg: Config, model, rollouts, loss: str, seed: int) -> dict:
    """Prop. 4.4 against reachable targets θ_0 + s·d (:mod:`experiments._reachable`)."""
    return _reachable.reach_unit(cfg, _trainer(cfg, model, rollouts, seed), seed)


def jr_key(seed: int):
    """The PRNG key of the power iteration's random start."""
    import jax.random as jr

    return jr.key(7919 + seed)


def _check(cfg: Config) -> tuple[list[str], list[str], list[float]]:
    from theorycheck._errors import BadInput
    from theorycheck.losses import LOSSES

    def names(text, what):
        out = [n.strip() for n in text.split(",") if n.strip()]
        bad = [n for n in out if n not in LOSSES]
        if bad:
            raise BadInput(f"{what}: unknown loss(es) {bad}")
        return out

    fixed = names(cfg.fixed_losses, "fixed_losses")
    bad = [n for n in fixed if n not in ("lco_mse", "lco_lch")]
    if bad:
        raise BadInput(f"fixed_losses {bad}: only lco_mse and lco_lch (Props 4.8/4.9)")
    if cfg.seeds < 1 or cfg.gd_steps < 1 or cfg.power_iters < 2:
        raise BadInput("seeds, gd_steps must be >= 1 and power_iters >= 2")
    if cfg.gd_scale <= 0:
        raise BadInput(f"gd_scale = {cfg.gd_scale} must be > 0")
    losses, scales = (
        names(cfg.losses, "losses"),
        _reachable.parse_scales(cfg.reach_scales),
    )
    if not (losses or fixed or scales):
        raise BadInput("losses, fixed_losses and reach_scales are all empty: no units")
    return losses, fixed, scales


def units(cfg: Config) -> list[runner.Unit]:
    """bounds/fixed/reach units, seed-major (a stopped run covers every kind), each
    on the bfloat16 engine's rollouts of its seed (regime ``bf16_engine``)."""
    losses, fixed, scales = _check(cfg)
    out = []
    for s in cfg.seed_list():
        kinds = [("bounds", n) for n in losses] + [("fixed", n) for n in fixed]
        kinds += [("reach", _reachable.LOSS)] if scales else []
        out += [
            runner.Unit(f"{k}/{n}/seed{s}", s, "bfloat16", (k, n)) for k, n in kinds
        ]
    return out


def generate(ctx: runner.Context, seed: int, engine: str):
    """One seed's rollouts (those of ``experiments.linearization``)."""
    from experiments.linearization import rollouts_for

    return rollouts_for(ctx.cfg, ctx.model, seed), {}


def run_unit(ctx: runner.Context, cfg: Config, unit: runner.Unit) -> dict:
    """One unit from its seed's recorded rollouts."""
    import numpy as np

    from experiments.linearization import trainer_dtype

    kind, name = unit.spec
    check_blocks(cfg, ctx.model)  # before any rollout is generated
    rollouts, _ = ctx.rollouts(unit.seed, unit.engine)
    run = {"bounds": bounds_unit, "fixed": fixed_unit, "reach": reach_unit}[kind]
    out = run(cfg, ctx.model, rollouts, name, unit.seed)
    dtype = trainer_dtype(cfg.trainable_blocks, ctx.model.config.vocab_size)
    out.update(
        variant=f"{kind}/{name}",
        seed=unit.seed,
        regime="bf16_engine",
        train_dtype=str(np.dtype(dtype)),
        reward_mean=float(rollouts.reward.mean()),
    )
    return out


def main(argv=None) -> int:
    """Runs the experiment; returns the exit code (2 on bad input)."""
    import sys

    return runner.main(sys.modules[__name__], argv)


if __name__ == "__main__":
    raise SystemExit(main())

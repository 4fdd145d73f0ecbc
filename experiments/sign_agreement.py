"""Sign agreement of first-order ΔD predictions with real multi-step updates.

For every seed: fresh verifiable prompts and independent rollouts (bfloat16 engine,
plus a float32 engine for the on-policy control), then for every variant of the sweep
a GRPO run against the fixed anchor μ (M minibatch steps per epoch, E epochs) with
``theorycheck.probes.run_probe`` recording, per token, the ratio criterion, the tabular
Ḋ (exact and top-K), the NTK-coupled first and second order change from one JVP of the
real update, the realized change, and the three masks' own updates. Results: mean ±
standard error over seeds, next to the base rate of "D rises".

Run ``python -m experiments.sign_agreement`` (SmolLM2-135M, the default grid) or
``--tiny`` (a tiny random model built in code). Outputs in ``--out``: results.json
(resumable: a killed run restarted continues and ends with the same JSON),
timings.json, report.md and PNG figures.
"""

from __future__ import annotations

import dataclasses
import os
import time

from experiments import _common

#: the default grid (what fits 30 minutes on a shared 2-core CPU with 5 seeds) and the
#: one-setting-at-a-time sweep around it (``--grid sweep``).
DEFAULT_GRID = ("base", "epochs_2", "no_mismatch")
SWEEP_GRID = (
    "lr_x0.1",
    "lr_x10",
    "minibatches_2",
    "minibatches_8",
    "blocks_1",
    "blocks_4",
    "adam_no_momentum",
    "sgd",
)
VARIANT_NAMES = (
    "base",
    "lr_x0.1",
    "lr_x10",
    "minibatches_2",
    "minibatches_8",
    "blocks_1",
    "blocks_4",
    "epochs_2",
    "adam_no_momentum",
    "sgd",
    "no_mismatch",
)


#: the trainable top's dtype per ``--precision`` (float64 on CPU; float32 is the
#: accelerator policy, docs/benchmarks.md).
PRECISIONS = {"float64": "float64", "float32": "float32"}

#: 2: ``by_step`` pools each step with its own realized change (version 1 compared
#: every step with the first step's change; its ``by_step`` entries are not used).
ANALYSIS_VERSION = 2


@dataclasses.dataclass(frozen=True)
class Config(_common.RolloutConfig):
    """The experiment's settings (each is a ``--flag``; ``--tiny`` changes several).

    ``grid`` is ``"default"`` (:data:`DEFAULT_GRID`), ``"sweep"``
    (:data:`SWEEP_GRID`), ``"all"`` or a comma-separated subset of
    :data:`VARIANT_NAMES`; each variant changes one setting of the base run. ``masks``
    names the variants whose steps also evaluate the three masks' own updates
    (comma-separated, ``"all"`` or ``"none"``). ``redraws``: dynamic sampling as in
    DAPO (Yu et al., 2025, §3.2): a seed whose prompts give no GRPO group with mixed
    rewards (every advantage 0, so nothing would be updated) draws new prompts, up to
    ``redraws`` times; the draws taken are recorded per unit. ``precision``: the
    dtype of the trainable top and of every probe pass (:data:`PRECISIONS`;
    docs/benchmarks.md, "precision policy").
    """

    task: str = "countdown"
    redraws: int = 4
    loss: str = "ppo"
    reduction: str = "token_mean"
    optimizer: str = "adamw"
    lr: float = 1e-5
    sgd_lr: float = 1e-2
    minibatches: int = 4
    epochs: int = 1
    trainable_blocks: int = 2
    mismatch: bool = True
    delta: float = 0.0
    masks: str = "base"
    grid: str = "default"
    devices: int = 1
    precision: str = "float64"
    out: str = "reports/sign_agreement"

    @classmethod
    def tiny(cls) -> Config:
        """A tiny random model, two seeds, four variants (the tests run this)."""
        return cls(
            model="tiny",
            task="addition",
            prompts=4,
            samples=4,
            new_tokens=6,
            topk=5,
            seeds=2,
            lr=1e-3,
            sgd_lr=0.3,
            grid="base,epochs_2,sgd,no_mismatch",
            masks="base,epochs_2",
            out="reports/sign_agreement_tiny",
        )


def variants(cfg: Config) -> dict[str, dict]:
    """The sweep: variant name -> overrides of the base run's train settings."""
    table = {
        "base": {},
        "lr_x0.1": {"lr": cfg.lr / 10},
        "lr_x10": {"lr": cfg.lr * 10},
        "minibatches_2": {"minibatches": 2},
        "minibatches_8": {"minibatches": 8},
        "blocks_1": {"trainable_blocks": 1},
        "blocks_4": {"trainable_blocks": 4},
        "epochs_2": {"epochs": 2},
        "adam_no_momentum": {"optimizer": "adam_no_momentum"},
        "sgd": {"optimizer": "sgd", "lr": cfg.sgd_lr},
        "no_mismatch": {"mismatch": False},
    }
    from theorycheck._errors import BadInput

    named = {"default": DEFAULT_GRID, "sweep": SWEEP_GRID, "all": VARIANT_NAMES}
    names = named.get(cfg.grid) or tuple(cfg.grid.split(","))
    unknown = [n for n in names if n not in table]
    if unknown:
        raise BadInput(f"unknown variant(s) {unknown}; valid: {', '.join(table)}")
    masks = named.get(cfg.masks) or (
        () if cfg.masks == "none" else cfg.masks.split(",")
    )
    unknown = [n for n in masks if n not in table]
    if unknown:
        raise BadInput(f"unknown mask variant(s) {unknown}; valid: {', '.join(table)}")
    return {n: table[n] for n in names}


def mask_variants(cfg: Config) -> set[str]:
    """The variants whose steps evaluate the masks."""
    if cfg.masks == "all":
        return set(VARIANT_NAMES)
    return set() if cfg.masks == "none" else set(cfg.masks.split(","))


def train_config(cfg: Config, overrides: dict):
    """The :class:`theorycheck.rl.TrainConfig` of one variant."""
    from theorycheck.rl import TrainConfig

    base = {
        "loss": cfg.loss,
        "reduction": cfg.reduction,
        "optimizer": cfg.optimizer,
        "lr": cfg.lr,
        "minibatches": cfg.minibatches,
        "epochs": cfg.epochs,
        "trainable_blocks": cfg.trainable_blocks,
        "mismatch": cfg.mismatch,
    }
    return TrainConfig(**{**base, **overrides})


def _load(cfg: Config):
    from theorycheck.models import load_model
    from theorycheck.rl import tiny_model

    return tiny_model() if cfg.model == "tiny" else load_model(cfg.model)


def _rollouts(cfg: Config, model, seed: int, engine: str, known: int | None = None):
    """Rollouts of one seed with dynamic sampling; ``(rollouts, draw)``.

    The bfloat16 engine decides the draw (``known``, once found), so both engines score
    the same prompts (:func:`theorycheck.rl.collect_mixed`).
    """
    from theorycheck.rl import collect_mixed

    return collect_mixed(
        model,
        cfg.task,
        cfg.prompts,
        seed=seed,
        redraws=cfg.redraws,
        draw=known,
        engine_dtype=engine,
        samples=cfg.samples,
        new_tokens=cfg.new_tokens,
        topk=cfg.topk,
        temperature=cfg.temperature,
    )


def run_unit(
    cfg: Config,
    model,
    rollouts,
    overrides: dict,
    seed: int,
    sharding,
    masks: bool,
    draw: int = 0,
    trunk: dict | None = None,
):
    """One (variant, seed): train with the probe; the analysis as a JSON-ready dict.

    ``trunk``: a dict shared by the units of one rollout batch (the frozen trunk is
    computed once for them, ``theorycheck.rl.Trainer``)."""
    from theorycheck.probes import analyze_probe, run_probe
    from theorycheck.rl import Trainer

    tc = train_config(cfg, overrides)
    dtype = PRECISIONS[cfg.precision]
    trainer = Trainer(
        model, rollouts, tc, seed=seed, sharding=sharding, trunk=trunk, dtype=dtype
    )
    probe = run_probe(trainer, topk=cfg.topk, delta=cfg.delta, masks=masks)
    out = analyze_probe(probe, delta=cfg.delta)
    out["rollouts"] = {
        "reward_mean": float(rollouts.reward.mean()),
        "zero_advantage_groups": trainer.zero_groups,
        "groups": trainer.groups,
        "tokens": int(rollouts.tokens.size),
        "engine_dtype": rollouts.engine_dtype,
        "prompt_draw": draw,
    }
    out["update_norms"] = probe["update_norms"]
    out["analysis_version"] = ANALYSIS_VERSION
    return out


def main(argv=None) -> int:
    """Runs the experiment; returns the exit code (2 on bad input)."""
    return _common.run_main("sign_agreement", Config, __doc__, argv, _run)


def _run(cfg: Config, *, fresh: bool, report_only: bool = False) -> int:
    import jax

    jax.config.update("jax_enable_x64", True)
    from experiments import _distributed, _sign_report

    grid = variants(cfg)
    if cfg.precision not in PRECISIONS:
        from theorycheck._errors import BadInput

        raise BadInput(
            f"unknown precision {cfg.precision!r}; valid: {', '.join(PRECISIONS)}"
        )
    if cfg.seeds < 1:
        from theorycheck._errors import BadInput

        raise BadInput(f"seeds = {cfg.seeds} must be >= 1")
    seeds = list(range(cfg.first_seed, cfg.first_seed + cfg.seeds))
    store = _common.ResultStore(cfg.out, cfg, fresh=fresh)
    sharding = _common.data_sharding(cfg.devices)
    state: dict = {"model": None}
    # variant-major: every seed of the first variant before the next one, so that an
    # interrupted run has the base variant over all seeds first
    units = [(s, n) for n in grid for s in seeds]
    cache: dict = {}
    trunks: dict = {}

    def compute(unit: str):
        name, seed = unit.split("/seed")
        seed = int(seed)
        t0 = time.perf_counter()
        if state["model"] is None:
            _common.log(f"loading {cfg.model}")
            state["model"] = _load(cfg)
        model = state["model"]
        mismatch = train_config(cfg, grid[name]).mismatch
        engine = "bfloat16" if mismatch else "float32"
        if (seed, engine) not in cache:
            _common.log(f"seed {seed}: rollouts ({engine} engine)")
            known = cache.get((seed, "bfloat16"), (None, None))[1]
            cache[(seed, engine)] = _rollouts(cfg, model, seed, engine, known)
        _common.log(f"{unit}: training with the probe")
        rollouts, draw = cache[(seed, engine)]
        result = run_unit(
            cfg,
            model,
            rollouts,
            grid[name],
            seed,
            sharding,
            name in mask_variants(cfg),
            draw,
            trunk=trunks.setdefault((seed, engine), {}),
        )
        return result, time.perf_counter() - t0

    if not report_only:  # every process computes its share; process 0 saves
        ids = [f"{n}/seed{s}" for s, n in units]
        _distributed.run_units(ids, store, compute, progress="sign agreement")
    summary = _sign_report.summarize(store.data["units"], list(grid), seeds)
    missing = [f"{n}/seed{s}" for s, n in units if not store.done(f"{n}/seed{s}")]
    data = store.finish(
        provenance=_common.provenance(cfg, seeds=seeds),
        variants={n: grid[n] for n in grid},
        summary=summary,
        missing_units=missing,
    )
    if store.writer:  # process 0 alone writes the report and figures
        _sign_report.write(cfg.out, data, store.timings)
        print(os.path.join(cfg.out, "report.md"))
    return 0


def section(out_dir: str, quick: bool) -> tuple[str, dict]:
    """The reproduce section: ``(markdown, json)`` of a short run.

    ``quick`` runs the tiny random model; otherwise two seeds of the base variant on
    SmolLM2-135M.
    """
    cfg = Config.tiny() if quick else Config(seeds=2, grid="base")
    cfg = dataclasses.replace(cfg, out=os.path.join(out_dir, "sign_agreement"))
    if main(_argv(cfg)) != 0:
        raise RuntimeError("sign_agreement failed")
    import json

    with open(os.path.join(cfg.out, "results.json")) as fh:
        data = json.load(fh)
    with open(os.path.join(cfg.out, "report.md")) as fh:
        return fh.read(), data


def _argv(cfg: Config) -> list[str]:
    out = []
    for f in dataclasses.fields(cfg):
        out += ["--" + f.name.replace("_", "-"), str(getattr(cfg, f.name))]
    return out


if __name__ == "__main__":
    raise SystemExit(main())

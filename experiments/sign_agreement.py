"""Sign agreement of first-order ΔD predictions with real multi-step updates.

For every seed: fresh verifiable prompts and independent rollouts, then for every
variant a GRPO run against the fixed anchor μ (M minibatch steps per epoch, E epochs)
with ``theorycheck.probes.run_probe`` recording, per token, the ratio criterion, the
tabular Ḋ (exact and top-K), the NTK-coupled first and second order change from one
JVP of the real update, the realized change, and the masks' own updates with their
matched controls. Two regimes side by side: ``bf16_engine`` (μ = a bfloat16 engine's
log-probs; the trainer in float64) and ``on_policy`` (engine = trainer precision, μ =
the trainer's own policy at the start: the first minibatch carries no first-order
signal and is reported apart). Results: mean, standard error and a 95% bootstrap
interval over seeds, next to the base rate of "D rises".

Run ``python -m experiments.sign_agreement`` (SmolLM2-135M, the default grid) or
``--tiny`` (a tiny random model built in code); ``--replay DIR`` recomputes every unit
of DIR from its recorded rollouts. Outputs in ``--out``: results.json (resumable: a
killed run restarted continues and ends with the same units), rollouts.npz (the
recorded batches), timings.json, report.md and PNG figures.
"""

from __future__ import annotations

import dataclasses

from experiments import _sign_report as report  # noqa: F401  (the runner's)
from experiments import runner
from theorycheck._errors import BadInput
from theorycheck.rl import TrainConfig

#: the default grid: one variant per regime, side by side.
DEFAULT_GRID = ("base", "on_policy")
#: the one-setting-at-a-time sweep around the base run (``--grid sweep``).
SWEEP_GRID = (
    "lr_x0.1",
    "lr_x10",
    "minibatches_2",
    "minibatches_8",
    "blocks_1",
    "blocks_4",
    "epochs_2",
    "adam_no_momentum",
    "sgd",
)
VARIANT_NAMES = ("base", "on_policy", *SWEEP_GRID)

#: 3: per-unit variant/seed/regime/updated_tokens, signal split, matched controls,
#: §4.2 metric at a stated δ, rescored anchor (version 2 had none of these).
#: 4: ``probed`` (probe_rows, others_rows; ``others`` None when not measured), the
#: matched controls computed in the probe's pass (no ``max_rel_update_norm_gap``).
ANALYSIS_VERSION = 4


@dataclasses.dataclass(frozen=True)
class Config(runner.RolloutConfig, TrainConfig):
    """The experiment's settings: the rollout batch (``RolloutConfig``), the trainer
    (``TrainConfig``: loss, reduction, optimizer and its β1/β2/ε/weight decay/clip,
    lr, M, epochs, trainable blocks, mismatch, the trunk's dtype, here float64) and
    its own (each is a ``--flag``; ``--tiny`` changes several).

    ``grid`` is ``"default"`` (:data:`DEFAULT_GRID`), ``"sweep"``, ``"all"`` or a
    comma-separated subset of :data:`VARIANT_NAMES`; each variant changes one setting
    of the base run. ``masks``: the variants whose steps also evaluate the masks
    (``"grid"`` = all of the grid, ``"none"`` or a comma-separated list).
    ``redraws`` / ``min_mixed``: dynamic sampling as in DAPO (Yu et al., 2025, §3.2,
    :func:`theorycheck.rl.collect_filled`): each engine draws ``prompts`` problems at a
    time, up to ``redraws`` new draws, and keeps the GRPO groups with mixed rewards
    until ``min_mixed`` are kept (default: every group of the batch, so every token
    trains); the draws and the kept groups are recorded per batch.
    ``paper_quantile``: δ of the §4.2 metric is this quantile of D over each unit's
    signal tokens. ``probe_rows`` / ``others_rows``: which rows each step predicts
    (``theorycheck.probes.run_probe``): ``"minibatch"`` (the default) predicts every
    updated token once, at its own step, plus ``others_rows`` off-minibatch rows per
    step; ``"all"`` predicts every row at every step. Every number of the report
    but the off-minibatch (``others``) metrics is the same under both (the updated
    tokens' predictions, their realized changes at every horizon, the masks and the
    controls; ``scale/median_d0`` is over the probed tokens). Why the default: no
    number the report prints reads ``others``, and ``"all"`` spends about
    1 − b/B of the probe pass on it (3/4 at M = 4): the nested JVP over every row
    is the largest matrix-product cost of a unit (``docs/benchmarks.md``). With
    ``others_rows = 0`` ``others`` is not measured (None in the results).
    """

    task: str = "countdown"
    prompts: int = 2
    samples: int = 8
    new_tokens: int = 64
    seeds: int = 20
    redraws: int = 8
    min_mixed: int = 2
    sgd_lr: float = 1e-2
    delta: float = 0.0
    paper_quantile: float = 0.5
    probe_rows: str = "minibatch"
    others_rows: int = 0
    masks: str = "grid"
    grid: str = "default"
    devices: int = 1
    out: str = "reports/sign_agreement"
    #: the frozen trunk in float64 (``TrainConfig.trunk_dtype``): a replay under
    #: other XLA code then agrees to ~1e-10 instead of moving near-zero signs
    trunk_dtype: str = "float64"

    def __post_init__(self):
        runner.RolloutConfig.__post_init__(self)
        TrainConfig.__post_init__(self)
        if not 0 < self.paper_quantile < 1:
            raise BadInput(f"paper_quantile = {self.paper_quantile} must be in (0, 1)")
        if not 1 <= self.min_mixed <= self.prompts:
            raise BadInput(
                f"min_mixed = {self.min_mixed} must be in 1..prompts ({self.prompts})"
            )
        if self.probe_rows not in ("all", "minibatch"):
            raise BadInput(
                f"probe_rows = {self.probe_rows!r} must be 'all' or 'minibatch'"
            )
        rows = self.prompts * self.samples
        most = rows - rows // self.minibatches  # the rows outside one minibatch
        if not 0 <= self.others_rows <= most or (
            self.probe_rows == "all" and self.others_rows
        ):
            raise BadInput(
                f"others_rows = {self.others_rows} must be in 0..{most} (0 with "
                "probe_rows 'all')"
            )

    @classmethod
    def tiny(cls) -> Config:
        """A tiny random model, two seeds, both regimes and SGD (the tests run it)."""
        return cls(
            model="tiny",
            task="addition",
            prompts=4,
            samples=4,
            new_tokens=6,
            topk=5,
            seeds=2,
            redraws=4,
            min_mixed=1,
            lr=1e-3,
            sgd_lr=0.3,
            grid="base,on_policy,sgd",
            masks="base,on_policy",
            out="reports/sign_agreement_tiny",
        )


def variants(cfg: Config) -> dict[str, dict]:
    """The sweep: variant name -> overrides of the base run's train settings."""
    table = {
        "base": {},
        "on_policy": {"mismatch": False},
        "lr_x0.1": {"lr": cfg.lr / 10},
        "lr_x10": {"lr": cfg.lr * 10},
        "minibatches_2": {"minibatches": 2},
        "minibatches_8": {"minibatches": 8},
        "blocks_1": {"trainable_blocks": 1},
        "blocks_4": {"trainable_blocks": 4},
        "epochs_2": {"epochs": 2},
        "adam_no_momentum": {"optimizer": "adam_no_momentum"},
        "sgd": {"optimizer": "sgd", "lr": cfg.sgd_lr},
    }
    named = {"default": DEFAULT_GRID, "sweep": SWEEP_GRID, "all": VARIANT_NAMES}
    names = named.get(cfg.grid) or tuple(cfg.grid.split(","))
    unknown = [n for n in names if n not in table]
    if unknown:
        raise BadInput(f"unknown variant(s) {unknown}; valid: {', '.join(table)}")
    unknown = [n for n in mask_variants(cfg) if n not in table]
    if unknown:
        raise BadInput(f"unknown mask variant(s) {unknown}; valid: {', '.join(table)}")
    return {n: table[n] for n in names}


def mask_variants(cfg: Config) -> set[str]:
    """The variants whose steps evaluate the masks."""
    if cfg.masks == "grid":
        named = {"default": DEFAULT_GRID, "sweep": SWEEP_GRID, "all": VARIANT_NAMES}
        return set(named.get(cfg.grid) or cfg.grid.split(","))
    return set() if cfg.masks == "none" else set(cfg.masks.split(","))


def train_config(cfg: Config, overrides: dict) -> TrainConfig:
    """The :class:`theorycheck.rl.TrainConfig` of one variant."""
    from theorycheck.rl import train_fields

    return TrainConfig(**{**train_fields(cfg), **overrides})


def units(cfg: Config) -> list[runner.Unit]:
    """Seed-major: every variant of a seed before the next seed, so that an
    interrupted run has both regimes side by side for the seeds it finished."""
    grid = variants(cfg)
    return [
        runner.Unit(
            f"{name}/seed{seed}",
            seed,
            "bfloat16" if train_config(cfg, grid[name]).mismatch else "float32",
            name,
        )
        for seed in cfg.seed_list()
        for name in grid
    ]


def generate(ctx: runner.Context, seed: int, engine: str):
    """One seed's rollouts of one engine with dynamic sampling
    (:func:`theorycheck.rl.collect_filled`: each engine's own rewards decide which
    groups it keeps); ``(rollouts, meta)`` with ``draws``, ``kept`` and
    ``mixed_groups``."""
    from theorycheck.rl import collect_filled

    cfg = ctx.cfg
    return collect_filled(
        ctx.model,
        cfg.task,
        cfg.prompts,
        seed=seed,
        redraws=cfg.redraws,
        min_mixed=cfg.min_mixed,
        engine_dtype=engine,
        samples=cfg.samples,
        new_tokens=cfg.new_tokens,
        topk=cfg.topk,
        temperature=cfg.temperature,
        full_vocab=False,
    )


def reads_anchor(result: dict) -> bool:
    """Whether a finished unit read the anchor (a restart that changes only
    ``anchor_arithmetic`` recomputes those): the ``on_policy`` units never do, the
    trainer's own policy at the start is their μ."""
    return result.get("regime") != "on_policy"


def run_unit(ctx: runner.Context, cfg: Config, unit: runner.Unit) -> dict:
    """One (variant, seed): train with the probe; every per-unit number."""
    from theorycheck.probes import analyze_probe, run_probe
    from theorycheck.probes._matched import (
        paper_metric,
        recorded_controls,
        signal_split,
    )
    from theorycheck.rl import Trainer, anchor_gap

    tc = train_config(cfg, variants(cfg)[unit.spec])
    rollouts, meta = ctx.rollouts(unit.seed, unit.engine, anchor=tc.mismatch)
    sharding = runner.data_sharding(cfg.devices)
    trainer = Trainer(
        ctx.model,
        rollouts,
        tc,
        seed=unit.seed,
        sharding=sharding,
        # the variants of a seed that train on the same batch compute the trunk once
        trunk=ctx.batch_cache(unit.seed, unit.engine, tc.mismatch),
    )
    masks = unit.spec in mask_variants(cfg)
    b, mb = trainer.batch.sampled.shape[0], len(trainer.minibatch_rows[0])
    if cfg.others_rows > b - mb:
        raise BadInput(
            f"others_rows = {cfg.others_rows} must be <= {b - mb} (the rows outside "
            "a minibatch)"
        )
    probe = run_probe(
        trainer,
        topk=cfg.topk,
        delta=cfg.delta,
        masks=masks,
        probe_rows=cfg.probe_rows,
        others_rows=cfg.others_rows,
        others_seed=unit.seed,
        controls_seed=unit.seed if masks else None,  # the controls in the same pass
    )
    out = analyze_probe(probe, delta=cfg.delta)
    out["predictors"] = out.pop("metrics")
    if masks:
        out["masks"].update(recorded_controls(probe, delta=cfg.delta))
    out.update(signal_split(probe))
    out["paper_4_2"] = paper_metric(probe, quantile=cfg.paper_quantile)
    out["rollouts"] = {
        "reward_mean": float(rollouts.reward.mean()),
        "zero_advantage_groups": trainer.zero_groups,
        "groups": trainer.groups,
        "tokens": int(rollouts.tokens.size),
        "engine_dtype": rollouts.engine_dtype,
        **meta,
        "anchor_gap": anchor_gap(rollouts),
    }
    out["update_norms"] = probe["update_norms"]
    out["analysis_version"] = ANALYSIS_VERSION
    return {
        "variant": unit.spec,
        "seed": unit.seed,
        "regime": tc.regime,
        "updated_tokens": out["scale"]["updated_tokens"],
        **out,
    }


def main(argv=None) -> int:
    """Runs the experiment; returns the exit code (2 on bad input)."""
    import sys

    return runner.main(sys.modules[__name__], argv)


if __name__ == "__main__":
    raise SystemExit(main())

"""Trust-region quantities of real rollouts: bfloat16 engine against float32 trainer.

For every seed: the capitals prompts sampled by a bfloat16 engine that reports its
top-K log-probs (as vLLM / SGLang do), recomputed by the float32 trainer; per token the
divergences D(μ‖π), the exact directional derivative Ḋ along e_k − π and its three
top-K estimates, the ratio / DPPO / predictive masks (one pass of
``theorycheck.numeric.token_stats``), GRPO advantages from the verifier's rewards and
``theorycheck audit`` of the batch. No optimizer step: this is the precision gap alone
(regime ``bf16_engine`` before any update).

Run ``python -m experiments.rollout_analysis`` (SmolLM2-135M) or ``--tiny``;
``--replay DIR`` recomputes every unit from DIR/rollouts.npz. Outputs in ``--out``:
results.json, rollouts.npz, report.md, PNG figures and, per seed, the batch as
``batch_seed<s>.npz`` (``theorycheck audit`` reads it).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from experiments import _rollout_report as report  # noqa: F401  (the runner's)
from experiments import runner
from theorycheck._errors import BadInput

#: a small verifiable task: the continuation must name the capital.
TASKS = (
    (
        "The capital of France is Paris. The capital of Germany is Berlin. "
        "The capital of Italy is",
        "Rome",
    ),
    (
        "The capital of Spain is Madrid. The capital of Portugal is Lisbon. "
        "The capital of Japan is",
        "Tokyo",
    ),
    (
        "The capital of Egypt is Cairo. The capital of Kenya is Nairobi. "
        "The capital of Russia is",
        "Moscow",
    ),
    (
        "The capital of Canada is Ottawa. The capital of Brazil is Brasilia. "
        "The capital of Greece is",
        "Athens",
    ),
)
#: the Ḋ estimators from the engine's top-K.
ESTIMATORS = ("topk_aggregated", "topk_uniform", "topk_proportional")
MASKS = (
    "mask_ppo",
    "mask_dppo_binary_tv",
    "mask_dppo_topk_kl",
    "mask_pred_kl_full",
    *(f"mask_pred_kl_{est}" for est in ESTIMATORS),
)
DIVERGENCES = ("kl", "tv", "binary_kl", "binary_tv", "topk_kl", "topk_tv")


@dataclasses.dataclass(frozen=True)
class Config(runner.RolloutConfig):
    """The rollout settings (``RolloutConfig``; the prompts are the four capitals
    prompts, ``prompts`` of them) and the DPPO mask thresholds."""

    task: str = "capitals"
    prompts: int = 4
    samples: int = 4
    new_tokens: int = 16
    seeds: int = 1
    delta_kl: float = 0.05
    delta_tv: float = 0.15
    out: str = "reports/rollout_analysis"

    @classmethod
    def tiny(cls) -> Config:
        """A tiny random model, one seed (the tests run this)."""
        return cls(model="tiny", samples=2, new_tokens=4, topk=5)


def units(cfg: Config) -> list[runner.Unit]:
    """One unit per seed."""
    if not 1 <= cfg.prompts <= len(TASKS):
        raise BadInput(f"prompts = {cfg.prompts} must be in [1, {len(TASKS)}]")
    return [runner.Unit(f"seed{s}", s, "bfloat16") for s in cfg.seed_list()]


def generate(ctx: runner.Context, seed: int, engine: str):
    """The capitals prompts sampled by the engine."""
    from theorycheck.rl import Problem, collect

    cfg = ctx.cfg
    problems = [
        Problem("capitals", p, a, lambda text, a=a: float(a in text))
        for p, a in TASKS[: cfg.prompts]
    ]
    rollouts = collect(
        ctx.model,
        problems,
        samples=cfg.samples,
        new_tokens=cfg.new_tokens,
        topk=cfg.topk,
        temperature=cfg.temperature,
        seed=seed,
        engine_dtype=engine,
        full_vocab=False,
    )
    return rollouts, {}


def _trainer_logits(model, rollouts) -> np.ndarray:
    from theorycheck.models import forward

    cfg, params, _ = model
    ids, mask = rollouts.sequences()
    start = rollouts.prompt_ids.shape[1] - 1
    z = forward(params, cfg, ids, attention_mask=mask)
    return np.asarray(z[:, start : start + rollouts.tokens.shape[1]], np.float64)


def _advantages(rollouts) -> np.ndarray:
    from theorycheck.losses import grpo_advantages

    groups = int(rollouts.group.max()) + 1
    adv = grpo_advantages(rollouts.reward, rollouts.group, num_groups=groups).adv
    return np.repeat(np.asarray(adv), rollouts.tokens.shape[1])


def _stats(blogp, logits, tokens, adv, *, topk, delta_kl, delta_tv) -> dict:
    from theorycheck.numeric import MaskConfig, token_stats

    b, n, v = logits.shape
    stats = token_stats(
        blogp.reshape(b * n, v).astype(np.float64),
        logits.reshape(b * n, v),
        tokens.reshape(b * n),
        np.asarray(adv, np.float64),
        config=MaskConfig(topk=topk, delta_kl=delta_kl, delta_tv=delta_tv),
    )
    return {k: np.asarray(x, np.float64) for k, x in stats.items()}


def sign_agreement(stats: dict) -> dict:
    """Share of tokens whose estimated sign(Ḋ) equals the exact one, per estimator
    (tokens with exact Ḋ = 0 carry no sign and are left out); the ratio direction
    sign(r − 1) is the baseline every estimator has to beat."""
    table = {}
    for kind in ("kl", "tv"):
        exact = np.sign(stats[f"ddot_{kind}_full"])
        live = exact != 0
        rows = {"ratio_direction": np.sign(stats["ratio"] - 1.0)}
        rows.update({e: np.sign(stats[f"ddot_{kind}_{e}"]) for e in ESTIMATORS})
        table[kind] = {
            name: {
                "agreement": float(np.mean(sign[live] == exact[live]))
                if live.any()
                else None,
                "tokens": int(live.sum()),
            }
            for name, sign in rows.items()
        }
    return table


def mask_rates(stats: dict, adv) -> dict:
    """Share of nonzero-advantage tokens each mask removes (1 − mean keep)."""
    live = np.asarray(adv) != 0
    if not live.any():
        return {}
    return {name[5:]: float(1.0 - stats[name][live].mean()) for name in MASKS}


def audit_inputs(rollouts, logits, adv) -> dict:
    """The batch as a ``theorycheck audit`` BATCH (p, q, adv, mask, group_id)."""
    shape = rollouts.tokens.shape
    logp = logits - np.logaddexp.reduce(logits, axis=-1, keepdims=True)
    take = lambda a: np.take_along_axis(a, rollouts.tokens[..., None], -1)[..., 0]  # noqa: E731
    return {
        "p": np.exp(take(logp)),
        "q": np.exp(take(rollouts.behavior_logp.astype(np.float64))),
        "adv": np.asarray(adv).reshape(shape)[:, 0],
        "mask": np.ones(shape),
        "group_id": rollouts.group,
    }


def run_unit(ctx: runner.Context, cfg: Config, unit: runner.Unit) -> dict:
    """One seed: every summary number of the rollout batch."""
    from theorycheck.losses import AUDITABLE, audit_batch, validate_batch
    from theorycheck.rl import anchor_gap

    rollouts, _ = ctx.rollouts(unit.seed, unit.engine)
    logits = _trainer_logits(ctx.model, rollouts)
    adv = _advantages(rollouts)
    kw = {"topk": cfg.topk, "delta_kl": cfg.delta_kl, "delta_tv": cfg.delta_tv}
    stats = _stats(rollouts.behavior_logp, logits, rollouts.tokens, adv, **kw)
    tight = {
        "delta_kl": float(np.quantile(stats["topk_kl"], 0.9)),
        "delta_tv": float(np.quantile(stats["binary_tv"], 0.9)),
    }
    tight_stats = _stats(
        rollouts.behavior_logp, logits, rollouts.tokens, adv, topk=cfg.topk, **tight
    )
    batch = audit_inputs(rollouts, logits, adv)
    ctx.savez(f"batch_seed{unit.seed}.npz", **batch)  # process 0 writes it
    ratio_dir = np.sign(adv * (stats["ratio"] - 1.0))
    pred_dir = np.sign(adv * stats["ddot_kl_full"])
    live = (adv != 0) & (pred_dir != 0)
    return {
        "seed": unit.seed,
        "regime": "bf16_engine",
        "variant": "rollouts",
        "tokens": int(stats["ratio"].size),
        "responses": int(rollouts.tokens.shape[0]),
        "reward_mean": float(rollouts.reward.mean()),
        "direction_disagreement": int(np.sum(live & (ratio_dir != pred_dir))),
        "divergences": {
            k: {
                "mean": float(stats[k].mean()),
                "p90": float(np.quantile(stats[k], 0.9)),
                "max": float(stats[k].max()),
            }
            for k in DIVERGENCES
        },
        "sign_agreement": sign_agreement(stats),
        "mask_rates": {
            "paper_delta": mask_rates(stats, adv),
            "tight_delta_p90": mask_rates(tight_stats, adv),
            "tight_deltas": tight,
        },
        "audit": audit_batch(validate_batch(batch), AUDITABLE),
        "anchor_gap": anchor_gap(rollouts),
        "responses_text": [
            {"group": int(g), "reward": float(r), "text": t}
            for g, r, t in zip(rollouts.group, rollouts.reward, rollouts.text)
        ],
    }


def main(argv=None) -> int:
    """Runs the experiment; returns the exit code (2 on bad input)."""
    import sys

    return runner.main(sys.modules[__name__], argv)


if __name__ == "__main__":
    raise SystemExit(main())

"""What a TRL ``GRPOConfig`` computes (huggingface/trl f2cd577, 2026-07-24).

Read from ``trl/trainer/grpo_config.py`` and ``grpo_trainer.py`` (``_compute_loss``,
the vLLM importance-sampling correction, ``num_items_in_batch``).
"""

from __future__ import annotations

import math

from theorycheck._errors import BadInput
from theorycheck.losses._presets import A_TRL, V_TRL
from theorycheck.losses._reductions import Reduction
from theorycheck.losses._resolve_common import (
    entropy_term,
    entry,
    flag,
    kl_term,
    number,
    opsm,
    settle,
    single_version,
)

FRAMEWORK = "trl"
VERSIONS, DEFAULT, version_of = single_version(FRAMEWORK, "f2cd577", V_TRL)


def looks_like(flat) -> bool:
    """GRPOConfig's loss keys."""
    return bool(
        set(flat) & {"loss_type", "epsilon", "beta", "importance_sampling_level"}
    )


#: TRL GRPOConfig keys the resolver reads, with their defaults (grpo_config.py).
DEFAULTS = {
    "loss_type": "dapo",
    "epsilon": 0.2,
    "epsilon_high": None,
    "delta": None,
    "beta": 0.0,
    "importance_sampling_level": "token",
    "num_iterations": 1,
    "steps_per_generation": None,
    "generation_batch_size": None,
    "gradient_accumulation_steps": 1,
    "per_device_train_batch_size": 8,
    "max_completion_length": 512,
    "use_vllm": False,
    "vllm_importance_sampling_correction": True,
    "vllm_importance_sampling_mode": "sequence_mask",
    "vllm_importance_sampling_clip_max": 3.0,
    "vllm_importance_sampling_clip_min": None,
    "off_policy_mask_threshold": None,
    "sapo_temperature_pos": 1.0,
    "sapo_temperature_neg": 1.05,
    "top_entropy_quantile": 1.0,
    "scale_rewards": "group",
    "entropy_coef": 0.0,
}

_RULES = {
    "grpo": "ppo",
    "bnpo": "ppo",
    "dr_grpo": "ppo",
    "dapo": "ppo",
    "luspo": "luspo",
    "cispo": "cispo",
    "sapo": "sapo",
    "vespo": "vespo",
}


def _trl_params(lt, rule, cfg, traps):
    eps = number(cfg, "epsilon")
    eps_high = number(cfg, "epsilon_high")
    delta = number(cfg, "delta")
    if lt == "cispo":
        if eps_high is None:
            traps.append(
                "cispo with epsilon_high unset: the cap falls back to epsilon = "
                f"{eps:g}, every ratio is capped at {eps:g}"
            )
        return rule, {"low": 0.0, "high": eps if eps_high is None else eps_high}
    if rule not in ("ppo", "luspo"):
        return rule, {}
    hi = eps if eps_high is None else eps_high
    params = {"eps_low": eps, "eps_high": hi}
    if lt == "dapo" and eps_high is None:
        traps.append(
            "loss_type 'dapo' names only the reduction: epsilon_high unset means "
            "no clip-higher"
        )
    if rule == "luspo":
        return rule, params
    if cfg["importance_sampling_level"] == "sequence":
        return "gspo", params
    params["log_ratio_clamp"] = math.inf
    if delta is not None and delta >= 1 + hi:
        return "dual_clip", {**params, "kappa": delta}
    if delta is not None:
        traps.append(
            f"delta {delta:g} < 1 + epsilon_high: the two-sided clip is not a "
            "registry rule; modelled without it"
        )
    return rule, params


def _trl_corrections(lt, cfg):
    out = []
    if flag(cfg, "use_vllm") and flag(cfg, "vllm_importance_sampling_correction"):
        mode = str(cfg["vllm_importance_sampling_mode"])
        lvl, _, kind = mode.partition("_")
        if lvl not in ("token", "sequence") or kind not in ("truncate", "mask"):
            raise BadInput(
                f"config key vllm_importance_sampling_mode = {mode!r}: expected "
                "token_/sequence_ + truncate/mask"
            )
        hi = number(cfg, "vllm_importance_sampling_clip_max", positive=True)
        lo = number(cfg, "vllm_importance_sampling_clip_min")
        name = {"truncate": "tis", "mask": "mis"}[kind] + "_" + lvl
        params = {"cap": hi} if kind == "truncate" else {"low": lo or 0.0, "high": hi}
        vespo = lt == "vespo"
        note = "not applied to vespo" if vespo else ""
        out.append(entry(name, params, note, applied=not vespo))
    delta = number(cfg, "off_policy_mask_threshold")
    if delta is not None:
        out.append(opsm(delta))
    return out


def _advantage(cfg):
    scale = str(cfg["scale_rewards"]).lower()
    text = {
        "group": "(R - mean_g) / (std_g + 1e-4) per prompt group",
        "true": "(R - mean_g) / (std_g + 1e-4) per prompt group",
        "batch": "(R - mean_g) / (std over the batch + 1e-4)",
        "none": "R - mean_g (scale_rewards none: Dr. GRPO)",
        "false": "R - mean_g (scale_rewards none: Dr. GRPO)",
    }.get(scale)
    if text is None:
        raise BadInput(f"config key scale_rewards = {scale!r}: group, batch or none")
    return {"estimator": "grpo", "text": text}


def _extra_terms(cfg, lt):
    out = []
    beta = number(cfg, "beta")
    if beta:
        out.append(kl_term(beta, "k3", lt))
    ent = number(cfg, "entropy_coef")
    if ent:
        out.append(entropy_term(ent))
    q = number(cfg, "top_entropy_quantile")
    if q is not None and q < 1:
        out.append(
            f"only the top {q:g} quantile of tokens by entropy carry the policy loss"
        )
    return out


_REDUCTIONS = {
    "grpo": ("seq_mean_token_mean", True, True),
    "sapo": ("seq_mean_token_mean", True, True),
    "bnpo": ("token_mean", False, True),
    "dr_grpo": ("seq_mean_token_sum_norm", True, True),
    "dapo": ("token_mean", False, False),
    "cispo": ("token_mean", False, False),
    "vespo": ("token_mean", False, False),
    "luspo": ("seq_mean_token_sum", True, True),
}


def resolve(flat: dict, version: str) -> dict:
    """Rule, reduction, δ, cap, anchor, correction and traps of a TRL GRPOConfig."""
    cfg = {**DEFAULTS, **{k: v for k, v in flat.items() if k in DEFAULTS}}
    traps = []
    lt = str(cfg["loss_type"])
    if lt not in _RULES:
        raise BadInput(f"config loss_type {lt!r}: unknown to {version}")
    rule, params = _trl_params(lt, _RULES[lt], cfg, traps)
    gas = int(number(cfg, "gradient_accumulation_steps", positive=True))
    spg = number(cfg, "steps_per_generation", positive=True)
    spg = gas if spg is None else int(spg)
    if lt in ("dapo", "cispo", "vespo") and spg != gas:
        traps.append(
            f"steps_per_generation ({spg}) != gradient_accumulation_steps ({gas}): "
            f"the {lt} normaliser counts the tokens of all {spg} micro-steps while "
            f"the optimizer steps every {gas}: not a global token mean per step"
        )
    mode, count_empty, per_micro = _REDUCTIONS[lt]
    max_len = (
        int(number(cfg, "max_completion_length", positive=True))
        if lt == "dr_grpo"
        else None
    )
    vllm = (
        "; vLLM sampling log-prob through the IS correction"
        if flag(cfg, "use_vllm")
        else ""
    )
    read = sorted(k for k in flat if k in DEFAULTS)
    return {
        "rule": rule,
        "loss_mode": lt,
        "params": params,
        "reduction_name": lt,
        "reduction": Reduction(mode, count_empty=count_empty, max_len=max_len),
        "per_micro_batch": per_micro,
        "delta": number(cfg, "delta"),
        "cap": params.get("high") if rule == "cispo" else None,
        "anchor": A_TRL + vllm,
        "advantage": _advantage(cfg),
        "corrections": _trl_corrections(lt, cfg),
        "extra_terms": _extra_terms(cfg, lt),
        "fails_at_startup": [],
        "traps": traps,
        "read": read,
        "skipped": settle(flat, read, _WHY, "unknown to GRPOConfig"),
        "unknown_keys": sorted(
            k for k in flat if k not in DEFAULTS and k not in OTHER_KEYS
        ),
    }


#: other GRPOConfig / TrainingArguments keys TRL accepts (grpo_config.py at f2cd577 and
#: transformers TrainingArguments); the resolver does not interpret them.
OTHER_KEYS = (
    "output_dir learning_rate num_train_epochs max_steps logging_steps save_steps "
    "bf16 fp16 seed report_to lr_scheduler_type warmup_ratio warmup_steps "
    "weight_decay max_grad_norm gradient_checkpointing per_device_eval_batch_size "
    "model_init_kwargs disable_dropout num_generations num_generations_eval "
    "max_prompt_length temperature top_p top_k min_p repetition_penalty "
    "generation_kwargs vllm_mode vllm_gpu_memory_utilization vllm_tensor_parallel_size "
    "scale_rewards reward_weights mask_truncated_completions sync_ref_model "
    "ref_model_mixup_alpha ref_model_sync_steps use_bias_correction_kl "
    "vespo_k_pos vespo_lambda_pos vespo_k_neg vespo_lambda_neg log_completions "
    "shuffle_dataset remove_unused_columns vllm_importance_sampling_cap"
).split()


#: why the other known keys are not interpreted.
_WHY = tuple(
    (k, "training schedule, generation or logging: not the per-token loss")
    for k in OTHER_KEYS
)

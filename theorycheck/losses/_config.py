"""What a trainer configuration computes: ``theorycheck conventions --config FILE``.

Reads a verl configuration (Hydra/OmegaConf YAML, with ``key=value`` overrides as on a
verl command line) or a TRL ``GRPOConfig`` (YAML or JSON), fills in the trainer's
defaults for the keys it reads, and says which registry rule, reduction, δ, cap, anchor
and off-policy correction the run computes, for a named trainer version, with the traps
found. Every key of the file that the resolver does not interpret is reported, none is
dropped.

Defaults and semantics are read from verl/trainer/config/actor/actor.yaml,
algorithm/rollout_correction.yaml, core_algos.py and rollout_corr_helper.py
(verl-project/verl 1dda039, 2026-08-22; the 2026-01 version from volcengine/verl
b178a3c) and trl/trainer/grpo_config.py, grpo_trainer.py (huggingface/trl f2cd577).
"""

from __future__ import annotations

import math
from pathlib import Path

from theorycheck._bounded import (
    MAX_CONFIG_BYTES,
    check_interpolations,
    parse_config_text,
    read_bounded_text,
    refuse_nan,
)
from theorycheck._errors import BadInput
from theorycheck.losses._presets import (
    A_OLD,
    A_ROLLOUT,
    A_TRL,
    V_TRL,
    V_VERL_ENGINE,
    VERL_OLD,
)
from theorycheck.losses._reductions import Reduction

#: the trainer versions the resolver knows: name -> description.
VERSIONS = {
    "verl@1dda039": "verl-project/verl 1dda039 (2026-08-22): " + V_VERL_ENGINE,
    "verl@b178a3c": VERL_OLD + ": legacy worker unless use_legacy_worker_impl=disable",
    "trl@f2cd577": V_TRL,
}
DEFAULT_VERSION = {"verl": "verl@1dda039", "trl": "trl@f2cd577"}

_ACTOR = "actor_rollout_ref.actor."
_RC = "algorithm.rollout_correction."
#: verl keys the resolver reads, with their defaults (actor.yaml, rollout_correction).
VERL_DEFAULTS = {
    _ACTOR + "clip_ratio": 0.2,
    _ACTOR + "clip_ratio_low": 0.2,
    _ACTOR + "clip_ratio_high": 0.2,
    _ACTOR + "clip_ratio_c": 3.0,
    _ACTOR + "loss_agg_mode": "token-mean",
    _ACTOR + "loss_scale_factor": None,
    _ACTOR + "policy_loss.loss_mode": "vanilla",
    _ACTOR + "policy_loss.ppo_kl_coef": 0.1,
    _ACTOR + "policy_loss.dro_beta": None,
    _ACTOR + "tau_pos": 1.0,
    _ACTOR + "tau_neg": 1.05,
    _ACTOR + "use_kl_loss": False,
    _ACTOR + "kl_loss_type": "low_var_kl",
    _ACTOR + "kl_loss_coef": 0.001,
    _ACTOR + "ppo_mini_batch_size": 256,
    _ACTOR + "ppo_micro_batch_size_per_gpu": None,
    "actor_rollout_ref.rollout.n": 1,
    "trainer.use_legacy_worker_impl": "auto",
    _RC + "rollout_is": None,
    _RC + "rollout_is_threshold": 2.0,
    _RC + "rollout_rs": None,
    _RC + "rollout_rs_threshold": None,
    _RC + "bypass_mode": False,
    _RC + "loss_type": "ppo_clip",
}
#: TRL GRPOConfig keys the resolver reads, with their defaults (grpo_config.py).
TRL_DEFAULTS = {
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
}

_VERL_RULES = {
    "vanilla": "dual_clip",
    "gspo": "gspo_token",
    "sapo": "sapo",
    "gpg": "pg",
    "clip_cov": "clip_cov",
    "kl_cov": "kl_cov",
    "geo_mean": "gmpo",
    "dro": "dro",
    "cispo": "cispo",
    "dppo_tv": "dppo_capped",
    "dppo_kl": "dppo_binary_kl_capped",
    "bypass_mode": "dual_clip",
}
_TRL_RULES = {
    "grpo": "ppo",
    "bnpo": "ppo",
    "dr_grpo": "ppo",
    "dapo": "ppo",
    "luspo": "luspo",
    "cispo": "cispo",
    "sapo": "sapo",
    "vespo": "vespo",
}


def _flatten(tree, prefix=""):
    out = {}
    if isinstance(tree, dict):
        for k, v in tree.items():
            key = f"{prefix}{k}"
            if isinstance(v, dict) and v:
                out.update(_flatten(v, key + "."))
            else:
                out[key] = v
    return out


def load_config(path, overrides=()) -> dict:
    """A config file (YAML or JSON) merged with ``key=value`` overrides, as a dict.

    Raises:
        BadInput: the file is missing, unreadable, not YAML/JSON, not a mapping, or an
            override is not ``key=value``.
    """
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    p = Path(path)
    if not p.is_file():
        raise BadInput(f"config {str(path)!r}: no such file")
    what = f"config {str(path)!r}"
    text = read_bounded_text(p, what, MAX_CONFIG_BYTES)  # bounded: theorycheck._bounded
    raw = parse_config_text(text, p.name, what)
    if not isinstance(raw, dict):
        raise BadInput(
            f"config {str(path)!r}: holds a {type(raw).__name__}, not a mapping"
        )
    bad = [o for o in overrides if "=" not in o or o.startswith("=")]
    if bad:
        raise BadInput(f"override {bad[0]!r}: expected key=value")
    try:
        cfg = OmegaConf.merge(
            OmegaConf.create(raw),
            OmegaConf.from_dotlist([o.lstrip("+") for o in overrides]),
        )
        check_interpolations(OmegaConf.to_container(cfg), what)  # overrides too
        out = OmegaConf.to_container(cfg, resolve=True)
    except OmegaConfBaseException as err:
        line = str(err).splitlines()[0]
        raise BadInput(f"config {str(path)!r}: {line}") from None
    refuse_nan(out, what)
    return out


def detect_framework(flat: dict) -> str:
    """``"verl"`` when the config has verl's top-level groups, ``"trl"`` otherwise
    when it has GRPOConfig's loss keys."""
    if any(k.startswith(("actor_rollout_ref.", "algorithm.")) for k in flat):
        return "verl"
    if set(flat) & {"loss_type", "epsilon", "beta", "importance_sampling_level"}:
        return "trl"
    raise BadInput(
        "config: neither a verl config (actor_rollout_ref / algorithm) nor a TRL "
        "GRPOConfig (loss_type / epsilon / beta); name it with --framework"
    )


def _num(flat, key):
    v = flat[key]
    if v is None:
        return None
    try:
        number = float(v)
    except (TypeError, ValueError):
        raise BadInput(f"config key {key} = {v!r}: expected a number") from None
    if not math.isfinite(number):
        raise BadInput(f"config key {key} = {v!r}: expected a finite number")
    return number


def _verl_reduction(mode, rule, version, legacy, scale):
    if rule == "gspo_token" or rule == "sapo":
        mode = "seq-mean-token-mean"
    if rule == "gmpo":
        return (
            "mean over rows (loss_agg_mode ignored)",
            Reduction("seq_mean_token_sum", count_empty=True),
            False,
        )
    old = version == "verl@b178a3c"
    table = {
        "token-mean": Reduction("token_mean"),
        "token-sum": Reduction("token_sum"),
        "seq-mean-token-sum": Reduction("seq_mean_token_sum", count_empty=not legacy),
        "seq-mean-token-mean": Reduction(
            "seq_mean_token_mean", count_empty=not legacy, length_eps=1e-8
        ),
        "seq-mean-token-sum-norm": Reduction(
            "seq_mean_token_sum_norm",
            count_empty=not legacy,
            divide_by_sequences=not old,
            max_len=None if scale is None else int(scale),
        ),
    }
    if mode not in table or (old and mode == "token-sum"):
        raise BadInput(f"config loss_agg_mode {mode!r}: unknown to {version}")
    return mode, table[mode], legacy


def _verl_mode(cfg, traps):
    mode = str(cfg[_ACTOR + "policy_loss.loss_mode"])
    if bool(cfg[_RC + "bypass_mode"]) and mode != "bypass_mode":
        traps.append(
            f"algorithm.rollout_correction.bypass_mode=True replaces loss_mode "
            f"{mode!r} with 'bypass_mode': the run computes dual-clip PPO "
            f"(loss_type {cfg[_RC + 'loss_type']!r}) against the rollout log-prob"
            + (
                ", with the DPPO threshold read as PPO's epsilon"
                if mode.startswith("dppo")
                else ""
            )
        )
        mode = "bypass_mode"
    return mode


def _verl_dppo(lo, hi, c, traps):
    traps.append(
        f"clip_ratio_low/high ({lo:g}/{hi:g}) are read as DPPO's divergence "
        "threshold delta, not as a ratio clip"
    )
    traps.append(
        f"clip_ratio_c ({c:g}) is DPPO's weight cap here; under vanilla it is the "
        "dual-clip constant"
    )
    if lo != hi:
        traps.append(
            f"asymmetric delta {lo:g}/{hi:g}: the registry rule takes one delta "
            f"({lo:g}, the A<0 side)"
        )
    return {"delta": lo, "cap": c, "log_ratio_clamp": 20.0}


def _verl_params(rule, cfg, traps):
    lo = _num(cfg, _ACTOR + "clip_ratio_low")
    hi = _num(cfg, _ACTOR + "clip_ratio_high")
    c = _num(cfg, _ACTOR + "clip_ratio_c")
    if rule in ("dppo_capped", "dppo_binary_kl_capped"):
        return _verl_dppo(lo, hi, c, traps)
    if rule == "dual_clip":
        return {"eps_low": lo, "eps_high": hi, "kappa": c, "log_ratio_clamp": 20.0}
    if rule == "cispo":
        return {"low": 1 - lo, "high": 1 + hi, "log_ratio_clamp": 20.0}
    if rule in ("gspo_token", "gmpo", "clip_cov"):
        return {"eps_low": lo, "eps_high": hi}
    if rule == "dro":
        beta = _num(cfg, _ACTOR + "policy_loss.dro_beta")
        if beta is None or beta <= 0:
            traps.append("dro needs policy_loss.dro_beta > 0 (verl raises)")
        return {"beta": beta or math.nan}
    if rule == "kl_cov":
        return {"kl_coef": _num(cfg, _ACTOR + "policy_loss.ppo_kl_coef")}
    return {}


def _verl_corrections(cfg, bypass, legacy, traps):
    out = []
    if cfg[_RC + "rollout_is"]:
        cap_is = _num(cfg, _RC + "rollout_is_threshold")
        out.append(
            f"tis_{cfg[_RC + 'rollout_is']}(cap={cap_is:g})"
            + (" (weights not applied under bypass ppo_clip)" if bypass else "")
        )
    rs = cfg[_RC + "rollout_rs"]
    if rs:
        out.append(f"reject_kl({rs}, threshold={cfg[_RC + 'rollout_rs_threshold']})")
        traps.append(
            "rollout_rs multiplies the response mask: "
            + (
                "the legacy worker's local counts shrink with it"
                if legacy
                else "batch_num_tokens / global_batch_size are counted before it, so "
                "rejected tokens still count in the denominator (verl #4852)"
            )
        )
        if "k1" in str(rs):
            traps.append(
                "k1 rejection bounds log(pi_roll / pi_old), the inverse of the "
                "documented IS ratio: equal only for symmetric bounds"
            )
    if cfg[_ACTOR + "use_kl_loss"]:
        out.append(
            f"kl penalty {cfg[_ACTOR + 'kl_loss_type']} x "
            f"{_num(cfg, _ACTOR + 'kl_loss_coef'):g}"
        )
    return out


def resolve_verl(flat: dict, version: str) -> dict:
    """Rule, reduction, δ, cap, anchor, correction and traps of a verl config."""
    cfg = {**VERL_DEFAULTS, **{k: v for k, v in flat.items() if k in VERL_DEFAULTS}}
    explicit = {k for k in flat if k in VERL_DEFAULTS}
    traps = []
    mode = _verl_mode(cfg, traps)
    if mode not in _VERL_RULES:
        raise BadInput(f"config loss_mode {mode!r}: unknown to {version}")
    if version == "verl@b178a3c" and mode in ("dppo_tv", "dppo_kl", "dro"):
        raise BadInput(f"config loss_mode {mode!r}: not in {version}")
    rule = _VERL_RULES[mode]
    if _ACTOR + "clip_ratio" in explicit and not (
        {_ACTOR + "clip_ratio_low", _ACTOR + "clip_ratio_high"} & explicit
    ):
        traps.append(
            "clip_ratio is set but clip_ratio_low/high keep their defaults 0.2, and "
            "every loss reads low/high: clip_ratio alone has no effect"
        )
    params = _verl_params(rule, cfg, traps)
    bypass = mode == "bypass_mode"
    legacy = version == "verl@b178a3c" and (
        str(cfg["trainer.use_legacy_worker_impl"]) != "disable"
    )
    red_name, reduction, per_micro = _verl_reduction(
        str(cfg[_ACTOR + "loss_agg_mode"]),
        rule,
        version,
        legacy,
        cfg[_ACTOR + "loss_scale_factor"],
    )
    return {
        "rule": rule,
        "loss_mode": mode,
        "params": params,
        "reduction_name": red_name,
        "reduction": reduction,
        "per_micro_batch": per_micro,
        "delta": params.get("delta"),
        "cap": params.get("cap"),
        "anchor": A_ROLLOUT if bypass else A_OLD,
        "global_batch_size": None
        if legacy
        else int(cfg[_ACTOR + "ppo_mini_batch_size"])
        * int(cfg["actor_rollout_ref.rollout.n"]),
        "corrections": _verl_corrections(cfg, bypass, legacy, traps),
        "traps": traps,
        "read": sorted(explicit),
    }


def _trl_known():
    return set(TRL_DEFAULTS) | set(TRL_OTHER_KEYS)


def _trl_params(lt, rule, cfg, traps):
    eps = _num(cfg, "epsilon")
    eps_high = _num(cfg, "epsilon_high")
    delta = _num(cfg, "delta")
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
    if cfg["use_vllm"] and cfg["vllm_importance_sampling_correction"]:
        lvl, kind = str(cfg["vllm_importance_sampling_mode"]).split("_", 1)
        name = {"truncate": "tis", "mask": "mis"}.get(kind, kind) + "_" + lvl
        out.append(
            f"{name}(low={cfg['vllm_importance_sampling_clip_min']}, "
            f"high={cfg['vllm_importance_sampling_clip_max']})"
            + (" (not applied to vespo)" if lt == "vespo" else "")
        )
    if cfg["off_policy_mask_threshold"] is not None:
        out.append(f"opsm(delta={cfg['off_policy_mask_threshold']})")
    if _num(cfg, "beta"):
        out.append(f"kl penalty k3 x {_num(cfg, 'beta'):g}")
    return out


_TRL_REDUCTIONS = {
    "grpo": ("seq_mean_token_mean", True, True),
    "sapo": ("seq_mean_token_mean", True, True),
    "bnpo": ("token_mean", False, True),
    "dr_grpo": ("seq_mean_token_sum_norm", True, True),
    "dapo": ("token_mean", False, False),
    "cispo": ("token_mean", False, False),
    "vespo": ("token_mean", False, False),
    "luspo": ("seq_mean_token_sum", True, True),
}


def resolve_trl(flat: dict, version: str) -> dict:
    """Rule, reduction, δ, cap, anchor, correction and traps of a TRL GRPOConfig."""
    cfg = {**TRL_DEFAULTS, **{k: v for k, v in flat.items() if k in TRL_DEFAULTS}}
    traps = []
    lt = str(cfg["loss_type"])
    if lt not in _TRL_RULES:
        raise BadInput(f"config loss_type {lt!r}: unknown to {version}")
    rule, params = _trl_params(lt, _TRL_RULES[lt], cfg, traps)
    gas = int(cfg["gradient_accumulation_steps"])
    spg = cfg["steps_per_generation"]
    spg = gas if spg is None else int(spg)
    if lt in ("dapo", "cispo", "vespo") and spg != gas:
        traps.append(
            f"steps_per_generation ({spg}) != gradient_accumulation_steps ({gas}): "
            f"the {lt} normaliser counts the tokens of all {spg} micro-steps while "
            f"the optimizer steps every {gas}: not a global token mean per step"
        )
    mode, count_empty, per_micro = _TRL_REDUCTIONS[lt]
    max_len = int(cfg["max_completion_length"]) if lt == "dr_grpo" else None
    vllm = (
        "; vLLM sampling log-prob through the IS correction" if cfg["use_vllm"] else ""
    )
    return {
        "rule": rule,
        "loss_mode": lt,
        "params": params,
        "reduction_name": lt,
        "reduction": Reduction(mode, count_empty=count_empty, max_len=max_len),
        "per_micro_batch": per_micro,
        "delta": _num(cfg, "delta"),
        "cap": params.get("high") if rule == "cispo" else None,
        "anchor": A_TRL + vllm,
        "corrections": _trl_corrections(lt, cfg),
        "traps": traps,
        "read": sorted(k for k in flat if k in TRL_DEFAULTS),
    }


#: other GRPOConfig / TrainingArguments keys TRL accepts (grpo_config.py at f2cd577 and
#: transformers TrainingArguments); the resolver does not interpret them.
TRL_OTHER_KEYS = (
    "output_dir learning_rate num_train_epochs max_steps logging_steps save_steps "
    "bf16 fp16 seed report_to lr_scheduler_type warmup_ratio warmup_steps "
    "weight_decay max_grad_norm gradient_checkpointing per_device_eval_batch_size "
    "model_init_kwargs disable_dropout num_generations num_generations_eval "
    "max_prompt_length temperature top_p top_k min_p repetition_penalty "
    "generation_kwargs vllm_mode vllm_gpu_memory_utilization vllm_tensor_parallel_size "
    "scale_rewards reward_weights mask_truncated_completions sync_ref_model "
    "ref_model_mixup_alpha ref_model_sync_steps entropy_coef use_bias_correction_kl "
    "vespo_k_pos vespo_lambda_pos vespo_k_neg vespo_lambda_neg log_completions "
    "shuffle_dataset remove_unused_columns vllm_importance_sampling_cap"
).split()


def _weights(out, batch_shape, lengths, micro_batch_size):
    import dataclasses

    from theorycheck.losses._conventions import _per_token, batch_mask
    from theorycheck.losses._reductions import reduction_weights

    mask, gid = batch_mask(tuple(batch_shape), lengths)
    mb = batch_shape[1] if micro_batch_size is None else int(micro_batch_size)
    if mb < 1:
        raise BadInput(f"micro_batch_size {mb} must be >= 1")
    red = dataclasses.replace(
        out["reduction"], micro_batch_size=mb if out["per_micro_batch"] else None
    )
    w = reduction_weights(mask, red, group_ids=gid, num_groups=batch_shape[0])
    return _per_token(w, mask).tolist()


def resolve_config(
    path,
    *,
    overrides=(),
    framework=None,
    version=None,
    batch_shape=None,
    lengths=None,
    micro_batch_size=None,
) -> dict:
    """Reads a config and says what it computes (JSON-ready except ``reduction``).

    Args:
        path: YAML or JSON file.
        overrides: ``key=value`` strings (verl command-line style), applied last.
        framework: ``"verl"`` or ``"trl"`` (``None``: detected from the keys).
        version: a key of :data:`VERSIONS` for that framework (``None``: newest).
        batch_shape: optional ``(B, G, T)``: then the per-token weight of each
            response under the run's reduction is included.
        lengths: ``B*G`` response lengths (``None``: a spread 1..T).
        micro_batch_size: rows per micro-batch (``None``: G).

    Returns:
        ``{"framework", "version", "version_range", "rule", "loss_mode", "params",
        "reduction" (mode name), "reduction_name", "per_micro_batch", "delta", "cap",
        "anchor", "corrections", "traps", "read", "not_interpreted", "unknown_keys",
        "per_token_weight"}``.
    """
    flat = _flatten(load_config(path, overrides))
    fw = framework or detect_framework(flat)
    if fw not in DEFAULT_VERSION:
        raise BadInput(f"framework {fw!r}: expected verl or trl")
    ver = version or DEFAULT_VERSION[fw]
    if ver not in VERSIONS or not ver.startswith(fw + "@"):
        valid = ", ".join(v for v in VERSIONS if v.startswith(fw + "@"))
        raise BadInput(f"trainer version {ver!r}: valid for {fw}: {valid}")
    out = resolve_verl(flat, ver) if fw == "verl" else resolve_trl(flat, ver)
    read = set(out["read"])
    weights = (
        None
        if batch_shape is None
        else _weights(out, batch_shape, lengths, micro_batch_size)
    )
    out["reduction"] = str(out["reduction"].mode)
    unknown = [] if fw == "verl" else sorted(k for k in flat if k not in _trl_known())
    return {
        "framework": fw,
        "version": ver,
        "version_range": VERSIONS[ver],
        **out,
        "not_interpreted": sorted(k for k in flat if k not in read),
        "unknown_keys": unknown,
        "per_token_weight": weights,
    }

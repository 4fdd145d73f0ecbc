"""What a verl configuration computes, for a named verl version.

Read from verl-project/verl (its history from v0.6.1 to 1dda039, 2026-08-22):
``verl/trainer/config/actor/actor.yaml``, ``algorithm/rollout_correction.yaml``,
``ppo_trainer.yaml``, ``verl/trainer/ppo/core_algos.py`` (``compute_policy_loss_*``,
``compute_policy_loss_bypass_mode``, ``agg_loss``, ``AdvantageEstimator``) and
``rollout_corr_helper.py`` (``_parse_rollout_is_threshold``,
``_parse_rollout_rs_thresholds``, ``compute_rollout_correction_weights``). The
version table records, per release, the policy losses, advantage estimators,
``loss_agg_mode`` values, ``rollout_correction`` keys and ``rollout_rs`` options it
accepts: a config using one the named version does not have is reported as failing at
startup on that version.
"""

from __future__ import annotations

import dataclasses
import math

from theorycheck._errors import BadInput
from theorycheck.losses._presets import A_OLD, A_ROLLOUT, VERL_NOW
from theorycheck.losses._reductions import Reduction
from theorycheck.losses._resolve_common import (
    absent,
    entropy_term,
    flag,
    kl_term,
    lower_upper,
    number,
    settle,
)

FRAMEWORK = "verl"

_LOSSES_061 = frozenset(
    "vanilla gspo gpg clip_cov kl_cov geo_mean rollout_correction".split()
)
_LOSSES_070 = (_LOSSES_061 - {"rollout_correction"}) | {"sapo", "cispo", "bypass_mode"}
_LOSSES_071 = _LOSSES_070 | {"dppo_tv", "dppo_kl"}
_ADV_061 = frozenset(
    "gae gpg grpo grpo_passk grpo_vectorized opo reinforce_plus_plus "
    "reinforce_plus_plus_baseline remax rloo rloo_vectorized".split()
)
_ADV_0129 = _ADV_061 | {"optimal_token_baseline", "tir_optimal_token_baseline"}
_AGG = frozenset(
    "token-mean seq-mean-token-sum seq-mean-token-mean seq-mean-token-sum-norm".split()
)
_RC_OLD = frozenset(
    "rollout_is rollout_is_threshold rollout_rs rollout_rs_threshold "
    "rollout_rs_threshold_lower rollout_token_veto_threshold bypass_mode "
    "rollout_is_batch_normalize".split()
)
_RC_NEW = (_RC_OLD - {"rollout_rs_threshold_lower", "rollout_token_veto_threshold"}) | {
    "loss_type"
}
_RS_OLD = frozenset({"token", "sequence", "geometric"})
_RS_NEW = frozenset(
    "token_k1 token_k2 token_k3 seq_sum_k1 seq_sum_k2 seq_sum_k3 seq_mean_k1 "
    "seq_mean_k2 seq_mean_k3 seq_max_k2 seq_max_k3".split()
)
#: what removed an option, for the startup-failure trap.
_REMOVED_BY = (
    "verl-project/verl 97eac90 (#4544, 2026-01-14: rejection options become "
    "token_k*/seq_*_k*, rollout_rs_threshold_lower and rollout_token_veto_threshold "
    "removed)"
)


@dataclasses.dataclass(frozen=True)
class VerlVersion:
    """One verl release (or commit) as the resolver models it.

    Attributes:
        name: tag or short commit.
        commit: short commit.
        date: commit date.
        losses: registered ``policy_loss.loss_mode`` values.
        adv: ``algorithm.adv_estimator`` values.
        agg: ``loss_agg_mode`` values.
        rc_keys: ``algorithm.rollout_correction`` keys.
        rs: ``rollout_rs`` options.
        icepop: ``rollout_is_threshold`` accepts ``"lower_upper"`` (d2916f5, #5722).
        legacy: the legacy worker is the default (before 63e8a0d, #5604).
        dr_by_sequences: seq-mean-token-sum-norm divides by the sequence count too
            (b8d91ef, #5366).
    """

    name: str
    commit: str
    date: str
    losses: frozenset
    adv: frozenset
    agg: frozenset
    rc_keys: frozenset
    rs: frozenset
    icepop: bool
    legacy: bool
    dr_by_sequences: bool


_TABLE = (
    VerlVersion(
        "v0.6.1", "d62da49", "2025-11-14", _LOSSES_061, _ADV_061, _AGG,
        (_RC_OLD | {"use_policy_gradient"}), _RS_OLD, False, True, False,
    ),
    VerlVersion(
        "v0.7.0", "f9c855f", "2026-01-05", _LOSSES_070, _ADV_061, _AGG,
        _RC_OLD | {"loss_type"}, _RS_OLD, False, True, False,
    ),
    VerlVersion(
        "b178a3c", "b178a3c", "2026-01-29", _LOSSES_070, _ADV_0129, _AGG,
        _RC_NEW, _RS_NEW, False, True, False,
    ),
    VerlVersion(
        "v0.7.1", "bec9ef7", "2026-03-16", _LOSSES_071, _ADV_0129 | {"gdpo"}, _AGG,
        _RC_NEW, _RS_NEW, False, True, True,
    ),
    VerlVersion(
        "v0.8.0", "7aed6b2", "2026-06-01", _LOSSES_071, _ADV_0129 | {"gdpo"}, _AGG,
        _RC_NEW, _RS_NEW, True, False, True,
    ),
    VerlVersion(
        "v0.9.0", "483b8a0", "2026-08-14", _LOSSES_071 | {"dro"},
        _ADV_0129 | {"gdpo"}, _AGG | {"token-sum"}, _RC_NEW, _RS_NEW, True, False, True,
    ),
    VerlVersion(
        "1dda039", "1dda039", "2026-08-22", _LOSSES_071 | {"dro"},
        _ADV_0129 | {"gdpo"}, _AGG | {"token-sum"}, _RC_NEW, _RS_NEW, True, False, True,
    ),
)  # fmt: skip
_BY_NAME = {v.name: v for v in _TABLE}

#: version name -> what it is.
VERSIONS = {
    f"verl@{v.name}": f"verl-project/verl {v.commit} ({v.date})"
    + ("; legacy worker unless use_legacy_worker_impl=disable" if v.legacy else "")
    for v in _TABLE
}
DEFAULT = "verl@1dda039"
assert VERL_NOW.startswith("verl-project/verl 1dda039")

#: loss modes of verl-recipe (verl-project/verl-recipe 48ea0a7), not of verl.
RECIPE_LOSSES = {"gvpo": "verl-recipe gvpo/ (its own actor, gvpo_dp_actor.py)"}


def version_of(spec: str) -> str:
    """``v0.7.0``, ``0.7.0``, a tag's commit or a known commit prefix -> version name.

    Raises:
        BadInput: a version or commit the table does not hold.
    """
    s = spec.strip()
    for v in _TABLE:
        names = (v.name, v.name.lstrip("v"), v.commit)
        if s in names or (len(s) >= 7 and v.commit.startswith(s[:7])):
            return f"verl@{v.name}"
    known = ", ".join(f"{v.name} ({v.commit}, {v.date})" for v in _TABLE)
    raise BadInput(f"verl version {spec!r}: unknown; known: {known}")


def looks_like(flat) -> bool:
    """verl's top-level groups."""
    return any(k.startswith(("actor_rollout_ref.", "algorithm.")) for k in flat)


_ACTOR = "actor_rollout_ref.actor."
_RC = "algorithm.rollout_correction."
_ALG = "algorithm."
#: verl keys the resolver reads, with their defaults (actor.yaml, ppo_trainer.yaml,
#: rollout_correction.yaml at 1dda039).
DEFAULTS = {
    _ACTOR + "clip_ratio": 0.2,
    _ACTOR + "clip_ratio_low": 0.2,
    _ACTOR + "clip_ratio_high": 0.2,
    _ACTOR + "clip_ratio_c": 3.0,
    _ACTOR + "loss_agg_mode": "token-mean",
    _ACTOR + "loss_scale_factor": None,
    _ACTOR + "policy_loss.loss_mode": "vanilla",
    _ACTOR + "policy_loss.ppo_kl_coef": 0.1,
    _ACTOR + "policy_loss.dro_beta": None,
    _ACTOR + "policy_loss.kl_cov_ratio": 0.0002,
    _ACTOR + "policy_loss.clip_cov_ratio": 0.0002,
    _ACTOR + "tau_pos": 1.0,
    _ACTOR + "tau_neg": 1.05,
    _ACTOR + "use_kl_loss": False,
    _ACTOR + "kl_loss_type": "low_var_kl",
    _ACTOR + "kl_loss_coef": 0.001,
    _ACTOR + "entropy_coeff": 0.0,
    _ACTOR + "ppo_mini_batch_size": 256,
    _ACTOR + "ppo_micro_batch_size_per_gpu": None,
    "actor_rollout_ref.rollout.n": 1,
    "trainer.use_legacy_worker_impl": "auto",
    _ALG + "adv_estimator": "gae",
    _ALG + "norm_adv_by_std_in_grpo": True,
    _ALG + "use_kl_in_reward": False,
    _ALG + "kl_penalty": "kl",
    _ALG + "kl_ctrl.kl_coef": 0.001,
    _ALG + "gamma": 1.0,
    _ALG + "lam": 1.0,
    _RC + "rollout_is": None,
    _RC + "rollout_is_threshold": 2.0,
    _RC + "rollout_rs": None,
    _RC + "rollout_rs_threshold": None,
    _RC + "bypass_mode": False,
    _RC + "loss_type": "ppo_clip",
    _RC + "rollout_is_batch_normalize": False,
    _RC + "rollout_rs_threshold_lower": None,
    _RC + "rollout_token_veto_threshold": None,
}

_RULES = {
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
}

#: adv_estimator -> the advantage it computes (core_algos.py at 1dda039).
ADVANTAGES = {
    "gae": "GAE(gamma, lam) with the critic's values",
    "grpo": "(R - mean_g) / (std_g + 1e-6) per prompt group",
    "grpo_vectorized": "(R - mean_g) / (std_g + 1e-6) per prompt group",
    "rloo": "R - mean of the other responses of the group",
    "rloo_vectorized": "R - mean of the other responses of the group",
    "reinforce_plus_plus": "discounted returns, whitened over the batch",
    "reinforce_plus_plus_baseline": "R - mean_g, whitened over the batch",
    "remax": "R - R(greedy baseline)",
    "opo": "R - length-weighted group mean",
    "grpo_passk": "pass@k: only the best response of a group gets R_max - R_2nd",
    "gpg": "(R - mean_g) scaled by the share of groups with a nonzero std",
    "gdpo": "per-reward GRPO normalisation, then summed and whitened",
    "optimal_token_baseline": "R - per-token optimal baseline",
    "tir_optimal_token_baseline": "R - per-token optimal baseline (tool-use)",
}

#: key prefix -> why the resolver does not interpret it.
_WHY = (
    ("data.", "data loading and prompt lengths: not the loss"),
    ("actor_rollout_ref.model.", "the model and how it is loaded"),
    (
        "actor_rollout_ref.rollout.",
        "inference engine (sampling, parallelism): changes the rollout, not the loss",
    ),
    ("actor_rollout_ref.ref.", "placement of the reference model"),
    (_ACTOR + "optim.", "optimizer: scales the step, not the per-token weights"),
    (_ACTOR + "fsdp_config.", "sharding: no effect on the loss"),
    (_ACTOR + "megatron.", "parallelism: no effect on the loss"),
    (
        _ACTOR + "ppo_epochs",
        "passes over the batch: the anchor is the pre-update policy on each pass",
    ),
    (
        _ACTOR + "use_dynamic_bsz",
        "micro-batching by tokens: weights are global on the new engine",
    ),
    (
        _ACTOR + "ppo_max_token_len",
        "micro-batching by tokens: weights are global on the new engine",
    ),
    (_ACTOR + "checkpoint.", "checkpointing"),
    ("critic.", "the value model: used only by adv_estimator=gae"),
    ("reward", "reward computation: changes R, not the loss form"),
    ("custom_reward_function.", "reward computation: changes R, not the loss form"),
    ("trainer.", "logging, checkpointing, cluster layout"),
    ("ray_kwargs.", "cluster layout"),
    (_ALG + "filter_groups.", "dynamic sampling: which groups reach the loss"),
)


def _check_version(flat, cfg, ver, traps, fails):
    """Keys and option values against ``ver``: each one it lacks fails startup."""
    for k in sorted(flat):
        if k.startswith(_RC) and k[len(_RC) :] not in ver.rc_keys:
            why = (
                f"removed by {_REMOVED_BY}"
                if k[len(_RC) :] in _RC_OLD - _RC_NEW
                else "not a rollout_correction key there"
            )
            fails.append(f"{k}: {why}")
    rs = cfg[_RC + "rollout_rs"]
    if not absent(rs):
        for opt in (o.strip() for o in str(rs).split(",") if o.strip()):
            if opt not in ver.rs:
                old = opt in _RS_OLD and ver.rs is _RS_NEW
                fails.append(
                    f"rollout_rs option {opt!r}: "
                    + (f"removed by {_REMOVED_BY}" if old else "not an option there")
                    + f" (valid: {', '.join(sorted(ver.rs))})"
                )
    adv = str(cfg[_ALG + "adv_estimator"])
    if adv not in ver.adv:
        fails.append(f"algorithm.adv_estimator {adv!r}: not registered there")
    agg = str(cfg[_ACTOR + "loss_agg_mode"])
    if agg not in ver.agg:
        fails.append(f"loss_agg_mode {agg!r}: not accepted there")
    for f in fails:
        traps.append(f"this config fails at startup on verl {ver.name}: {f}")


def _mode(cfg, ver, traps):
    mode = str(cfg[_ACTOR + "policy_loss.loss_mode"])
    if mode in RECIPE_LOSSES:
        traps.append(
            f"loss_mode {mode!r} is a recipe loss, computed by {RECIPE_LOSSES[mode]}, "
            "not by verl: verl's own actor has no such loss_mode; its rule is not "
            "modelled (rule null), the rest of the config is"
        )
        return mode
    if mode not in _RULES:
        raise BadInput(f"config loss_mode {mode!r}: unknown to verl@{ver.name}")
    if mode not in ver.losses:
        raise BadInput(f"config loss_mode {mode!r}: not in verl@{ver.name}")
    return mode


def _bypass(cfg, mode, ver, traps):
    """``None`` unless bypass mode is on; else its ``loss_type``."""
    if not flag(cfg, _RC + "bypass_mode"):
        return None
    lt = str(cfg[_RC + "loss_type"])
    if lt not in ("ppo_clip", "reinforce"):
        raise BadInput(
            f"config key {_RC}loss_type = {lt!r}: expected ppo_clip or reinforce"
        )
    what = {
        "ppo_clip": "dual-clip PPO against the rollout log-prob",
        "reinforce": "REINFORCE with the rollout-correction weights, no clip",
    }[lt]
    text = (
        f"algorithm.rollout_correction.bypass_mode=True replaces loss_mode {mode!r} "
        f"with 'bypass_mode' (loss_type {lt!r}): the run computes {what}"
    )
    if lt == "ppo_clip" and mode.startswith("dppo"):
        text += ", with the DPPO threshold read as PPO's epsilon"
    traps.append(text)
    return lt


def _old_bypass(cfg, ver, traps) -> bool:
    """v0.6.1's bypass_mode: no loss of its own, the rollout log-prob as anchor."""
    if "bypass_mode" in ver.losses or not flag(cfg, _RC + "bypass_mode"):
        return False
    traps.append(
        f"bypass_mode on verl {ver.name}: old_log_prob is the rollout log-prob (no "
        "recomputation); the loss stays loss_mode's (use_policy_gradient, not "
        "modelled, switched it to REINFORCE)"
    )
    return True


def _dppo(lo, hi, c, traps):
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


def _cispo(lo, hi, traps):
    low = 1 - lo
    if low <= 0:
        traps.append(
            f"cispo clip_ratio_low = {lo:g}: the lower bound 1 - {lo:g} = {low:g} is "
            "below every ratio: no lower clip (weights capped above only)"
        )
        low = 0.0
    return {"low": low, "high": 1 + hi, "log_ratio_clamp": 20.0}


def _cov_trap(rule, cfg, traps):
    ratio = number(cfg, _ACTOR + f"policy_loss.{rule}_ratio", positive=True)
    traps.append(
        f"{rule}_ratio = {ratio:g}: the {rule} term acts on the top {100 * ratio:g}% "
        "of tokens by covariance; SkyRL's kl_cov_frac (default 0.2) is the same "
        "fraction, 1000x larger by default: a value copied between the two is off "
        "by 1000x"
    )


def _params(rule, cfg, traps):
    lo = number(cfg, _ACTOR + "clip_ratio_low")
    hi = number(cfg, _ACTOR + "clip_ratio_high")
    c = number(cfg, _ACTOR + "clip_ratio_c")
    if rule in ("dppo_capped", "dppo_binary_kl_capped"):
        return _dppo(lo, hi, c, traps)
    if rule == "dual_clip":
        return {"eps_low": lo, "eps_high": hi, "kappa": c, "log_ratio_clamp": 20.0}
    if rule == "cispo":
        return _cispo(lo, hi, traps)
    if rule in ("kl_cov", "clip_cov"):
        _cov_trap(rule, cfg, traps)
    if rule in ("gspo_token", "gmpo", "clip_cov"):
        return {"eps_low": lo, "eps_high": hi}
    if rule == "sapo":
        return {
            "tau_pos": number(cfg, _ACTOR + "tau_pos", positive=True),
            "tau_neg": number(cfg, _ACTOR + "tau_neg", positive=True),
        }
    if rule == "dro":
        beta = number(cfg, _ACTOR + "policy_loss.dro_beta")
        if beta is None or beta <= 0:
            traps.append("dro needs policy_loss.dro_beta > 0 (verl raises)")
        return {"beta": beta or math.nan}
    if rule == "kl_cov":
        return {"kl_coef": number(cfg, _ACTOR + "policy_loss.ppo_kl_coef")}
    return {}


def _reduction(mode, rule, ver, legacy, scale):
    if rule in ("gspo_token", "sapo"):
        mode = "seq-mean-token-mean"
    if rule == "gmpo":
        return (
            "mean over rows (loss_agg_mode ignored)",
            Reduction("seq_mean_token_sum", count_empty=True),
            False,
        )
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
            divide_by_sequences=ver.dr_by_sequences,
            max_len=None if scale is None else int(scale),
        ),
    }
    if mode not in table:
        raise BadInput(f"config loss_agg_mode {mode!r}: unknown to verl@{ver.name}")
    return mode, table[mode], legacy


def _is_correction(cfg, ver, bypass, fails):
    """The rollout-IS weight: TIS (one number) or IcePop (``lower_upper``)."""
    level = cfg[_RC + "rollout_is"]
    if absent(level):
        return None
    if str(level) not in ("token", "sequence"):
        raise BadInput(
            f"config key {_RC}rollout_is = {level!r}: expected token or sequence"
        )
    lo, hi = lower_upper(
        _RC + "rollout_is_threshold", cfg[_RC + "rollout_is_threshold"]
    )
    if lo is not None and not ver.icepop:
        fails.append(
            f"rollout_is_threshold {cfg[_RC + 'rollout_is_threshold']!r}: the "
            "lower_upper (IcePop) form arrived in d2916f5 (#5722, 2026-03-24)"
        )
    if lo is None:
        name, params = f"tis_{level}", {"cap": hi}
    else:
        name = "icepop" if level == "token" else "mis_sequence"
        params = {"low": lo, "high": hi}
    norm = flag(cfg, _RC + "rollout_is_batch_normalize")
    applied = bypass != "ppo_clip"
    text = f"{name}({', '.join(f'{k}={v:g}' for k, v in params.items())})"
    if norm:
        text += (
            " divided by its batch mean (rollout_is_batch_normalize: mean over "
            + ("tokens" if level == "token" else "sequences")
            + " = 1)"
        )
    if not applied:
        text += " (computed for metrics, not applied under bypass ppo_clip)"
    return {
        "correction": name,
        "params": params,
        "batch_normalize": norm,
        "applied": applied,
        "text": text,
    }


def _rs_corrections(cfg, ver, fails, traps):
    """One ``reject_kl`` per ``rollout_rs`` option, with its own threshold."""
    rs = cfg[_RC + "rollout_rs"]
    if absent(rs):
        return []
    if ver.rs is _RS_OLD:
        return _rs_old(cfg, str(rs).strip())
    opts = list(dict.fromkeys(o.strip() for o in str(rs).split(",") if o.strip()))
    if not set(opts) <= ver.rs:
        return []  # reported by _check_version: verl refuses the config
    spec = cfg[_RC + "rollout_rs_threshold"]
    if absent(spec):
        fails.append("rollout_rs is set but rollout_rs_threshold is null (verl raises)")
        return []
    parts = [p.strip() for p in str(spec).split(",") if p.strip()]
    if len(parts) not in (1, len(opts)):
        raise BadInput(
            f"config key {_RC}rollout_rs_threshold = {spec!r}: {len(parts)} "
            f"thresholds for {len(opts)} rollout_rs options (give 1 or {len(opts)})"
        )
    parts = parts * len(opts) if len(parts) == 1 else parts
    return [_rs_one(opt, part, traps) for opt, part in zip(opts, parts)]


def _rs_old(cfg, level):
    """Before 97eac90: one ratio window [lower, upper] (lower defaults to 1/upper),
    per token, on the product (``sequence``) or the geometric mean (``geometric``)."""
    if level not in _RS_OLD:
        return []
    hi = number(cfg, _RC + "rollout_rs_threshold", positive=True)
    if hi is None:
        raise BadInput(f"config key {_RC}rollout_rs_threshold: needed by rollout_rs")
    key = _RC + "rollout_rs_threshold_lower"
    lo = number(cfg, key, positive=True) or 1.0 / hi
    name = {
        "token": "reject_kl",
        "sequence": "product_mask_sequence",
        "geometric": "geo_mask_sequence",
    }[level]
    params = (
        {"estimator": "k1", "level": "token", "upper": 1.0 / lo, "lower": 1.0 / hi}
        if level == "token"
        else {"low": lo, "high": hi}
    )
    text = f"reject {level}: ratio outside [{lo:g}, {hi:g}]"
    return [{"correction": name, "params": params, "applied": True, "text": text}]


def _rs_one(opt, part, traps):
    key = f"{_RC}rollout_rs_threshold ({opt})"
    est = opt[-2:]
    level = opt[: -len("_" + est)]
    lo, hi = lower_upper(key, part)
    if est != "k1" and lo is not None:
        raise BadInput(f"config key {key} = {part!r}: {opt} takes one upper bound")
    if est == "k1":
        lo = 1.0 / hi if lo is None else lo
        traps.append(
            f"{opt} bounds log(pi_roll / pi_old) in [log {lo:g}, log {hi:g}], the "
            "inverse of the documented IS ratio: equal only for symmetric bounds"
        )
    params = {"estimator": est, "level": level, "upper": hi}
    if lo is not None:
        params["lower"] = lo
    text = f"reject {opt}(" + (f"{lo:g} <= " if lo is not None else "") + f"<= {hi:g})"
    return {"correction": "reject_kl", "params": params, "applied": True, "text": text}


def _advantage(cfg, ver):
    adv = str(cfg[_ALG + "adv_estimator"])
    text = ADVANTAGES.get(adv, "registered outside verl core; not modelled")
    if adv in ("grpo", "grpo_vectorized") and not flag(
        cfg, _ALG + "norm_adv_by_std_in_grpo"
    ):
        text = "R - mean_g per prompt group (norm_adv_by_std_in_grpo=False: Dr. GRPO)"
    if flag(cfg, _ALG + "use_kl_in_reward"):
        text += (
            f"; rewards shaped by - {number(cfg, _ALG + 'kl_ctrl.kl_coef'):g} x "
            f"{cfg[_ALG + 'kl_penalty']} before the advantage"
        )
    return {"estimator": adv, "text": text}


def _extra_terms(cfg, agg):
    out = []
    if flag(cfg, _ACTOR + "use_kl_loss"):
        out.append(
            kl_term(
                number(cfg, _ACTOR + "kl_loss_coef"), cfg[_ACTOR + "kl_loss_type"], agg
            )
        )
    ent = number(cfg, _ACTOR + "entropy_coeff")
    if ent:
        out.append(entropy_term(ent) + f", reduced by {agg}")
    return out


def _traps_general(cfg, explicit, traps, rule, bypass):
    if _ACTOR + "clip_ratio" in explicit and not (
        {_ACTOR + "clip_ratio_low", _ACTOR + "clip_ratio_high"} & explicit
    ):
        traps.append(
            "clip_ratio is set but clip_ratio_low/high keep their defaults 0.2, and "
            "every loss reads low/high: clip_ratio alone has no effect"
        )
    if bypass == "reinforce" and absent(cfg[_RC + "rollout_is"]):
        traps.append(
            "bypass REINFORCE without rollout_is: no IS weight and no clip, the "
            "rollout-trainer mismatch is not corrected"
        )


def _rs_mask_trap(corrections, legacy, traps):
    if any(c["correction"] == "reject_kl" for c in corrections):
        traps.append(
            "rollout_rs multiplies the response mask: "
            + (
                "the legacy worker's local counts shrink with it"
                if legacy
                else "batch_num_tokens / global_batch_size are counted before it, so "
                "rejected tokens still count in the denominator (verl #4852)"
            )
        )


def resolve(flat: dict, version: str) -> dict:
    """What a verl config computes, with its traps."""
    ver = _BY_NAME[version.split("@", 1)[1]]
    cfg = {**DEFAULTS, **{k: v for k, v in flat.items() if k in DEFAULTS}}
    explicit = {k for k in flat if k in DEFAULTS}
    traps, fails = [], []
    _check_version(flat, cfg, ver, traps, fails)
    mode = _mode(cfg, ver, traps)
    bypass = _bypass(cfg, mode, ver, traps) if "bypass_mode" in ver.losses else None
    if bypass == "reinforce":
        rule, params = "pg", {}
    else:
        rule = "dual_clip" if bypass else _RULES.get(mode)
        params = {} if rule is None else _params(rule, cfg, traps)
    _traps_general(cfg, explicit, traps, rule, bypass)
    legacy = ver.legacy and str(cfg["trainer.use_legacy_worker_impl"]) != "disable"
    red_name, reduction, per_micro = _reduction(
        str(cfg[_ACTOR + "loss_agg_mode"]),
        rule,
        ver,
        legacy,
        number(cfg, _ACTOR + "loss_scale_factor"),
    )
    n_fail = len(fails)
    corrections = [
        c for c in [_is_correction(cfg, ver, bypass, fails)] if c is not None
    ] + _rs_corrections(cfg, ver, fails, traps)
    traps += [
        f"this config fails at startup on verl {ver.name}: {f}" for f in fails[n_fail:]
    ]
    _rs_mask_trap(corrections, legacy, traps)
    return {
        "rule": rule,
        "loss_mode": "bypass_mode" if bypass else mode,
        "loss_type": bypass,
        "params": params,
        "reduction_name": red_name,
        "reduction": reduction,
        "per_micro_batch": per_micro,
        "delta": params.get("delta"),
        "cap": params.get("cap"),
        "anchor": A_ROLLOUT if bypass or _old_bypass(cfg, ver, traps) else A_OLD,
        "global_batch_size": None
        if legacy
        else int(number(cfg, _ACTOR + "ppo_mini_batch_size"))
        * int(number(cfg, "actor_rollout_ref.rollout.n")),
        "advantage": _advantage(cfg, ver),
        "corrections": corrections,
        "extra_terms": _extra_terms(cfg, red_name),
        "fails_at_startup": fails,
        "traps": traps,
        "read": sorted(explicit),
        "skipped": settle(flat, explicit, _WHY, "not modelled by the resolver"),
    }

"""What a SkyRL configuration computes (NovaSky-AI/SkyRL a956457, 2026-08-21).

A SkyRL run is configured by YAML (``trainer.algorithm.*``, the dataclasses of
``skyrl/train/config/config.py``) and Hydra ``key=value`` overrides on its command line,
read here the same way. Semantics from ``skyrl/backends/skyrl_train/utils/ppo_utils.py``
(``PolicyLossRegistry``, ``compute_policy_loss_cispo``, ``compute_policy_loss_kl_cov``,
``compute_maxrl_advantage``) and ``off_policy_correction_utils.py`` (TIS, sequence
masks, outlier-sequence rejection, per-token IS masks).
"""

from __future__ import annotations

from theorycheck._errors import BadInput
from theorycheck.losses._presets import A_OLD, A_ROLLOUT, V_SKYRL
from theorycheck.losses._reductions import Reduction
from theorycheck.losses._resolve_common import (
    absent,
    entropy_term,
    entry,
    flag,
    kl_term,
    number,
    settle,
    single_version,
)

FRAMEWORK = "skyrl"
VERSIONS, DEFAULT, version_of = single_version(FRAMEWORK, "a956457", V_SKYRL)


_A = "trainer.algorithm."
_OPC = _A + "off_policy_correction."


def looks_like(flat) -> bool:
    """SkyRL's ``trainer.algorithm`` group."""
    return any(k.startswith(_A) for k in flat)


#: keys read, with SkyRL's defaults (config.py at a956457).
DEFAULTS = {
    _A + "advantage_estimator": "grpo",
    _A + "policy_loss_type": "regular",
    _A + "loss_reduction": "token_mean",
    _A + "grpo_norm_by_std": True,
    _A + "eps_clip_low": 0.2,
    _A + "eps_clip_high": 0.2,
    _A + "clip_ratio_c": 3.0,
    _A + "use_kl_loss": True,
    _A + "use_kl_in_reward": False,
    _A + "kl_loss_coef": 0.001,
    _A + "kl_estimator_type": "k3",
    _A + "use_entropy_loss": False,
    _A + "entropy_loss_coef": 0.01,
    _A + "max_seq_len": None,
    _A + "advantage_batch_normalize": False,
    _A + "zero_variance_filter": False,
    _A + "cispo.cispo_eps_clip_low": 1.0,
    _A + "cispo.cispo_eps_clip_high": 4.0,
    _A + "cispo.cispo_anchor": "old",
    _A + "kl_cov.kl_cov_frac": 0.2,
    _A + "kl_cov.ppo_kl_coef": 1.0,
    _A + "clip_cov.clip_ratio": 0.0002,
    _A + "sapo.tau_pos": 1.0,
    _A + "sapo.tau_neg": 1.05,
    _A + "dppo.dppo_type": "binary_tv",
    _A + "dppo.delta_low": 0.2,
    _A + "dppo.delta_high": 0.2,
    _A + "use_tis": False,
    _A + "tis_imp_ratio_cap": -1.0,
    _OPC + "tis_ratio_type": None,
    _OPC + "token_tis_ratio_clip_high": 2.0,
    _OPC + "sequence_tis_ratio_clip_high": 5.0,
    _OPC + "sequence_mask_metric": None,
    _OPC + "geo_mask_high": 1.01,
    _OPC + "geo_mask_low": 0.99,
    _OPC + "product_mask_high": 2.0,
    _OPC + "product_mask_low": 0.5,
    _OPC + "outlier_token_is_threshold_low": None,
    _OPC + "outlier_token_is_threshold_high": None,
    _OPC + "token_mask_is_threshold_low": None,
    _OPC + "token_mask_is_threshold_high": None,
}

#: every field of AlgorithmConfig and its sub-configs at a956457 (SkyRL validates
#: config keys against the dataclass fields and refuses others).
_FIELDS = frozenset(
    [_A + k for k in (
        "advantage_estimator kl_estimator_type use_kl_in_reward use_kl_loss "
        "kl_loss_coef use_entropy_loss entropy_loss_coef temperature "
        "advantage_batch_normalize value_head_prefix policy_loss_type loss_reduction "
        "grpo_norm_by_std zero_variance_filter zero_variance_filter_tol lambd gamma "
        "eps_clip_low eps_clip_high clip_ratio_c tis_imp_ratio_cap use_tis value_clip "
        "max_seq_len kl_ctrl.type kl_ctrl.kl_target kl_ctrl.horizon "
        "dynamic_sampling.type dynamic_sampling.max_sample_batches "
        "dynamic_sampling.min_replace_ratio clip_cov.clip_ratio clip_cov.clip_cov_lb "
        "clip_cov.clip_cov_ub"
    ).split()]
) | set(DEFAULTS)  # fmt: skip

_RULES = {
    "regular": "ppo",
    "dual_clip": "dual_clip",
    "gspo": "gspo_token",
    "cispo": "cispo",
    "clip_cov": "clip_cov",
    "kl_cov": "kl_cov",
    "sapo": "sapo",
    "rollout_is": "glm5",
    "importance_sampling": "is_pg",
    "dppo": "dppo_binary_tv",
}
_REDUCTIONS = {
    "token_mean": Reduction("token_mean"),
    "token_mean_legacy": Reduction("token_mean"),
    "sequence_mean": Reduction("seq_mean_token_mean", count_empty=True),
    "prompt_mean": Reduction("prompt_mean"),
}
ADVANTAGES = {
    "grpo": "(R - mean_g) / (std_g + 1e-6) per prompt group",
    "rloo": "R - mean of the other responses of the group",
    "gae": "GAE(gamma, lambd) with the critic's values",
    "reinforce++": "discounted returns, whitened over the batch",
    "maxrl": "(R - mean_g) / (mean_g + 1e-6) per prompt group",
}
_WHY = (
    ("trainer.policy.", "model, optimizer and sharding of the policy"),
    ("trainer.ref.", "placement of the reference model"),
    ("trainer.critic.", "the value model: used only by gae"),
    ("trainer.placement.", "cluster layout"),
    ("generator.", "inference engine and sampling: changes the rollout, not the loss"),
    ("data.", "data loading"),
    (_A + "dynamic_sampling.", "dynamic sampling: which groups reach the loss"),
    (_A + "value_clip", "value loss: gae only"),
    (_A + "lambd", "GAE only"),
    (_A + "gamma", "GAE only"),
    (_A + "temperature", "logit temperature: the same for both log-probs"),
    ("trainer.", "schedule, batch sizes, logging, checkpointing"),
)


def _params(loss, cfg, traps):
    lo, hi = number(cfg, _A + "eps_clip_low"), number(cfg, _A + "eps_clip_high")
    if loss in ("regular", "gspo"):
        return {"eps_low": lo, "eps_high": hi, "log_ratio_clamp": 20.0}
    if loss == "dual_clip":
        c = number(cfg, _A + "clip_ratio_c")
        return {"eps_low": lo, "eps_high": hi, "kappa": c, "log_ratio_clamp": 20.0}
    if loss == "cispo":
        return _cispo(cfg, traps)
    if loss == "kl_cov":
        frac = number(cfg, _A + "kl_cov.kl_cov_frac")
        traps.append(
            f"kl_cov_frac = {frac:g} is a fraction of tokens ({100 * frac:g}%); "
            "verl's kl_cov_ratio (default 0.0002) is the same quantity, 1000x "
            "smaller by default: a value copied between the two is off by 1000x"
        )
        return {"kl_coef": number(cfg, _A + "kl_cov.ppo_kl_coef")}
    if loss == "sapo":
        return {
            "tau_pos": number(cfg, _A + "sapo.tau_pos", positive=True),
            "tau_neg": number(cfg, _A + "sapo.tau_neg", positive=True),
        }
    if loss == "dppo":
        return _dppo(cfg, traps)
    if loss == "clip_cov":
        return {"eps_low": lo, "eps_high": hi}
    return {}


def _cispo(cfg, traps):
    lo = number(cfg, _A + "cispo.cispo_eps_clip_low")
    hi = number(cfg, _A + "cispo.cispo_eps_clip_high")
    low = 1 - lo
    if low <= 0:
        traps.append(
            f"cispo_eps_clip_low = {lo:g}: the lower bound 1 - {lo:g} = {low:g} is "
            "below every ratio: no lower clip (weights capped above only)"
        )
        low = 0.0
    return {"low": low, "high": 1 + hi, "log_ratio_clamp": 20.0}


def _dppo(cfg, traps):
    kind = str(cfg[_A + "dppo.dppo_type"])
    if kind not in ("binary_tv", "binary_kl"):
        raise BadInput(
            f"config key {_A}dppo.dppo_type = {kind!r}: binary_tv or binary_kl"
        )
    lo = number(cfg, _A + "dppo.delta_low", positive=True)
    hi = number(cfg, _A + "dppo.delta_high", positive=True)
    if lo != hi:
        traps.append(
            f"asymmetric delta {lo:g}/{hi:g}: the registry rule takes one delta "
            f"({lo:g}, the A<0 side)"
        )
    return {"delta": lo}


def _reduction(cfg, traps, fails):
    name = str(cfg[_A + "loss_reduction"])
    if name == "seq_mean_token_sum_norm":
        max_len = number(cfg, _A + "max_seq_len", positive=True)
        if max_len is None:
            fails.append("loss_reduction seq_mean_token_sum_norm needs max_seq_len")
        return name, Reduction(
            "seq_mean_token_sum_norm",
            count_empty=True,
            max_len=None if max_len is None else int(max_len),
        )
    if name not in _REDUCTIONS:
        raise BadInput(
            f"config key {_A}loss_reduction = {name!r}: one of "
            f"{', '.join([*_REDUCTIONS, 'seq_mean_token_sum_norm'])}"
        )
    traps.append(
        f"{name} is applied per mini-batch by rescaling the advantages: the "
        "denominators are the mini-batch's, not the whole batch's"
        + (
            "; token_mean_legacy also normalises each micro-batch by its own token "
            "count and averages the micro-batches"
            if name == "token_mean_legacy"
            else ""
        )
    )
    return name, _REDUCTIONS[name]


def _tis(cfg):
    kind = cfg[_OPC + "tis_ratio_type"]
    if absent(kind) and flag(cfg, _A + "use_tis"):
        cap = number(cfg, _A + "tis_imp_ratio_cap")
        return entry("tis_token", {"cap": cap}, "deprecated use_tis")
    if absent(kind):
        return None
    if str(kind) not in ("token", "sequence"):
        raise BadInput(f"config key {_OPC}tis_ratio_type = {kind!r}: token or sequence")
    cap = number(cfg, _OPC + f"{kind}_tis_ratio_clip_high", positive=True)
    return entry(f"tis_{kind}", {"cap": cap}, "")


def _masks(cfg):
    out = []
    metric = cfg[_OPC + "sequence_mask_metric"]
    if not absent(metric):
        kind = {"geometric": "geo", "product": "product"}.get(str(metric))
        if kind is None:
            raise BadInput(
                f"config key {_OPC}sequence_mask_metric = {metric!r}: product or "
                "geometric"
            )
        lo = number(cfg, _OPC + f"{kind}_mask_low", positive=True)
        hi = number(cfg, _OPC + f"{kind}_mask_high", positive=True)
        name = "geo_mask_sequence" if kind == "geo" else "product_mask_sequence"
        out.append(entry(name, {"low": lo, "high": hi}, ""))
    out += _outlier(cfg)
    lo = number(cfg, _OPC + "token_mask_is_threshold_low")
    hi = number(cfg, _OPC + "token_mask_is_threshold_high")
    if lo is not None and hi is not None:
        out.append(
            entry(
                "token_mask", {"low": lo, "high": hi}, "tokens outside masked, weight 1"
            )
        )
    return out


def _outlier(cfg):
    lo = number(cfg, _OPC + "outlier_token_is_threshold_low")
    hi = number(cfg, _OPC + "outlier_token_is_threshold_high")
    if lo is None and hi is None:
        return []
    params = {k: v for k, v in (("low", lo), ("high", hi)) if v is not None}
    return [
        entry(
            "outlier_sequence",
            params,
            "a whole sequence rejected when any token ratio is outside",
        )
    ]


def _mask_traps(cfg, corrections, traps):
    names = {c["correction"] for c in corrections}
    lo = cfg[_OPC + "token_mask_is_threshold_low"]
    hi = cfg[_OPC + "token_mask_is_threshold_high"]
    if absent(lo) != absent(hi):
        traps.append(
            "token_mask_is_threshold_low/high: only one is set, and SkyRL applies the "
            "per-token mask only when both are: no token is masked"
        )
    if "outlier_sequence" in names:
        traps.append(
            "outlier_token_is_threshold_*: one token outside rejects its whole "
            "sequence (a sequence-level mask, unlike token_mask_is_threshold_*)"
        )
    if {"token_mask", "tis_token"} <= names:
        traps.append(
            "token_mask_is_threshold_* with token TIS: masked tokens get weight 0, "
            "the others min(rho, cap): both act on the same ratio"
        )


def _cispo_anchor(cfg, loss, corrections, fails, traps):
    anchor = str(cfg[_A + "cispo.cispo_anchor"])
    if anchor not in ("old", "rollout"):
        raise BadInput(
            f"config key {_A}cispo.cispo_anchor = {anchor!r}: old or rollout"
        )
    if loss != "cispo" or anchor == "old":
        return A_OLD
    if any(c["correction"].startswith("tis_") for c in corrections):
        fails.append(
            "cispo_anchor=rollout with off_policy_correction TIS: the ratio is "
            "already pi/pi_rollout and TIS would count the mismatch twice (SkyRL "
            "raises at the first loss)"
        )
        traps.append(
            "cispo_anchor=rollout with TIS on: the rollout-trainer mismatch is "
            "double-counted (r = pi/pi_rollout, times min(pi_old/pi_rollout, cap)); "
            "SkyRL refuses it"
        )
    return A_ROLLOUT


def _advantage(cfg, traps):
    est = str(cfg[_A + "advantage_estimator"])
    text = ADVANTAGES.get(est, "registered outside SkyRL core; not modelled")
    if est == "grpo" and not flag(cfg, _A + "grpo_norm_by_std"):
        text = "R - mean_g per prompt group (grpo_norm_by_std=False: Dr. GRPO)"
    if est == "maxrl":
        traps.append(
            "maxrl divides by the group's mean reward + 1e-6: a group with mean "
            "reward near 0 (one success in many) gets advantages up to ~1e6 x larger"
        )
    if flag(cfg, _A + "advantage_batch_normalize"):
        text += ", then whitened over the batch"
    return {"estimator": est, "text": text}


def _extra_terms(cfg, red):
    out = []
    if flag(cfg, _A + "use_kl_loss"):
        out.append(
            kl_term(
                number(cfg, _A + "kl_loss_coef"),
                cfg[_A + "kl_estimator_type"],
                red,
                "use_kl_loss defaults to true in SkyRL",
            )
        )
    if flag(cfg, _A + "use_entropy_loss"):
        out.append(entropy_term(number(cfg, _A + "entropy_loss_coef")))
    return out


def resolve(flat: dict, version: str) -> dict:
    """Rule, reduction, advantage, corrections and traps of a SkyRL config."""
    cfg = {**DEFAULTS, **{k: v for k, v in flat.items() if k in DEFAULTS}}
    traps, fails = [], []
    alien = sorted(k for k in flat if k.startswith(_A) and k not in _FIELDS)
    if alien:
        traps.append(
            f"{', '.join(alien)}: not fields of SkyRL's algorithm config: the stock "
            "entry point (skyrl.train.entrypoints.main_base) refuses them at startup; "
            "only an entry point with its own config class (as the DAPO example's "
            "main_dapo.py for overlong_buffer_*) accepts them; not interpreted"
        )
    loss = str(cfg[_A + "policy_loss_type"])
    if loss not in _RULES:
        traps.append(
            f"policy_loss_type {loss!r} is not a built-in loss of {version} (built-in: "
            f"{', '.join(_RULES)}): it runs only if registered in code "
            "(PolicyLossRegistry), else SkyRL refuses it; its rule is not modelled"
        )
    params = _params(loss, cfg, traps)
    rule = _RULES.get(loss)
    if loss == "dppo" and cfg[_A + "dppo.dppo_type"] == "binary_kl":
        rule = "dppo_binary_kl"
    red_name, reduction = _reduction(cfg, traps, fails)
    tis = _tis(cfg)
    corrections = ([tis] if tis else []) + _masks(cfg)
    _mask_traps(cfg, corrections, traps)
    anchor = _cispo_anchor(cfg, loss, corrections, fails, traps)
    if loss in ("rollout_is", "dppo"):
        anchor = A_ROLLOUT
    traps += [f"this config fails on SkyRL a956457: {f}" for f in fails]
    read = sorted(k for k in flat if k in DEFAULTS)
    return {
        "rule": rule,
        "loss_mode": loss,
        "params": params,
        "reduction_name": red_name,
        "reduction": reduction,
        "per_micro_batch": red_name == "token_mean_legacy",
        "delta": params.get("delta"),
        "cap": params.get("high") if rule == "cispo" else None,
        "anchor": anchor,
        "advantage": _advantage(cfg, traps),
        "corrections": corrections,
        "extra_terms": _extra_terms(cfg, red_name),
        "fails_at_startup": fails,
        "traps": traps,
        "read": read,
        "skipped": {
            **settle(flat, read, _WHY, "not modelled by the resolver"),
            **{k: "not a field of SkyRL's algorithm config" for k in alien},
        },
    }

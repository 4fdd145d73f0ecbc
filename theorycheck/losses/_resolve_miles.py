"""What a Miles launch computes (radixark/miles 31f1ca9, 2026-08-21).

Miles is configured by argparse flags (``miles/utils/arguments.py``), passed on a
command line or in a launch script: the file holds the flags as a user passes them
(``--eps-clip 0.2``, ``--eps-clip-high=0.28``, ``--use-tis``; comments, line
continuations and other words are ignored). Semantics from
``miles/backends/training_utils/loss_hub/losses.py`` (``policy_loss_function``),
``corrections.py`` (``vanilla_tis_function``) and ``loss.py`` (``sum_of_sample_mean``).
"""

from __future__ import annotations

import shlex
from pathlib import Path

from theorycheck._errors import BadInput
from theorycheck.losses._presets import A_OLD, A_ROLLOUT, V_MILES
from theorycheck.losses._reductions import Reduction
from theorycheck.losses._resolve_common import (
    entropy_term,
    entry,
    kl_term,
    number,
    opsm,
    settle,
    single_version,
)

FRAMEWORK = "miles"
VERSIONS, DEFAULT, version_of = single_version(FRAMEWORK, "31f1ca9", V_MILES)

#: flags that take no value (store_true / store_false in arguments.py).
SWITCHES = frozenset(
    "use-tis use-kl-loss use-rollout-logprobs normalize-advantages "
    "calculate-per-token-loss use-opsm get-mismatch-metrics use-unbiased-kl "
    "disable-grpo-std-normalization disable-rewards-normalization keep-old-actor "
    "use-routing-replay use-rollout-routing-replay".split()
)
#: value flags read, with their defaults.
DEFAULTS = {
    "advantage-estimator": "grpo",
    "loss-type": "policy_loss",
    "eps-clip": 0.2,
    "eps-clip-high": None,
    "eps-clip-c": None,
    "tis-clip": 2.0,
    "tis-clip-low": 0.0,
    "custom-tis-function-path": None,
    "custom-pg-loss-reducer-function-path": None,
    "kl-coef": 0.0,
    "kl-loss-coef": 0.0,
    "kl-loss-type": "k1",
    "entropy-coef": 0.0,
    "opsm-delta": 1e-4,
    **{s: False for s in SWITCHES},
}
_ESTIMATORS = {
    "grpo": "(R - mean_g) / (std_g + 1e-6) per prompt group",
    "gspo": "GRPO's: (R - mean_g) / (std_g + 1e-6) per prompt group",
    "reinforce_plus_plus": "discounted returns, whitened over the batch",
    "reinforce_plus_plus_baseline": "R - mean_g, whitened over the batch",
    "ppo": "GAE with the critic's values",
}
_WHY = (
    ("hf-checkpoint", "model loading"),
    ("load", "checkpoint loading"),
    ("save", "checkpointing"),
    ("lr", "optimizer: scales the step, not the per-token weights"),
    ("rollout-", "inference engine and sampling: changes the rollout, not the loss"),
    ("n-samples-per-prompt", "group size: read from the batch, not the config"),
    ("global-batch-size", "batch size: the sample_mean denominator, set per batch"),
    ("tensor-model-parallel", "parallelism"),
    ("pipeline-model-parallel", "parallelism"),
    ("context-parallel", "parallelism"),
    ("use-wandb", "logging"),
    ("wandb-", "logging"),
)


def looks_like(flat) -> bool:
    """Miles flag names."""
    return "advantage-estimator" in flat or "eps-clip" in flat


def is_flag_file(path) -> bool:
    """A launch script or flag list rather than YAML/JSON."""
    p = Path(path)
    if p.suffix in (".sh", ".txt", ".args", ".flags"):
        return True
    try:
        words = p.read_text().split()
    except (OSError, UnicodeDecodeError):
        return False
    return any(w.startswith("--") for w in words[:200])


def parse_flags(words) -> dict:
    """``--name value`` / ``--name=value`` / ``--switch`` words -> ``{name: value}``."""
    out, i = {}, 0
    while i < len(words):
        w = words[i]
        i += 1
        if not w.startswith("--") or w == "--":
            continue
        name, eq, value = w[2:].partition("=")
        if eq:
            out[name] = value
        elif name in SWITCHES:
            out[name] = True
        elif i < len(words) and not words[i].startswith("--"):
            out[name] = words[i]
            i += 1
        else:
            out[name] = True
    return out


def load_flags(path, overrides=()) -> dict:
    """The flags of a Miles launch file, with ``overrides`` applied last.

    Raises:
        BadInput: the file is missing or unreadable, or not shell words.
    """
    p = Path(path)
    if not p.is_file():
        raise BadInput(f"config {str(path)!r}: no such file")
    try:
        text = p.read_text().replace("\\\n", " ")
        words = shlex.split(text, comments=True)
    except (OSError, UnicodeDecodeError, ValueError) as err:
        raise BadInput(f"config {str(path)!r}: unreadable flags ({err})") from None
    extra = [o if o.startswith("--") else "--" + o for o in overrides]
    return {**parse_flags(words), **parse_flags(extra)}


def _on(cfg, name):
    v = cfg[name]
    return v is True or (isinstance(v, str) and v.lower() in ("true", "1"))


def _params(cfg, traps):
    lo = number(cfg, "eps-clip")
    hi = number(cfg, "eps-clip-high")
    hi = lo if hi is None else hi
    c = number(cfg, "eps-clip-c")
    est = str(cfg["advantage-estimator"])
    if est == "gspo":
        traps.append(
            "--advantage-estimator gspo switches the loss to GSPO (sequence ratio "
            "exp(mean log ratio), clipped per token); the advantage stays GRPO's"
        )
        return "gspo_token", {"eps_low": lo, "eps_high": hi}
    if c is not None:
        return "dual_clip", {"eps_low": lo, "eps_high": hi, "kappa": c,
                             "log_ratio_clamp": 20.0}  # fmt: skip
    return "ppo", {"eps_low": lo, "eps_high": hi, "log_ratio_clamp": 20.0}


def _corrections(cfg, traps, fails):
    out = []
    if _on(cfg, "use-tis") or _on(cfg, "get-mismatch-metrics"):
        out.append(_tis(cfg))
        traps.append(
            "with TIS/rejection the loss denominators stay the pre-rejection mask "
            "sums (rollout_mask_sums): a token rejected by the TIS function still "
            "counts in its sample's length and the batch size"
        )
    if _on(cfg, "use-opsm"):
        out.append(opsm(number(cfg, "opsm-delta", positive=True)))
    if _on(cfg, "use-rollout-logprobs") and _on(cfg, "use-tis"):
        fails.append("--use-rollout-logprobs with --use-tis (Miles asserts)")
    if _on(cfg, "get-mismatch-metrics") and cfg["custom-tis-function-path"] is None:
        fails.append("--get-mismatch-metrics needs --custom-tis-function-path")
    return out


def _tis(cfg):
    custom = cfg["custom-tis-function-path"]
    if custom is not None:
        return {
            "correction": "custom",
            "params": {},
            "applied": True,
            "text": f"custom TIS/RS function {custom} (not modelled)",
        }
    cap = number(cfg, "tis-clip", positive=True)
    low = number(cfg, "tis-clip-low")
    if not low:
        return entry("tis_token", {"cap": cap})
    return entry(
        "tis_token_clamped", {"low": low, "high": cap}, "a floor as well as a cap"
    )


def _advantage(cfg, fails):
    est = str(cfg["advantage-estimator"])
    if est not in _ESTIMATORS:
        raise BadInput(
            f"config flag --advantage-estimator {est!r}: one of "
            f"{', '.join(_ESTIMATORS)}"
        )
    text = _ESTIMATORS[est]
    if est in ("grpo", "gspo") and _on(cfg, "disable-grpo-std-normalization"):
        text = "R - mean_g per prompt group (std normalisation off: Dr. GRPO)"
    if number(cfg, "kl-coef"):
        text += f"; rewards shaped by - {number(cfg, 'kl-coef'):g} x KL"
    if _on(cfg, "normalize-advantages"):
        text += ", then whitened over the batch"
    elif est.startswith("reinforce_plus_plus"):
        fails.append(f"{est} needs --normalize-advantages (Miles asserts)")
    return {"estimator": est, "text": text}


def _extra_terms(cfg):
    out = []
    if _on(cfg, "use-kl-loss"):
        out.append(kl_term(number(cfg, "kl-loss-coef"), cfg["kl-loss-type"]))
    ent = number(cfg, "entropy-coef")
    if ent:
        out.append(entropy_term(ent))
    return out


def _reduction(cfg, traps):
    if cfg["custom-pg-loss-reducer-function-path"] is not None:
        traps.append("a custom pg-loss reducer replaces the reduction: not modelled")
    if _on(cfg, "calculate-per-token-loss"):
        return "per-token loss (sum / token count)", Reduction("token_mean")
    return "sample mean (sum_of_sample_mean)", Reduction(
        "sample_mean", count_empty=True
    )


def resolve(flat: dict, version: str) -> dict:
    """Rule, reduction, advantage, corrections and traps of Miles flags."""
    shell = {k for k, v in flat.items() if isinstance(v, str) and "$" in v}
    cfg = {
        **DEFAULTS,
        **{k: v for k, v in flat.items() if k in DEFAULTS and k not in shell},
    }
    traps, fails = [], []
    lt = str(cfg["loss-type"])
    if lt != "policy_loss":
        raise BadInput(f"config flag --loss-type {lt!r}: only policy_loss is resolved")
    rule, params = _params(cfg, traps)
    advantage = _advantage(cfg, fails)
    red_name, reduction = _reduction(cfg, traps)
    corrections = _corrections(cfg, traps, fails)
    traps += [f"this launch fails on Miles 31f1ca9: {f}" for f in fails]
    read = sorted(k for k in flat if k in DEFAULTS and k not in shell)
    skipped = settle(flat, set(read) | shell, _WHY, "not modelled by the resolver")
    skipped.update({k: f"shell variable {flat[k]!r}: pass its value" for k in shell})
    return {
        "rule": rule,
        "loss_mode": str(cfg["advantage-estimator"]),
        "params": params,
        "reduction_name": red_name,
        "reduction": reduction,
        "per_micro_batch": False,
        "delta": None,
        "cap": None,
        "anchor": A_ROLLOUT if _on(cfg, "use-rollout-logprobs") else A_OLD,
        "advantage": advantage,
        "corrections": corrections,
        "extra_terms": _extra_terms(cfg),
        "fails_at_startup": fails,
        "traps": traps,
        "read": read,
        "skipped": dict(sorted(skipped.items())),
    }

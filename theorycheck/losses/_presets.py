"""Framework presets: (rule with the framework's defaults, reduction as it computes it).

Read from source at the commits listed in the research notes (peers.md): verl
``b178a3c`` (2026-01-29), SkyRL ``a956457``, TRL ``f2cd577``, Miles ``31f1ca9``. Where
frameworks use one name for different computations, :data:`REDUCTION_VARIANTS` and
:data:`RULE_VARIANTS` hold each framework's version so that the ``conventions`` command
can show the difference numerically (peers.md §5).
"""

from __future__ import annotations

import dataclasses
import math
import types
from collections.abc import Mapping

from theorycheck.losses._reductions import Reduction

NO_CLAMP = math.inf


@dataclasses.dataclass(frozen=True)
class Preset:
    """One framework's default policy loss.

    Attributes:
        name: snake_case preset name.
        framework: framework and code path, for tables.
        rule: registry name of the token rule.
        params: the rule's hyperparameters as the framework sets them by default.
        reduction: the reduction (``micro_batch_size`` filled per batch when
            ``per_micro_batch``).
        reduction_name: the framework's own name for it.
        per_micro_batch: denominators are local to each micro-batch.
        notes: what differs from the registry entry's defaults, and why.
    """

    name: str
    framework: str
    rule: str
    params: Mapping[str, float]
    reduction: Reduction
    reduction_name: str
    per_micro_batch: bool = False
    notes: str = ""

    def reduction_for(
        self, micro_batch_size: int | None, max_len: int | None
    ) -> Reduction:
        """The reduction with this batch's micro-batch size and L_max filled in."""
        return dataclasses.replace(
            self.reduction,
            micro_batch_size=micro_batch_size if self.per_micro_batch else None,
            max_len=max_len
            if self.reduction.mode == "seq_mean_token_sum_norm"
            else None,
        )


_PPO = {"eps_low": 0.2, "eps_high": 0.2}
_DUAL = {**_PPO, "kappa": 3.0, "log_ratio_clamp": 20.0}

_PRESETS = (
    Preset(
        "verl_legacy",
        "verl, legacy worker (default)",
        "dual_clip",
        _DUAL,
        Reduction("token_mean"),
        "token-mean",
        per_micro_batch=True,
        notes="vanilla applies dual-clip always (clip_ratio_c = 3, no switch); "
        "token-mean is a mean of micro-batch token means",
    ),
    Preset(
        "verl",
        "verl, new engine",
        "dual_clip",
        _DUAL,
        Reduction("token_mean"),
        "token-mean",
        notes="global_batch_info makes token-mean a global token mean",
    ),
    Preset(
        "skyrl",
        "SkyRL",
        "ppo",
        {**_PPO, "log_ratio_clamp": 20.0},
        Reduction("token_mean"),
        "token_mean",
        notes="'regular' has no dual-clip; the reduction is folded into the "
        "advantages per mini-batch",
    ),
    Preset(
        "trl_grpo",
        "TRL loss_type=grpo",
        "ppo",
        {**_PPO, "log_ratio_clamp": NO_CLAMP},
        Reduction("seq_mean_token_mean", count_empty=True),
        "grpo",
        per_micro_batch=True,
        notes="no log-ratio clamp; mean of local sequence means / grad_accum",
    ),
    Preset(
        "trl_bnpo",
        "TRL loss_type=bnpo",
        "ppo",
        {**_PPO, "log_ratio_clamp": NO_CLAMP},
        Reduction("token_mean"),
        "bnpo",
        per_micro_batch=True,
        notes="mean over micro-batches of local token means",
    ),
    Preset(
        "trl_dr_grpo",
        "TRL loss_type=dr_grpo",
        "ppo",
        {**_PPO, "log_ratio_clamp": NO_CLAMP},
        Reduction("seq_mean_token_sum_norm", count_empty=True),
        "dr_grpo",
        per_micro_batch=True,
        notes="sum / (B_local * max_completion_length) / grad_accum "
        "(max_completion_length defaults to 512)",
    ),
    Preset(
        "trl_dapo",
        "TRL loss_type=dapo (default)",
        "ppo",
        {**_PPO, "log_ratio_clamp": NO_CLAMP},
        Reduction("token_mean"),
        "dapo",
        notes="'dapo' names only the global token mean: epsilon_high defaults to "
        "epsilon = 0.2, so there is no clip-higher unless it is set to 0.28",
    ),
    Preset(
        "miles",
        "Miles",
        "ppo",
        {**_PPO, "log_ratio_clamp": 20.0},
        Reduction("sample_mean", count_empty=True),
        "sample mean",
        notes="dual-clip only with --eps-clip-c (default off); per-rollout token "
        "mean divided by the global batch size, removed samples included",
    ),
)

#: preset name -> Preset, read-only.
PRESETS = types.MappingProxyType({p.name: p for p in _PRESETS})

#: reductions that share a name across frameworks but are computed differently:
#: name -> ((framework code path, Reduction, per_micro_batch), ...).
REDUCTION_VARIANTS = types.MappingProxyType(
    {
        "token-mean": (
            ("verl legacy token-mean", Reduction("token_mean"), True),
            ("verl new-engine token-mean", Reduction("token_mean"), False),
            ("SkyRL token_mean", Reduction("token_mean"), False),
            ("SkyRL token_mean_legacy", Reduction("token_mean"), True),
            ("TRL dapo", Reduction("token_mean"), False),
            ("TRL bnpo", Reduction("token_mean"), True),
        ),
        "seq-mean-token-mean": (
            ("verl seq-mean-token-mean", Reduction("seq_mean_token_mean"), True),
            (
                "SkyRL sequence_mean",
                Reduction("seq_mean_token_mean", count_empty=True),
                False,
            ),
            ("TRL grpo", Reduction("seq_mean_token_mean", count_empty=True), True),
            ("Miles sample mean", Reduction("sample_mean", count_empty=True), False),
        ),
        "seq-mean-token-sum-norm (Dr. GRPO)": (
            (
                "verl seq-mean-token-sum-norm",
                Reduction("seq_mean_token_sum_norm", divide_by_sequences=False),
                True,
            ),
            (
                "verl new-engine seq-mean-token-sum-norm",
                Reduction("seq_mean_token_sum_norm", divide_by_sequences=False),
                False,
            ),
            (
                "SkyRL seq_mean_token_sum_norm",
                Reduction("seq_mean_token_sum_norm", count_empty=True),
                False,
            ),
            (
                "TRL dr_grpo",
                Reduction("seq_mean_token_sum_norm", count_empty=True),
                True,
            ),
        ),
    }
)

#: rules that share a name across frameworks but not their defaults:
#: topic -> (registry rule, ((framework, params), ...), probe (p, q, adv) points).
RULE_VARIANTS = types.MappingProxyType(
    {
        "cispo window": (
            "cispo",
            (
                ("survey experiment", {"low": 0.5, "high": 5.0}),
                ("verl cispo (clip_ratio 0.2/0.2)", {"low": 0.8, "high": 1.2}),
                ("SkyRL cispo (1.0/4.0)", {"low": 0.0, "high": 5.0}),
                ("TRL cispo, epsilon_high unset", {"low": 0.0, "high": 0.2}),
                ("TRL cispo, epsilon_high = 5", {"low": 0.0, "high": 5.0}),
            ),
            ((0.3, 0.1, 1.0), (0.6, 0.5, 1.0), (0.05, 0.5, 1.0)),
        ),
        "ppo dual-clip": (
            "dual_clip",
            (
                ("verl vanilla (always on)", {"kappa": 3.0}),
                ("SkyRL regular / Miles / TRL (off)", {"kappa": math.inf}),
            ),
            ((0.4, 0.1, -1.0), (0.8, 0.1, -1.0)),
        ),
        "dppo threshold and cap": (
            "dppo_capped",
            (
                ("survey (delta 0.15, uncapped)", {"delta": 0.15, "cap": math.inf}),
                ("SkyRL dppo (delta 0.2, uncapped)", {"delta": 0.2, "cap": math.inf}),
                ("verl upstream (clip_ratio 0.2, cap 3)", {"delta": 0.2, "cap": 3.0}),
                (
                    "Stable-RL as shipped (clip_ratio 0.2, clip_ratio_c 3)",
                    {"delta": 0.2, "cap": 3.0},
                ),
                (
                    "DPPO paper values (delta 0.15, cap 10 = code fallback)",
                    {"delta": 0.15, "cap": 10.0},
                ),
            ),
            ((0.74, 0.90, -1.0), (0.05, 0.01, 1.0)),
        ),
        "glm5 / rollout_is window": (
            "glm5",
            (
                ("survey experiment", {"low": 0.5, "high": 5.0}),
                ("SkyRL rollout_is (eps 0.2/0.2)", {"low": 0.8, "high": 1.2}),
            ),
            ((0.6, 0.5, 1.0), (0.3, 0.5, -1.0)),
        ),
    }
)

#: known differences that are not a number on a batch (peers.md §5).
FINDINGS = (
    "dual-clip: verl 'vanilla' always applies it (c = 3, no switch); SkyRL only under "
    "'dual_clip'; Miles only with --eps-clip-c; TRL has none ('delta' >= 1 + "
    "epsilon_high is equivalent)",
    "CISPO window: verl [0.8, 1.2] two-sided; SkyRL [0, 5]; TRL (0, epsilon_high] "
    "absolute, falling back to 0.2 when epsilon_high is unset",
    "log-ratio clamp +-20: verl vanilla/sapo/cispo, SkyRL, Miles; none in TRL "
    "token-level; GSPO clamps log s at max 10 in verl/SkyRL, not in TRL/Miles",
    "DPPO: SkyRL -r A m (r not detached, uncapped, delta 0.2/0.2); verl upstream "
    "-sg(min(r, c)) A m log pi with delta read from clip_ratio and c = clip_ratio_c = "
    "3; Stable-RL ships the same (actor config clip_ratio 0.2, clip_ratio_c 3.0; 10 "
    "is only the fallback of config.get('clip_ratio_c', 10.0))",
    "verl new engine (use_legacy_worker_impl=disable): token-mean divides by the "
    "global token count; Dr. GRPO weighs every token 1/T with no division over "
    "micro-batches or sequences; its seq-mean-token-mean (global_batch_size) is not "
    "modelled here",
    "Dr. GRPO: verl divides by L only (no division by the number of sequences), "
    "SkyRL and TRL by B * L_max: a factor of the micro-batch size apart",
    "empty responses: verl's seq-mean excludes fully-masked rows; SkyRL, TRL and Miles "
    "count them",
    "GLM-5 / IcePop: SkyRL rollout_is uses the open window (strict); SkyRL token mask "
    "and Miles icepop use closed intervals; verl token_k1 bounds the inverse ratio",
    "TRL loss_type 'dapo' is only a reduction; clip-higher needs epsilon_high = 0.28",
)

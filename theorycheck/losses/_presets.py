"""Framework presets: (rule with the framework's defaults, reduction as it computes it).

Each preset names the version range it describes (``version``: repository, commits and
dates) and the policy its ratio is anchored on (``anchor``). Read from source at:
verl-project/verl ``1dda039`` (2026-08-22; verl moved there from volcengine/verl, whose
snapshot ends at ``b178a3c``, 2026-01-29), SkyRL ``a956457`` (2026-08-21), TRL
``f2cd577`` (2026-07-24), Miles ``31f1ca9`` (2026-08-21), Stable-RL ``c6af1d1``
(2026-03-02). Where frameworks, or two versions of one framework, use one name for
different computations, :data:`REDUCTION_VARIANTS` and :data:`RULE_VARIANTS` hold each
version so that the ``conventions`` command can show the difference numerically.
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
    """One framework's default policy loss, for one version range.

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
        version: the repository, commits and dates the preset describes.
        anchor: the log-probability the ratio r = pi / mu is taken against.
    """

    name: str
    framework: str
    rule: str
    params: Mapping[str, float]
    reduction: Reduction
    reduction_name: str
    per_micro_batch: bool = False
    notes: str = ""
    version: str = ""
    anchor: str = ""

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

#: version ranges (repository, commit, date).
VERL_NOW = "verl-project/verl 1dda039 (2026-08-22)"
VERL_OLD = "volcengine/verl b178a3c (2026-01-29)"
V_VERL_ENGINE = (
    "verl-project/verl 63e8a0d (#5604, 2026-03-26: new engine the default) to "
    + VERL_NOW
)
V_VERL_DR = (
    "verl-project/verl b8d91ef (#5366 2026-02-24, #5417 2026-02-26: seq-mean "
    "added) to " + VERL_NOW
)
V_VERL_LEGACY = (
    "up to " + VERL_OLD + "; default until verl-project/verl 63e8a0d (#5604, "
    "2026-03-26), removed in 044bbba (#6067, 2026-04-20)"
)
V_VERL_DPPO = (
    "verl-project/verl 182383b (#5397, 2026-02-26) to " + VERL_NOW + "; example "
    "examples/dppo_trainer/run_qwen3_30b_a3b_megatron.sh"
)
V_SKYRL = "NovaSky-AI/SkyRL a956457 (2026-08-21)"
V_TRL = "huggingface/trl f2cd577 (2026-07-24)"
V_MILES = "radixark/miles 31f1ca9 (2026-08-21)"
V_STABLE = "sail-sg/Stable-RL c6af1d1 (2026-03-02)"

A_OLD = "old_log_prob (recomputed before the update)"
A_VERL_DPPO = "old_log_prob (recomputed) unless rollout_correction.bypass_mode"
A_ROLLOUT = "rollout log-prob (inference engine)"
A_TRL = "old_per_token_logps (sg(log pi) when num_iterations = 1)"

_VERL_SUM_NORM = Reduction("seq_mean_token_sum_norm", count_empty=True)
_VERL_SEQ_MEAN = Reduction("seq_mean_token_mean", count_empty=True, length_eps=1e-8)

_PRESETS = (
    Preset(
        "verl",
        "verl, new engine (default since 2026-03-26)",
        "dual_clip",
        _DUAL,
        Reduction("token_mean"),
        "token-mean",
        notes="global_batch_info makes token-mean a global token mean",
        version=V_VERL_ENGINE,
        anchor=A_OLD,
    ),
    Preset(
        "verl_dr_grpo",
        "verl, new engine, Dr. GRPO",
        "dual_clip",
        _DUAL,
        _VERL_SUM_NORM,
        "seq-mean-token-sum-norm",
        notes="sum / (global_batch_size * T): global_batch_size = "
        "ppo_mini_batch_size * rollout.n counts every row, empty ones included "
        "(1/(B T) per token, as SkyRL)",
        version=V_VERL_DR,
        anchor=A_OLD,
    ),
    Preset(
        "verl_seq_mean",
        "verl, new engine, seq-mean-token-mean",
        "dual_clip",
        _DUAL,
        _VERL_SEQ_MEAN,
        "seq-mean-token-mean",
        notes="divides each response by L + 1e-8 and by global_batch_size, which "
        "counts empty rows",
        version=V_VERL_ENGINE,
        anchor=A_OLD,
    ),
    Preset(
        "verl_legacy",
        "verl, legacy worker (removed 2026-04-20)",
        "dual_clip",
        _DUAL,
        Reduction("token_mean"),
        "token-mean",
        per_micro_batch=True,
        notes="vanilla applies dual-clip always (clip_ratio_c = 3, no switch); "
        "token-mean is a mean of micro-batch token means",
        version=V_VERL_LEGACY,
        anchor=A_OLD,
    ),
    Preset(
        "verl_dppo_tv",
        "verl dppo_tv, shipped example",
        "dppo_capped",
        {"delta": 0.15, "cap": 1e4, "log_ratio_clamp": 20.0},
        _VERL_SUM_NORM,
        "seq-mean-token-sum-norm",
        notes="clip_ratio_low/high = 0.15 read as the TV threshold; "
        "clip_ratio_c = 1e4 (effectively uncapped)",
        version=V_VERL_DPPO,
        anchor=A_VERL_DPPO,
    ),
    Preset(
        "verl_dppo_kl",
        "verl dppo_kl, shipped example",
        "dppo_binary_kl_capped",
        {"delta": 0.05, "cap": 1e4, "log_ratio_clamp": 20.0},
        _VERL_SUM_NORM,
        "seq-mean-token-sum-norm",
        notes="clip_ratio_low/high = 0.05 read as the binary-KL threshold; "
        "clip_ratio_c = 1e4",
        version=V_VERL_DPPO,
        anchor=A_VERL_DPPO,
    ),
    Preset(
        "stable_rl_dppo",
        "Stable-RL dppo_binary_tv (actor defaults)",
        "dppo_capped",
        {"delta": 0.2, "cap": 3.0, "log_ratio_clamp": 20.0},
        Reduction("token_mean"),
        "token-mean",
        per_micro_batch=True,
        notes="delta from clip_ratio (0.2), cap clip_ratio_c = 3 (actor.yaml; 10 is "
        "only the fallback of config.get); the log ratio is clamped at +20 only; "
        "the _recompute modes anchor on old_log_prob",
        version=V_STABLE,
        anchor=A_ROLLOUT,
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
        version=V_SKYRL,
        anchor=A_OLD,
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
        version=V_TRL,
        anchor=A_TRL,
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
        version=V_TRL,
        anchor=A_TRL,
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
        version=V_TRL,
        anchor=A_TRL,
    ),
    Preset(
        "trl_dapo",
        "TRL loss_type=dapo (default)",
        "ppo",
        {**_PPO, "log_ratio_clamp": NO_CLAMP},
        Reduction("token_mean"),
        "dapo",
        notes="a global token mean only while steps_per_generation equals "
        "gradient_accumulation_steps (the default): num_items_in_batch counts the "
        "tokens of the whole generation batch; 'dapo' names only the reduction: "
        "epsilon_high defaults to epsilon = 0.2, no clip-higher unless set to 0.28",
        version=V_TRL,
        anchor=A_TRL,
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
        version=V_MILES,
        anchor=A_OLD + "; rollout log-prob with --use-rollout-logprobs",
    ),
)

#: preset name -> Preset, read-only.
PRESETS = types.MappingProxyType({p.name: p for p in _PRESETS})

#: reductions that share a name across frameworks (or verl versions) but are computed
#: differently: name -> ((framework code path, Reduction, per_micro_batch), ...).
REDUCTION_VARIANTS = types.MappingProxyType(
    {
        "token-mean": (
            (
                "verl legacy worker token-mean (to 2026-04-20)",
                Reduction("token_mean"),
                True,
            ),
            ("verl new-engine token-mean", Reduction("token_mean"), False),
            ("SkyRL token_mean", Reduction("token_mean"), False),
            ("SkyRL token_mean_legacy", Reduction("token_mean"), True),
            ("TRL dapo", Reduction("token_mean"), False),
            ("TRL bnpo", Reduction("token_mean"), True),
        ),
        "seq-mean-token-mean": (
            (
                "verl legacy worker seq-mean-token-mean (to 2026-04-20)",
                Reduction("seq_mean_token_mean", length_eps=1e-8),
                True,
            ),
            ("verl new-engine seq-mean-token-mean", _VERL_SEQ_MEAN, False),
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
                "verl before 2026-02-26, legacy worker",
                Reduction("seq_mean_token_sum_norm", divide_by_sequences=False),
                True,
            ),
            (
                "verl before 2026-02-26, new engine",
                Reduction("seq_mean_token_sum_norm", divide_by_sequences=False),
                False,
            ),
            (
                "verl 2026-02-26 to 2026-04-20, legacy worker",
                Reduction("seq_mean_token_sum_norm"),
                True,
            ),
            ("verl since 2026-02-26, new engine", _VERL_SUM_NORM, False),
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
                (
                    "verl dppo_tv example (delta 0.15, clip_ratio_c 1e4)",
                    {"delta": 0.15, "cap": 1e4},
                ),
                (
                    "verl dppo_tv, actor defaults (clip_ratio 0.2, clip_ratio_c 3)",
                    {"delta": 0.2, "cap": 3.0},
                ),
                (
                    "Stable-RL as shipped (clip_ratio 0.2, clip_ratio_c 3)",
                    {"delta": 0.2, "cap": 3.0},
                ),
                (
                    "delta 0.15, cap 10 (Stable-RL's config.get fallback; no shipped "
                    "script)",
                    {"delta": 0.15, "cap": 10.0},
                ),
            ),
            ((0.74, 0.90, -1.0), (0.05, 0.01, 1.0), (0.09, 1e-5, 1.0)),
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

#: known differences that are not a number on a batch, each with what changed and when.
FINDINGS = (
    "Dr. GRPO in verl changed on 2026-02-26 (#5366 2026-02-24, #5417 2026-02-26): "
    "seq-mean-token-sum-norm now divides by the number of sequences as well as by T; "
    "the new engine's global_batch_size = ppo_mini_batch_size * rollout.n counts "
    "every row, empty ones included, so each token gets 1/(B T), as SkyRL; before "
    "that (volcengine/verl b178a3c, 2026-01-29) verl divided by T only, a factor of "
    "the micro-batch size above SkyRL and TRL",
    "verl's new engine is the default since 2026-03-26 (#5604) and the legacy worker "
    "was removed on 2026-04-20 (#6067): per-micro-batch denominators (verl_legacy) "
    "describe verl up to then",
    "verl seq-mean-token-mean divides each response by L + 1e-8 (a ~1e-8 relative "
    "gap to max(L, 1) in SAPO and GSPO, which force this mode) and, in the new "
    "engine, by global_batch_size, which counts empty rows; the legacy worker counted "
    "only non-empty rows",
    "dual-clip: verl 'vanilla' always applies it (c = 3, no switch); SkyRL only under "
    "'dual_clip'; Miles only with --eps-clip-c; TRL has none ('delta' >= 1 + "
    "epsilon_high is equivalent)",
    "CISPO window: verl [0.8, 1.2] two-sided; SkyRL [0, 5]; TRL (0, epsilon_high] "
    "absolute, falling back to 0.2 when epsilon_high is unset",
    "log-ratio clamp +-20: verl vanilla/sapo/cispo/dppo, SkyRL, Miles; none in TRL "
    "token-level; GSPO-token clamps log s from above only, at 10, in verl and SkyRL "
    "(the registry's gspo_token follows), none in TRL/Miles",
    "DPPO: verl-project/verl added dppo_tv and dppo_kl on 2026-02-26 (#5397): "
    "-sg(min(r, c)) A m log pi, delta read from clip_ratio_low/high, c = clip_ratio_c "
    "(actor default 3; the shipped example sets delta 0.15 TV / 0.05 KL, c = 1e4, "
    "seq-mean-token-sum-norm) and the anchor is the recomputed old_log_prob unless "
    "bypass_mode; SkyRL -r A m (r not detached, uncapped, delta 0.2/0.2); Stable-RL "
    "the capped form anchored on the rollout log-prob (clip_ratio 0.2, clip_ratio_c "
    "3; 10 is only the fallback of config.get('clip_ratio_c', 10.0))",
    "Stable-RL's top-K DPPO uses the k_slots support (the sampled token replaces the "
    "K-th slot, the rest one bucket) with delta 0.2 from clip_ratio",
    "TRL removed its experimental DPPO trainer on 2026-07-20 (#6402)",
    "TRL dapo/cispo/vespo divide by num_items_in_batch, the token count of the whole "
    "generation batch (steps_per_generation micro-steps): a global token mean only "
    "while steps_per_generation equals gradient_accumulation_steps",
    "empty responses: verl's legacy seq-mean excluded fully-masked rows; verl's new "
    "engine, SkyRL, TRL and Miles count them",
    "GLM-5 / IcePop: SkyRL rollout_is uses the open window (strict); SkyRL token mask "
    "and Miles icepop use closed intervals; verl token_k1 bounds the inverse ratio",
    "TRL loss_type 'dapo' is only a reduction; clip-higher needs epsilon_high = 0.28",
)

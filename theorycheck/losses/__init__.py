"""The single registry of RL surrogate rules, plus advantages, reductions and presets.

``LOSSES`` maps a snake_case name to a :class:`LossSpec` (JAX loss, SymPy spec,
defaults, reference, analytic coefficient for token rules).
"""

from theorycheck.losses._advantages import (
    Advantages,
    dr_grpo_advantages,
    grpo_advantages,
    rloo_advantages,
)
from theorycheck.losses._audit import (
    AUDITABLE,
    audit_batch,
    audit_corrections,
    check_corrections,
    check_rules,
    load_batch,
    synthetic_batch,
    validate_batch,
)
from theorycheck.losses._audit_weights import (
    apply_to_batch,
    parse_correction,
    reduction_by_name,
    vl_norm,
)
from theorycheck.losses._config import VERSIONS, config_corrections, resolve_config
from theorycheck.losses._conventions import check_batch_shape, conventions_report
from theorycheck.losses._corrections import (
    CORRECTIONS,
    Correction,
    combine,
    corrected_coefficient,
    geo_mask_sequence,
    icepop,
    kl_k1,
    kl_k2,
    kl_k3,
    kl_straight_through,
    mis_sequence,
    mis_token,
    product_mask_sequence,
    reject_kl,
    sequence_ratio_stats,
    tis_sequence,
    tis_token,
)
from theorycheck.losses._dumps import batch_from_dump, load_dump
from theorycheck.losses._gspo import gspo_sequence_loss
from theorycheck.losses._lco import estimate_vocab_adv
from theorycheck.losses._params import (
    check_rule_value,
    get_rule,
    parse_assignments,
    resolve_params,
)
from theorycheck.losses._presets import PRESETS, Preset
from theorycheck.losses._reductions import (
    MODES,
    Reduction,
    reduction_weights,
    sequence_gradient_norms,
)
from theorycheck.losses._registry import LOSSES, TOKEN_RULES
from theorycheck.losses._spec import LossSpec, RuleFamily

__all__ = [
    "AUDITABLE",
    "CORRECTIONS",
    "Correction",
    "combine",
    "corrected_coefficient",
    "geo_mask_sequence",
    "icepop",
    "kl_k1",
    "kl_k2",
    "kl_k3",
    "kl_straight_through",
    "mis_sequence",
    "mis_token",
    "product_mask_sequence",
    "reject_kl",
    "sequence_ratio_stats",
    "tis_sequence",
    "tis_token",
    "LOSSES",
    "MODES",
    "PRESETS",
    "TOKEN_RULES",
    "VERSIONS",
    "Advantages",
    "LossSpec",
    "RuleFamily",
    "Preset",
    "Reduction",
    "audit_batch",
    "audit_corrections",
    "apply_to_batch",
    "batch_from_dump",
    "load_dump",
    "config_corrections",
    "parse_correction",
    "reduction_by_name",
    "check_corrections",
    "check_rule_value",
    "check_rules",
    "check_batch_shape",
    "conventions_report",
    "dr_grpo_advantages",
    "estimate_vocab_adv",
    "get_rule",
    "grpo_advantages",
    "gspo_sequence_loss",
    "load_batch",
    "parse_assignments",
    "reduction_weights",
    "resolve_config",
    "vl_norm",
    "resolve_params",
    "rloo_advantages",
    "sequence_gradient_norms",
    "synthetic_batch",
    "validate_batch",
]

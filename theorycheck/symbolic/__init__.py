"""SymPy-only engine (never imports jax): logit gradients, Hessians, structure."""

from theorycheck.symbolic._cells import fold_cells, piecewise_cells
from theorycheck.symbolic._derive import (
    ProbabilityForm,
    is_transcendental,
    logit_gradient,
    logit_hessian,
    split_exp_log,
    tidy_probability,
    to_probability,
)
from theorycheck.symbolic._frozen import Frozen, unfreeze
from theorycheck.symbolic._softmax import (
    ddot_binary_kl,
    ddot_kl,
    ddot_tv,
    log_softmax,
    softmax,
    softmax_directional_derivative,
)
from theorycheck.symbolic._structure import (
    CrossEntropyFit,
    SampledTokenFit,
    condition_set,
    fit_cross_entropy,
    fit_regression,
    fit_sampled_token,
    is_zero,
    sampled_token_condition,
    sampled_token_hessian,
    sampled_token_identity,
    total_variance_gap,
)

__all__ = [
    "CrossEntropyFit",
    "Frozen",
    "ProbabilityForm",
    "SampledTokenFit",
    "condition_set",
    "ddot_binary_kl",
    "ddot_kl",
    "ddot_tv",
    "fit_cross_entropy",
    "fold_cells",
    "fit_regression",
    "fit_sampled_token",
    "is_transcendental",
    "is_zero",
    "log_softmax",
    "logit_gradient",
    "logit_hessian",
    "piecewise_cells",
    "sampled_token_condition",
    "sampled_token_hessian",
    "sampled_token_identity",
    "softmax",
    "softmax_directional_derivative",
    "split_exp_log",
    "tidy_probability",
    "to_probability",
    "total_variance_gap",
    "unfreeze",
]

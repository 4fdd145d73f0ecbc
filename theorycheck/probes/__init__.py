"""Probes of first-order theory on real updates: NTK-linearization residuals and
gradient-norm bounds (LCO Assumption 4.2, Props. 4.4, 4.7-4.9)."""

from theorycheck.probes._gradnorm import (
    SigmaMax,
    contraction_rate,
    directionality_fn,
    gradient_terms_fn,
    kappa,
    linearized_descent,
    power_iteration_fn,
    sigma_max,
    spikes,
)
from theorycheck.probes._linearization import (
    Linearization,
    TokenInputs,
    crossing_alpha,
    linearization_curve,
    summarize,
    tree_axpy,
    tree_dot,
    tree_norm,
)

__all__ = [
    "Linearization",
    "SigmaMax",
    "TokenInputs",
    "contraction_rate",
    "crossing_alpha",
    "directionality_fn",
    "gradient_terms_fn",
    "kappa",
    "linearization_curve",
    "linearized_descent",
    "power_iteration_fn",
    "sigma_max",
    "spikes",
    "summarize",
    "tree_axpy",
    "tree_dot",
    "tree_norm",
]

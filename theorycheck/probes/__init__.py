"""Probes of the theory on real updates.

Sign agreement of ΔD predictions and the coupled predictive mask: ``run_probe`` follows
a :class:`theorycheck.rl.Trainer`'s schedule and records, per token, the ratio
criterion, the tabular Ḋ (exact and top-K), the NTK-coupled first and second order
change of D from one JVP of the real update, and the realized change; ``analyze_probe``
turns that into agreement / base-rate / balanced-accuracy / unsafe-keep tables and a
failure decomposition; ``coupled_mask`` and ``coupled_update`` are the mask a trainer
can call.

NTK-linearization residuals and gradient-norm bounds (LCO Assumption 4.2, Props. 4.4,
4.7-4.9): ``linearization_curve`` measures how far a real update's logit change is from
its one-JVP linearization over a grid of step scales; ``sigma_max`` (power iteration on
JᵀJ), ``gradient_terms_fn``, ``kappa``, ``directionality_fn`` and
``linearized_descent`` measure the chain-rule bound, its loss-based form, Prop. 4.4's
inner products and the linearized model's descent.
"""

from theorycheck.probes._analysis import PREDICTORS, analyze_probe
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
)
from theorycheck.probes._mask import RULES, coupled_mask, coupled_update
from theorycheck.probes._metrics import (
    ESTIMATORS,
    MASKS,
    TOL,
    mean_se,
    outside,
    sign_metrics,
    signs,
    unsafe_keep,
)
from theorycheck.probes._objective import (
    Targets,
    View,
    objective_fn,
    trainer_apply_fn,
    trainer_view,
    value_and_grad,
)
from theorycheck.probes._probe import run_probe
from theorycheck.probes._taylor import divergences, kl_rows, predict_change, taylor_fn

__all__ = [
    "ESTIMATORS",
    "MASKS",
    "PREDICTORS",
    "RULES",
    "TOL",
    "Linearization",
    "SigmaMax",
    "Targets",
    "TokenInputs",
    "View",
    "analyze_probe",
    "contraction_rate",
    "coupled_mask",
    "coupled_update",
    "crossing_alpha",
    "directionality_fn",
    "divergences",
    "gradient_terms_fn",
    "kappa",
    "kl_rows",
    "linearization_curve",
    "linearized_descent",
    "mean_se",
    "objective_fn",
    "outside",
    "power_iteration_fn",
    "predict_change",
    "run_probe",
    "sigma_max",
    "sign_metrics",
    "signs",
    "spikes",
    "summarize",
    "taylor_fn",
    "trainer_apply_fn",
    "trainer_view",
    "unsafe_keep",
    "value_and_grad",
]

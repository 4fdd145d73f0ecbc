"""Probes of the theory on real updates: sign agreement of ΔD predictions, the
coupled predictive mask.

``run_probe`` follows a :class:`theorycheck.rl.Trainer`'s schedule and records, per
token, the ratio criterion, the tabular Ḋ (exact and top-K), the NTK-coupled first and
second order change of D from one JVP of the real update, and the realized change;
``analyze_probe`` turns that into agreement / base-rate / balanced-accuracy /
unsafe-keep tables and a failure decomposition; ``coupled_mask`` and
``coupled_update`` are the mask a trainer can call.
"""

from theorycheck.probes._analysis import PREDICTORS, analyze_probe
from theorycheck.probes._mask import RULES, coupled_mask, coupled_update
from theorycheck.probes._metrics import TOL, mean_se, sign_metrics, signs, unsafe_keep
from theorycheck.probes._probe import ESTIMATORS, MASKS, run_probe
from theorycheck.probes._taylor import divergences, kl_rows, predict_change, taylor_fn

__all__ = [
    "ESTIMATORS",
    "MASKS",
    "PREDICTORS",
    "RULES",
    "TOL",
    "analyze_probe",
    "coupled_mask",
    "coupled_update",
    "divergences",
    "kl_rows",
    "mean_se",
    "predict_change",
    "run_probe",
    "sign_metrics",
    "signs",
    "taylor_fn",
    "unsafe_keep",
]

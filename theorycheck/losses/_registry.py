"""The single registry of surrogate rules: ``LOSSES`` maps a name to its ``LossSpec``.

Adding a rule means adding one entry below; tests, proofs, experiments and the CLI
iterate ``LOSSES``. Each entry's hyperparameters and their defaults are read from the
keyword defaults of its JAX ``loss`` (one source of truth); tests hold the coefficient's
and the symbolic spec's defaults equal to them. ``smooth`` describes the rule itself:
the log-ratio guard adds kinks at |log r| = ``log_ratio_clamp`` to every ratio rule
(pass ``log_ratio_clamp=inf`` to remove them).
"""

from __future__ import annotations

import inspect
import types

from theorycheck.losses import (
    _cispo_glm5,
    _dppo,
    _dppo_symbolic,
    _gspo,
    _lco,
    _ppo,
    _sapo,
    _trl_modes,
    _verl_modes,
)
from theorycheck.losses._spec import LossSpec

_RATIO = ("adv", "behavior_logp")
_TARGET = ("adv", "old_logits")


def _defaults(loss, inputs, optional_inputs) -> dict[str, float]:
    skip = set(inputs) | set(optional_inputs)
    return {
        name: p.default
        for name, p in inspect.signature(loss).parameters.items()
        if p.kind is p.KEYWORD_ONLY and p.default is not p.empty and name not in skip
    }


def _spec(
    name,
    family,
    module,
    *,
    symbolic_module=None,
    inputs=_RATIO,
    smooth=False,
    reference,
    description,
    optional_inputs=(),
    coefficient_inputs=(),
    coefficient=True,
):
    loss = getattr(module, f"{name}_loss")
    sym = getattr(symbolic_module or module, f"{name}_symbolic")
    return LossSpec(
        name=name,
        family=family,
        loss=loss,
        symbolic=sym,
        defaults=types.MappingProxyType(_defaults(loss, inputs, optional_inputs)),
        inputs=tuple(inputs),
        reference=reference,
        smooth=smooth,
        coefficient=getattr(module, f"{name}_coefficient") if coefficient else None,
        description=description,
        optional_inputs=tuple(optional_inputs),
        coefficient_inputs=tuple(coefficient_inputs),
    )


_ENTRIES = (
    _spec(
        "pg",
        "token",
        _ppo,
        inputs=("adv",),
        smooth=True,
        reference="Williams (1992) REINFORCE; survey 'Base surrogate' at r = 1",
        description="REINFORCE: j = A log pi_k",
    ),
    _spec(
        "is_pg",
        "token",
        _ppo,
        smooth=True,
        reference="DPPO arXiv 2602.04879 Eq. 3/5 (PG-IS); survey 'j = r A'",
        description="importance-sampled PG: j = r A",
    ),
    _spec(
        "ppo",
        "token",
        _ppo,
        reference="Schulman et al. 2017 Eq. 7; DPPO Eq. 9; survey 'PPO'",
        description="PPO clip, asymmetric window [1-eps_low, 1+eps_high]",
    ),
    _spec(
        "dapo",
        "token",
        _ppo,
        reference="DAPO arXiv 2503.14476 (clip-higher); survey 'DAPO'",
        description="PPO clip with a raised upper bound (1.28)",
    ),
    _spec(
        "dual_clip",
        "token",
        _ppo,
        reference="Ye et al. 2020 (dual-clip PPO); verl vanilla (always on, c=3)",
        description="PPO plus a floor kappa*A for A < 0",
    ),
    _spec(
        "cispo",
        "token",
        _cispo_glm5,
        reference="MiniMax-M1 arXiv 2506.13585 section 3 (CISPO); survey 'CISPO'",
        description="detached clip(r, low, high) weight on A log pi_k",
    ),
    _spec(
        "glm5",
        "token",
        _cispo_glm5,
        reference="GLM-5 (2026) section 4.1.2; survey 'GLM-5 async rejection'",
        description="detached r weight, token rejected unless low < r < high",
    ),
    _spec(
        "sapo",
        "token",
        _sapo,
        smooth=True,
        reference="Soft Adaptive Policy Optimization (2025); survey 'SAPO'",
        description="smooth sigmoid gate (4/tau) sigma(tau(r-1)) A",
    ),
    _spec(
        "gspo",
        "sequence",
        _gspo,
        optional_inputs=("other_log_ratio", "length"),
        coefficient_inputs=("other_log_ratio", "length"),
        reference="GSPO arXiv 2507.18071 (sequence ratio); survey 'GSPO'",
        description="clip on the sequence ratio s, seen from one position",
    ),
    _spec(
        "gspo_token",
        "token",
        _gspo,
        optional_inputs=("seq_log_ratio",),
        coefficient_inputs=("seq_log_ratio",),
        reference="GSPO arXiv 2507.18071 (GSPO-token); verl/SkyRL gspo",
        description="GSPO-token: value s, gradient s grad log pi_k",
    ),
    _spec(
        "dppo_binary_tv",
        "token",
        _dppo,
        symbolic_module=_dppo_symbolic,
        reference="DPPO arXiv 2602.04879 Eq. 11-13; survey 'DPPO'; SkyRL dppo",
        description="r A with the binary-TV DPPO mask",
    ),
    _spec(
        "dppo_binary_kl",
        "token",
        _dppo,
        symbolic_module=_dppo_symbolic,
        reference="DPPO arXiv 2602.04879 Eq. 11, 12, 14",
        description="r A with the binary-KL DPPO mask",
    ),
    _spec(
        "dppo_topk_tv",
        "token",
        _dppo,
        symbolic_module=_dppo_symbolic,
        coefficient_inputs=("divergence",),
        reference="DPPO arXiv 2602.04879 Eq. 11, 12, 15",
        description="r A with the top-K TV DPPO mask",
    ),
    _spec(
        "dppo_topk_kl",
        "token",
        _dppo,
        symbolic_module=_dppo_symbolic,
        coefficient_inputs=("divergence",),
        reference="DPPO arXiv 2602.04879 Eq. 11, 12, 16",
        description="r A with the top-K KL DPPO mask",
    ),
    _spec(
        "dppo_capped",
        "token",
        _dppo,
        symbolic_module=_dppo_symbolic,
        reference="survey 'c = A min(r, C) m' (verl); Stable-RL",
        description="verl DPPO: detached min(r, cap) m weight on A log pi_k",
    ),
    _spec(
        "dppo_binary_kl_capped",
        "token",
        _dppo,
        symbolic_module=_dppo_symbolic,
        reference="verl dppo_kl (verl-project/verl 182383b, #5397); DPPO Eq. 14",
        description="verl dppo_kl: binary-KL mask, detached min(r, cap) m weight",
    ),
    _spec(
        "dppo_topk_tv_k_slots",
        "token",
        _dppo,
        symbolic_module=_dppo_symbolic,
        coefficient_inputs=("divergence",),
        reference="DPPO Eq. 15; Stable-RL c6af1d1 compute_topk_kl (K slots)",
        description="Stable-RL top-K TV (K slots), detached min(r, cap) m weight",
    ),
    _spec(
        "dppo_topk_kl_k_slots",
        "token",
        _dppo,
        symbolic_module=_dppo_symbolic,
        coefficient_inputs=("divergence",),
        reference="DPPO Eq. 16; Stable-RL c6af1d1 compute_topk_kl (K slots)",
        description="Stable-RL top-K KL (K slots), detached min(r, cap) m weight",
    ),
    _spec(
        "predictive_kl",
        "token",
        _dppo,
        symbolic_module=_dppo_symbolic,
        coefficient_inputs=("divergence", "ddot"),
        reference="Predictive Divergence Masks arXiv 2607.10848 Eq. 13 (INFERRED)",
        description="r A with the predictive mask on forward KL",
    ),
    _spec(
        "predictive_tv",
        "token",
        _dppo,
        symbolic_module=_dppo_symbolic,
        coefficient_inputs=("divergence", "ddot"),
        reference="Predictive Divergence Masks arXiv 2607.10848 App. D (DERIVED)",
        description="r A with the predictive mask on TV",
    ),
    _spec(
        "dro",
        "token",
        _verl_modes,
        smooth=True,
        reference="verl dro (verl-project/verl ddfbf4e, #7245; docs/algo/dro.md)",
        description="A log pi_k - (beta/2)(log r)^2",
    ),
    _spec(
        "gmpo",
        "sequence",
        _verl_modes,
        optional_inputs=("other_log_ratio", "length"),
        coefficient_inputs=("other_log_ratio", "length"),
        reference="GMPO arXiv 2507.20673; verl geo_mean",
        description="A exp(mean log r*), log r clipped one-sidedly by sgn A",
    ),
    _spec(
        "clip_cov",
        "token",
        _verl_modes,
        optional_inputs=("selected",),
        coefficient_inputs=("selected",),
        reference="arXiv 2505.22617 Clip-Cov; verl clip_cov (random selection)",
        description="PPO clip, zeroed on randomly selected covariance tokens",
    ),
    _spec(
        "kl_cov",
        "token",
        _verl_modes,
        optional_inputs=("selected",),
        coefficient_inputs=("selected",),
        reference="arXiv 2505.22617 KL-Cov; verl kl_cov (top-k selection)",
        description="r A - kappa |log r| on the top-covariance tokens",
    ),
    _spec(
        "luspo",
        "sequence",
        _trl_modes,
        optional_inputs=("other_log_ratio", "length"),
        coefficient_inputs=("other_log_ratio", "length"),
        reference="TRL loss_type=luspo (huggingface/trl f2cd577)",
        description="GSPO sequence loss times the response length",
    ),
    _spec(
        "vespo",
        "token",
        _trl_modes,
        optional_inputs=("seq_log_ratio",),
        coefficient_inputs=("seq_log_ratio",),
        reference="TRL loss_type=vespo, get_gamma_weights (huggingface/trl f2cd577)",
        description="detached Gamma weight phi(w) of the product ratio on A log pi_k",
    ),
    _spec(
        "sft",
        "distribution",
        _lco,
        inputs=(),
        smooth=True,
        coefficient=False,
        reference="cross-entropy; LCO arXiv 2603.00963 convex reference",
        description="negative log-likelihood of the sampled token",
    ),
    _spec(
        "lco_mse",
        "distribution",
        _lco,
        inputs=_TARGET,
        smooth=True,
        coefficient=False,
        reference="LCO arXiv 2603.00963 (text NOT FOUND; target DERIVED)",
        description="1/(2V) |z - sg(z_old + A/beta)|^2",
    ),
    _spec(
        "lco_lch",
        "distribution",
        _lco,
        inputs=_TARGET,
        smooth=True,
        coefficient=False,
        reference="LCO arXiv 2603.00963 (text NOT FOUND; target DERIVED)",
        description="1/V sum log cosh(z - sg(z_old + A/beta))",
    ),
    _spec(
        "lco_kld",
        "distribution",
        _lco,
        inputs=_TARGET,
        smooth=True,
        coefficient=False,
        reference="LCO arXiv 2603.00963 'LCO-KLD'; create_lco_log_target [CODE]",
        description="KL(pi* || pi), pi* = softmax(z_old + A/beta)",
    ),
    _spec(
        "lco_mse_code",
        "distribution",
        _lco,
        inputs=_TARGET,
        smooth=True,
        coefficient=False,
        reference="homzer/llama-rlhf trainer_lco.py (MSE, rule RM)",
        description="sum (z - sg(z) - A/beta_eff)^2 (official code)",
    ),
    _spec(
        "lco_lch_code",
        "distribution",
        _lco,
        inputs=_TARGET,
        smooth=True,
        coefficient=False,
        reference="homzer/llama-rlhf trainer_lco.py (log-cosh, rule RM)",
        description="sum log cosh(z - sg(z) - A/beta_eff) (official code)",
    ),
    _spec(
        "lco_kld_code",
        "distribution",
        _lco,
        inputs=_TARGET,
        smooth=True,
        coefficient=False,
        reference="homzer/llama-rlhf trainer_lco.py (KLD, rule RM)",
        description="KL(pi* || pi) with asymmetric beta_eff (official code)",
    ),
)

#: name -> LossSpec, read-only.
LOSSES = types.MappingProxyType({spec.name: spec for spec in _ENTRIES})

#: names of the rules that carry an analytic coefficient.
TOKEN_RULES = tuple(
    name for name, spec in LOSSES.items() if spec.coefficient is not None
)

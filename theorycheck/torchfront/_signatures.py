r"""The trainers' loss signatures (``--signature verl|skyrl|miles``): how one token's
``(log q, log p, A, mask = 1)`` reaches the function as the trainer calls it, the
config the trainer passes, and how the trainer's parameter names map onto the
registry rule's (for ``--compare`` and :func:`theorycheck.testing.assert_matches_rule`).

Every form is the loss of one token,

.. math::
    L(z) = \texttt{fn}(\ldots\log\mu_k,\ \log\operatorname{softmax}(z)_k,\ \hat A,\
    \text{mask}=1\ldots)

with ``(1, 1)`` tensors (one sequence of one token), so every aggregation mode of
the trainer is the token's loss:

* **verl** ``fn(old_log_prob, log_prob, advantages, response_mask,
  loss_agg_mode, config, rollout_is_weights=None)``, keywords;
* **skyrl** ``fn(log_probs, old_log_probs, advantages, config, loss_mask,
  rollout_logprobs)``, in SkyRL's argument order; ``rollout_logprobs`` is the
  behaviour log-probability too (one q);
* **miles** ``fn(ppo_kl, advantages, eps_clip, eps_clip_high, eps_clip_c)`` with
  ``ppo_kl = log q - log p`` and the ε values as arguments; its per-token losses
  (one token) are summed; a ``torch.compile``\ d function is unwrapped to the
  function it compiles.

The config is the user's own class when the loss's module defines or imports it
(verl ``ActorConfig``, SkyRL ``AlgorithmConfig``): an instance built by the class
from its own defaults, with the ``--set`` values written on it, whose reads are
recorded. Otherwise it is a :class:`~theorycheck.torchfront._verl.VerlConfig` of
the trainer's documented defaults (written here from the trainers' documentation).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from theorycheck.torchfront._verl import ACTOR_DEFAULTS, POLICY_LOSS_DEFAULTS

#: SkyRL's ``AlgorithmConfig`` fields a policy loss reads, documented defaults.
SKYRL_DEFAULTS: dict[str, Any] = {
    "policy_loss_type": "regular",
    "loss_reduction": "token_mean",
    "max_seq_len": None,
    "eps_clip_low": 0.2,
    "eps_clip_high": 0.2,
    "clip_ratio_c": 3.0,
    "sapo.tau_pos": 1.0,
    "sapo.tau_neg": 1.05,
    "clip_cov.clip_ratio": 0.0002,
    "clip_cov.clip_cov_lb": 1.0,
    "clip_cov.clip_cov_ub": 5.0,
    "kl_cov.kl_cov_frac": 0.2,
    "kl_cov.ppo_kl_coef": 1.0,
    "cispo.cispo_eps_clip_low": 1.0,
    "cispo.cispo_eps_clip_high": 4.0,
    "cispo.cispo_anchor": "old",
    "dppo.dppo_type": "binary_tv",
    "dppo.delta_low": 0.2,
    "dppo.delta_high": 0.2,
    "off_policy_correction.tis_ratio_type": None,
    "off_policy_correction.token_tis_ratio_clip_high": 2.0,
    "off_policy_correction.sequence_tis_ratio_clip_high": 5.0,
    "off_policy_correction.sequence_mask_metric": None,
    "off_policy_correction.outlier_token_is_threshold_low": None,
    "off_policy_correction.outlier_token_is_threshold_high": None,
    "off_policy_correction.token_mask_is_threshold_low": None,
    "off_policy_correction.token_mask_is_threshold_high": None,
}
#: Miles' ε arguments, with the defaults of its command line (``--eps-clip 0.2``;
#: ``--eps-clip-high`` defaults to ``--eps-clip``; no dual clip).
MILES_DEFAULTS: dict[str, Any] = {
    "eps_clip": 0.2,
    "eps_clip_high": 0.2,
    "eps_clip_c": None,
}


def _one_minus(x):
    return None if x is None else 1.0 - x


def _one_plus(x):
    return None if x is None else 1.0 + x


def _same(x):
    return x


#: (trainer key, rule parameter, transform, rules it applies to: a name prefix).
Mapping_ = tuple[tuple[str, str, Callable[[Any], Any], tuple[str, ...]], ...]
_ANY = ("",)
_CLIPS = ("ppo", "dapo", "dual_clip", "clip_cov", "gspo", "gmpo", "luspo")


@dataclasses.dataclass(frozen=True)
class Framework:
    """One trainer's signature.

    Attributes:
        name: ``verl``, ``skyrl`` or ``miles``.
        first: the names its first parameters must have.
        config_class: the name of the trainer's config class (looked up in the
            loss's module), ``None`` for ε given as arguments.
        defaults: the documented defaults (dotted keys for nested sections).
        to_rule: how its keys map onto the registry's parameters.
    """

    name: str
    first: tuple[str, ...]
    config_class: str | None
    defaults: Mapping[str, Any]
    to_rule: Mapping_

    def rule_params(
        self, rule: str, values: Mapping[str, Any]
    ) -> tuple[dict[str, Any], dict[str, str]]:
        """The rule's parameters that the trainer's ``values`` set (the rules'
        names: ``clip_ratio_low`` -> ``eps_low``; for CISPO ``1 - clip_ratio_low``
        -> ``low``; for DPPO ``clip_ratio_high`` -> ``delta``), and which trainer
        key gave each (the first of :attr:`to_rule` that applies)."""
        out: dict[str, Any] = {}
        sources: dict[str, str] = {}
        for key, param, transform, rules in self.to_rule:
            if param in out or key not in values:
                continue
            if any(rule.startswith(r) for r in rules):
                value = transform(values[key])
                if value is not None:
                    out[param] = value
                    sources[key] = param
        return out, sources


VERL = Framework(
    "verl",
    ("old_log_prob", "log_prob", "advantages", "response_mask"),
    "ActorConfig",
    {
        **ACTOR_DEFAULTS,
        **{f"policy_loss.{k}": v for k, v in POLICY_LOSS_DEFAULTS.items()},
    },
    (
        ("clip_ratio_low", "eps_low", _same, _CLIPS),
        ("clip_ratio_high", "eps_high", _same, _CLIPS),
        ("clip_ratio", "eps_low", _same, _CLIPS),
        ("clip_ratio", "eps_high", _same, _CLIPS),
        ("clip_ratio_c", "kappa", _same, ("dual_clip",)),
        ("clip_ratio_c", "cap", _same, ("dppo_capped",)),
        ("clip_ratio_low", "low", _one_minus, ("cispo",)),
        ("clip_ratio_high", "high", _one_plus, ("cispo",)),
        ("clip_ratio_high", "delta", _same, ("dppo", "predictive")),
        ("clip_ratio", "delta", _same, ("dppo", "predictive")),
        ("policy_loss.dro_beta", "beta", _same, ("dro",)),
        ("policy_loss.ppo_kl_coef", "kl_coef", _same, ("kl_cov",)),
        ("tau_pos", "tau_pos", _same, ("sapo",)),
        ("tau_neg", "tau_neg", _same, ("sapo",)),
    ),
)
SKYRL = Framework(
    "skyrl",
    ("log_probs", "old_log_probs", "advantages", "config"),
    "AlgorithmConfig",
    SKYRL_DEFAULTS,
    (
        ("eps_clip_low", "eps_low", _same, _CLIPS),
        ("eps_clip_high", "eps_high", _same, _CLIPS),
        ("clip_ratio_c", "kappa", _same, ("dual_clip",)),
        ("cispo.cispo_eps_clip_low", "low", _one_minus, ("cispo",)),
        ("cispo.cispo_eps_clip_high", "high", _one_plus, ("cispo",)),
        ("dppo.delta_high", "delta", _same, ("dppo", "predictive")),
        ("kl_cov.ppo_kl_coef", "kl_coef", _same, ("kl_cov",)),
        ("sapo.tau_pos", "tau_pos", _same, ("sapo",)),
        ("sapo.tau_neg", "tau_neg", _same, ("sapo",)),
    ),
)
MILES = Framework(
    "miles",
    ("ppo_kl", "advantages"),
    None,
    MILES_DEFAULTS,
    (
        ("eps_clip", "eps_low", _same, _CLIPS),
        ("eps_clip_high", "eps_high", _same, _CLIPS),
        ("eps_clip_c", "kappa", _same, ("dual_clip",)),
    ),
)
FRAMEWORKS = {f.name: f for f in (VERL, SKYRL, MILES)}
#: the ``--signature`` choices.
SIGNATURES = ("logits", *FRAMEWORKS)


def config_values(framework: Framework, settings: Mapping[str, Any]) -> dict:
    """The trainer's documented defaults with ``settings`` (``--set``) on top; a
    key of a nested section may be named bare when it is unambiguous
    (``ppo_kl_coef`` for verl's ``policy_loss.ppo_kl_coef``)."""
    values = dict(framework.defaults)
    for key, value in settings.items():
        if key not in values:
            dotted = [k for k in values if k.endswith(f".{key}")]
            key = dotted[0] if len(dotted) == 1 else key
        values[key] = value
    return values


def unwrap(fn: Callable) -> Callable:
    """The Python function under ``torch.compile`` (``_torchdynamo_orig_callable``)
    or ``functools.wraps`` (``__wrapped__``)."""
    seen = set()
    while id(fn) not in seen:
        seen.add(id(fn))
        inner = getattr(fn, "_torchdynamo_orig_callable", None)
        inner = inner or getattr(fn, "__wrapped__", None)
        if inner is None or not callable(inner):
            return fn
        fn = inner
    return fn

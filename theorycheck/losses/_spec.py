"""The record every registered loss carries (the registry's one data type).

A registry entry describes one RL surrogate rule twice, independently:

* ``loss`` -- the stable JAX form, written by hand (``jax.nn.log_softmax``),
  returning the scalar **loss to minimise** (= -objective) for ONE position:
  ``loss(logits: Float[Array, " V"], sampled: int, **inputs, **params)``.
  Frozen quantities (detached weights, masks, targets) go through
  ``jax.lax.stop_gradient``.
* ``symbolic`` -- the specification in SymPy, used by the symbolic and formal engines:
  ``symbolic(z: Sequence[sp.Expr], sampled: int, **inputs, **params) -> sp.Expr``
  where ``z`` are the logit symbols (length V) and frozen quantities are plain
  symbols or numbers (never derivatives of ``z``).

Inputs (keyword arguments, per position):

* ``adv`` -- the advantage Â (float).
* ``behavior_logp`` -- log μ over the vocabulary (shape ``[V]``; ``-inf`` allowed where
  μ_i = 0). The ratio anchor: r = π_k / μ_k.
* ``old_logits`` -- z_old for target-based (LCO) rules (shape ``[V]``).

Token rules also carry ``coefficient(p, q, adv, **params) -> (c, gated)``: the analytic
gradient coefficient c = d(objective)/d log π_k at current probability p, behavior
probability q, and whether the rule gates the token (c forced to 0 by a clip / mask).
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Mapping


class RuleFamily(enum.StrEnum):
    """How a rule reads the logits: through one token, a whole response, or all of π."""

    TOKEN = "token"  # through π_k and frozen weights
    SEQUENCE = "sequence"  # needs a whole response (GSPO)
    DISTRIBUTION = "distribution"  # the whole π (SFT on a soft target, LCO)


@dataclasses.dataclass(frozen=True)
class LossSpec:
    """One registered surrogate rule.

    Attributes:
        name: snake_case registry name, e.g. ``"ppo"``.
        family: a :class:`RuleFamily` (``"token"``: depends on logits through π_k
            and frozen weights; ``"sequence"``: needs a whole response, e.g. GSPO;
            ``"distribution"``: depends on the whole π, e.g. SFT against a soft
            target, LCO). A string is converted; another value is refused.
        loss: the JAX form (see module docstring).
        symbolic: the SymPy specification (see module docstring).
        defaults: hyperparameters and their defaults, e.g. ``{"eps_low": 0.2}``.
        inputs: names of the per-position inputs the rule reads, e.g.
            ``("adv", "behavior_logp")``.
        reference: paper / blog / code and equation the rule comes from.
        smooth: False for clipped / gated rules (Hessian checks must avoid kinks).
        coefficient: token rules only: ``(p, q, adv, **params) -> (c, gated)``.
        description: one line for tables.
        optional_inputs: per-position inputs the rule reads when given, with
            defaults in ``loss`` (e.g. GSPO's ``other_log_ratio``, ``length``).
        coefficient_inputs: keyword inputs ``coefficient`` needs besides
            ``(p, q, adv)`` because they depend on whole distributions (e.g. the
            top-K ``divergence``, the predictive ``ddot``).
    """

    name: str
    family: RuleFamily
    loss: Callable
    symbolic: Callable | None
    defaults: Mapping[str, float]
    inputs: tuple[str, ...]
    reference: str
    smooth: bool = True
    coefficient: Callable | None = None
    description: str = ""
    optional_inputs: tuple[str, ...] = ()
    coefficient_inputs: tuple[str, ...] = ()

    def __post_init__(self):
        try:
            family = RuleFamily(self.family)
        except ValueError:
            raise ValueError(
                f"LossSpec {self.name!r}: family {self.family!r} is not one of "
                f"{[f.value for f in RuleFamily]}"
            ) from None
        object.__setattr__(self, "family", family)

"""The single registry of RL surrogate rules, plus advantages, reductions and presets.

``LOSSES`` maps a snake_case name to a :class:`LossSpec` (JAX loss, SymPy spec,
defaults, reference, analytic coefficient for token rules).
"""

from theorycheck.losses._gspo import gspo_sequence_loss
from theorycheck.losses._lco import estimate_vocab_adv
from theorycheck.losses._registry import LOSSES, TOKEN_RULES
from theorycheck.losses._spec import LossSpec

__all__ = [
    "LOSSES",
    "TOKEN_RULES",
    "LossSpec",
    "estimate_vocab_adv",
    "gspo_sequence_loss",
]

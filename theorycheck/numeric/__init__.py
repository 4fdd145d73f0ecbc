"""JAX-only numeric core: divergences, their directional derivatives Ḋ, masks.

For behavior mu, policy pi = softmax(z), sampled token k and direction v = e_k - pi.
Never imports sympy or z3 (``tests/test_layering.py``).
"""

from theorycheck.numeric._blocked import MaskConfig, token_stats
from theorycheck.numeric._ddot import DdotResult, ddot
from theorycheck.numeric._divergence import binary_kl, binary_tv, divergence
from theorycheck.numeric._gathered import topk_predict
from theorycheck.numeric._masks import dppo_mask, predictive_mask, ratio_mask
from theorycheck.numeric._second_order import first_order_radius, second_order
from theorycheck.numeric._support import TopKBehavior

__all__ = [
    "DdotResult",
    "MaskConfig",
    "TopKBehavior",
    "binary_kl",
    "binary_tv",
    "ddot",
    "divergence",
    "dppo_mask",
    "first_order_radius",
    "predictive_mask",
    "ratio_mask",
    "second_order",
    "token_stats",
    "topk_predict",
]

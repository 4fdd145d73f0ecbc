"""JAX-only numeric core: divergences, their directional derivatives Ḋ, masks.

For behavior mu, policy pi = softmax(z), sampled token k and direction v = e_k - pi.
Never imports sympy or z3 (``tests/test_layering.py``).
"""

from theorycheck.numeric._choices import Divergence, Estimator, Support
from theorycheck.numeric._curvature_frozen import frozen_loss_fn, second_difference
from theorycheck.numeric._curvature_sampled import sampled_token_min_eigenvalue
from theorycheck.numeric._curvature_search import (
    SearchResult,
    search_negative_curvature,
    verify_curvature,
)
from theorycheck.numeric._ddot import DdotResult, ddot
from theorycheck.numeric._divergence import (
    binary_kl,
    binary_tv,
    divergence,
    full_divergence,
)
from theorycheck.numeric._gathered import topk_predict
from theorycheck.numeric._hessian import (
    EigResult,
    hvp_fn,
    logit_hessian,
    min_eigenvalue,
)
from theorycheck.numeric._lanczos import LanczosResult, lanczos_smallest
from theorycheck.numeric._masks import dppo_mask, predictive_mask, ratio_mask
from theorycheck.numeric._second_order import first_order_radius, second_order
from theorycheck.numeric._support import TopKBehavior
from theorycheck.numeric._token_stats import MaskConfig, token_stats

__all__ = [
    "DdotResult",
    "Divergence",
    "EigResult",
    "Estimator",
    "LanczosResult",
    "MaskConfig",
    "SearchResult",
    "Support",
    "TopKBehavior",
    "binary_kl",
    "binary_tv",
    "ddot",
    "divergence",
    "dppo_mask",
    "first_order_radius",
    "frozen_loss_fn",
    "full_divergence",
    "hvp_fn",
    "lanczos_smallest",
    "logit_hessian",
    "min_eigenvalue",
    "predictive_mask",
    "ratio_mask",
    "sampled_token_min_eigenvalue",
    "search_negative_curvature",
    "second_difference",
    "second_order",
    "token_stats",
    "topk_predict",
    "verify_curvature",
]

"""theorycheck: checks the theory behind RL surrogate losses for LLMs.

Subpackages (imports point downwards only):

* ``theorycheck.numeric``  -- JAX only: divergences, Ḋ, masks at vocabulary scale.
* ``theorycheck.losses``   -- the single registry of surrogate losses.
* ``theorycheck.symbolic`` -- SymPy only: logit gradients and Hessians.
* ``theorycheck.formal``   -- z3: proofs in probability coordinates.
* ``theorycheck.models``   -- JAX causal LMs and checkpoint loaders.
"""

from theorycheck._errors import BadInput
from theorycheck._version import __version__ as __version__

__all__ = ["BadInput"]

"""theorycheck: checks the theory behind RL surrogate losses for LLMs.

Subpackages, top first (imports point downwards only; docs/design.md):

* ``theorycheck.commands``   -- one module per sub-command of ``theorycheck``.
* ``theorycheck.reproduce``  -- the main job: every section rendered from results.
* ``theorycheck.probes``     -- first-order predictions of Delta D on real updates.
* ``theorycheck.rl``         -- rollouts, verifiable tasks, the GRPO trainer.
* ``theorycheck.claims``     -- the claim harness (the claims live in ``proofs/``).
* ``theorycheck.convexity``  -- the convexity checker of a loss in the logits.
* ``theorycheck.torchfront`` -- PyTorch losses translated to JAX (the torch extra).
* ``theorycheck.models``     -- JAX causal LMs and checkpoint loaders.
* ``theorycheck.losses``     -- the single registry of surrogate losses.
* ``theorycheck.bridge``     -- jaxpr -> SymPy.
* ``theorycheck.symbolic``   -- SymPy only: logit gradients and Hessians.
* ``theorycheck.formal``     -- z3 and interval arithmetic: proofs in probability
  coordinates.
* ``theorycheck.numeric``    -- JAX only: divergences, Ddot, masks at vocabulary scale.
"""

from theorycheck._errors import BadInput
from theorycheck._version import __version__ as __version__

__all__ = ["BadInput"]

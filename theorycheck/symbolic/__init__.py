"""SymPy-only engine (never imports jax): logit gradients, Hessians, structure."""

from theorycheck.symbolic._frozen import Frozen, unfreeze

__all__ = ["Frozen", "unfreeze"]

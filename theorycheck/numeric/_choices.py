"""The closed sets of choices of the numeric core, as ``StrEnum``s.

Members compare equal to their string values, so callers may pass ``"kl"`` or
``Divergence.KL`` alike; :func:`choose` validates a value against a set (or a subset of
it) and raises ``BadInput`` naming the bad value and the valid ones.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from typing import TypeVar

from theorycheck._errors import BadInput

E = TypeVar("E", bound=enum.StrEnum)


class Divergence(enum.StrEnum):
    """D(μ‖π): full, binary (sampled token only) or top-K (support + one tail)."""

    KL = "kl"
    REVERSE_KL = "reverse_kl"
    TV = "tv"
    BINARY_KL = "binary_kl"
    BINARY_TV = "binary_tv"
    TOPK_KL = "topk_kl"
    TOPK_TV = "topk_tv"


class Estimator(enum.StrEnum):
    """How Ḋ is computed: exactly, or from the top-K support with a tail estimate."""

    #: the exact Ḋ of the full divergence.
    FULL = "full"
    #: the tail as one bucket (the reduced distribution's own Ḋ).
    TOPK_AGGREGATED = "topk_aggregated"
    #: the tail spread uniformly over the V - |S| unseen tokens.
    TOPK_UNIFORM = "topk_uniform"
    #: the tail proportional to π's tail: the exact Ḋ of the top-K divergence.
    TOPK_PROPORTIONAL = "topk_proportional"


class Support(enum.StrEnum):
    """The top-K support S of the behavior policy."""

    #: S = TopK(μ, K) ∪ {k} plus one tail bucket (DPPO Eq. 15-16).
    UNION = "union"
    #: the DPPO reference code: k takes the K-th slot when it is missing, |S| = K.
    K_SLOTS = "k_slots"


def choose(cls: type[E], value, what: str, allowed: Iterable[E] | None = None) -> E:
    """``value`` as a member of ``cls`` (restricted to ``allowed`` when given).

    Examples:
        >>> choose(Support, "union", "support")
        <Support.UNION: 'union'>

    Raises:
        BadInput: ``value`` is not one of the allowed choices (they are listed).
    """
    valid = tuple(cls) if allowed is None else tuple(allowed)
    if isinstance(value, str) and value in valid:
        return cls(value)
    raise BadInput(f"{what} must be one of {', '.join(valid)}, got {value!r}")

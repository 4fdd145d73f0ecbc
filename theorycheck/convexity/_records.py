"""The structure stage's result record (shared by the family deciders)."""

from __future__ import annotations

import dataclasses
from fractions import Fraction
from typing import Any

from theorycheck import symbolic

__all__ = ["StructureResult"]


@dataclasses.dataclass(frozen=True)
class StructureResult:
    """Outcome of the structure stage.

    Attributes:
        family: recognised family name, or None.
        status: ``"proved"`` (PSD for every V ≥ 2), ``"refuted"`` (not PSD for any
            V ≥ 3, with ``witness``), or ``"unknown"``.
        condition: exact convex region (text) when known.
        detail: one line for the methods list.
        witness: ``(pi_k, direction_kind)`` where the condition fails, exact.
        fit: the sampled-token fit when recognised.
        certificates: interval-prover certificates of the conditions proved that
            way (:class:`theorycheck.formal.Certificate`; each re-checkable with
            :func:`theorycheck.formal.verify_certificate`). Optional, empty when z3
            or SymPy decided everything.
        region: validated segments of the V ≥ 3 region in :math:`\\pi_k` when it came
            from the interval route (:class:`theorycheck.formal.Segment`), else None.
        affine: the map :math:`z' = \\alpha \\odot z + \\beta` taken out of the loss
            (:class:`theorycheck.bridge.AffineMap`) when the analysis is of
            :math:`\\tilde L(z')`; then ``condition`` speaks of
            :math:`\\pi' = \\mathrm{softmax}(z')` and ``witness`` is a point of
            :math:`\\tilde L` (see :func:`~theorycheck.convexity._structural.witness`).
        q_dependence: region text by behavior probability ``q``; the stage itself
            runs at one ``q`` and leaves it None; a caller that wants it stores
            :func:`~theorycheck.convexity._structural.regions_by_q`'s answer here
            (``dataclasses.replace``).
    """

    family: str | None
    status: str
    condition: str | None
    detail: str
    witness: tuple[Fraction, str] | None = None
    fit: symbolic.SampledTokenFit | None = None
    certificates: tuple[Any, ...] = ()
    region: tuple[Any, ...] | None = None
    affine: Any = None
    q_dependence: dict[str, str | None] | None = None

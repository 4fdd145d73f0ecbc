"""What the convexity stages exchange: verdicts, statuses, scopes, method records.

Every stage (structure, formal, search, float64 re-check, vocabulary invariance, notes)
returns one :class:`StageRecord`; :func:`theorycheck.convexity._combine.combine` turns
the list into one verdict. The enums are :class:`enum.StrEnum`, so they print and
serialise as their plain values (``"convex"``, ``"proved"``).
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterable
from typing import Any

__all__ = [
    "StructureFamily",
    "StageRecord",
    "Scope",
    "Stage",
    "StageStatus",
    "Verdict",
    "scope_text",
    "tokens_text",
]


class Verdict(enum.StrEnum):
    """The answer: convex only with a proof, not convex only with a re-checked
    counterexample, otherwise unknown."""

    CONVEX = "convex"
    NOT_CONVEX = "not_convex"
    UNKNOWN = "unknown"


class StageStatus(enum.StrEnum):
    """What one method established."""

    #: a proof (of PSD, or of a structural fact).
    PROVED = "proved"
    #: a counterexample, re-checked.
    REFUTED = "refuted"
    #: the method ran and decided nothing.
    UNKNOWN = "unknown"
    #: the method could not run (an unsupported operation, V too large).
    SKIPPED = "skipped"
    #: a float64 re-check agreed (two routes), or the jaxprs are one program.
    CONFIRMED = "confirmed"
    #: a float64 re-check could not confirm (the exact check stands, or only one route).
    UNCONFIRMED = "unconfirmed"
    #: a remark that changes no verdict.
    NOTE = "note"
    #: two methods contradict each other (the counterexample wins).
    CONFLICT = "conflict"


class Stage(enum.StrEnum):
    """Which kind of method produced a record (the combiner's rules depend on it)."""

    STRUCTURE = "structure"
    FORMAL = "formal"
    SEARCH = "search"
    RECHECK = "recheck"
    INVARIANCE = "invariance"
    #: relabelling the tokens: one verdict for every sampled token
    TOKENS = "tokens"
    KINKS = "kinks"
    #: a composition (DCP) proof: kinks included (theorycheck/convexity/_dcp.py)
    DCP = "dcp"
    #: a midpoint (chord) refutation, re-checked exactly (_chord.py)
    CHORD = "chord"
    NOTE = "note"
    CONSISTENCY = "consistency"


class StructureFamily(enum.StrEnum):
    """Structural families (statements in :mod:`theorycheck.symbolic._structure`)."""

    SAMPLED_TOKEN = "sampled_token"
    CROSS_ENTROPY = "cross_entropy"
    REGRESSION = "regression"


@dataclasses.dataclass(frozen=True)
class Scope:
    """A set of vocabulary sizes: the listed ``at`` plus every ``V >= from_v``.

    Examples:
        >>> str(Scope.every(2)), str(Scope.of(3)), str(Scope.of(3, 4))
        ('all V >= 2', 'V = 3', 'V in {3, 4}')
        >>> Scope.every(3).contains(5), Scope.of(3, 4).contains(5)
        (True, False)
    """

    at: frozenset[int] = frozenset()
    from_v: int | None = None

    @classmethod
    def of(cls, *vocab: int) -> Scope:
        return cls(frozenset(int(v) for v in vocab))

    @classmethod
    def every(cls, from_v: int) -> Scope:
        return cls(frozenset(), int(from_v))

    def contains(self, v: int) -> bool:
        return v in self.at or (self.from_v is not None and v >= self.from_v)

    def union(self, other: Scope) -> Scope:
        lows = [s for s in (self.from_v, other.from_v) if s is not None]
        from_v = min(lows) if lows else None
        at = {v for v in self.at | other.at if from_v is None or v < from_v}
        return Scope(frozenset(at), from_v)

    def meets(self, other: Scope) -> bool:
        """True when the two sets share a V."""
        if self.from_v is not None and other.from_v is not None:
            return True
        return any(other.contains(v) for v in self.at) or any(
            self.contains(v) for v in other.at
        )

    def __bool__(self) -> bool:
        return bool(self.at) or self.from_v is not None

    def __str__(self) -> str:
        listed = sorted(self.at)
        if self.from_v is not None:
            head = f"all V >= {self.from_v}"
            return head if not listed else f"V in {{{_join(listed)}}} and {head}"
        if len(listed) == 1:
            return f"V = {listed[0]}"
        return f"V in {{{_join(listed)}}}" if listed else "no V"


def _join(values: Iterable[int]) -> str:
    return ", ".join(map(str, values))


def tokens_text(tokens: frozenset[int] | None, vocab: Scope | None = None) -> str:
    """``every sampled token``, ``sampled token k = 0``, ``sampled tokens k in {0,
    2}``; a finite ``vocab`` whose every token is listed reads as every token.

    Examples:
        >>> tokens_text(None), tokens_text(frozenset({0}))
        ('every sampled token', 'sampled token k = 0')
        >>> tokens_text(frozenset({0, 1, 2}), Scope.of(3))
        'every sampled token'
    """
    if tokens is None:
        return "every sampled token"
    if vocab is not None and vocab.from_v is None and vocab.at:
        if all(set(range(v)) <= tokens for v in vocab.at):
            return "every sampled token"
    listed = sorted(tokens)
    if len(listed) == 1:
        return f"sampled token k = {listed[0]}"
    return f"sampled tokens k in {{{_join(listed)}}}"


def scope_text(pieces: Iterable[tuple[Scope, frozenset[int] | None]]) -> str:
    """The pieces ``(V scope, tokens)`` of a verdict's scope as one line: pieces with
    the same V are merged (their tokens joined), then pieces with the same tokens
    (their V joined).

    Examples:
        >>> scope_text([(Scope.every(2), None)])
        'all V >= 2, every sampled token'
        >>> scope_text([(Scope.of(3), frozenset({0})), (Scope.of(3), frozenset({2}))])
        'V = 3, sampled tokens k in {0, 2}'
    """
    by_v: dict[Scope, frozenset[int] | None] = {}
    for scope, tokens in pieces:
        if scope in by_v:
            old = by_v[scope]
            by_v[scope] = None if old is None or tokens is None else old | tokens
        else:
            by_v[scope] = tokens
    by_t: dict[frozenset[int] | None, Scope] = {}
    for scope, tokens in by_v.items():
        by_t[tokens] = by_t[tokens].union(scope) if tokens in by_t else scope
    parts = [f"{s}, {tokens_text(t, s)}" for t, s in by_t.items()]
    return "; ".join(parts) if parts else "no V"


@dataclasses.dataclass(frozen=True)
class StageRecord:
    """One stage's outcome.

    Attributes:
        method: display name (``"structure"``, ``"z3 V=3"``, ``"numeric search"``).
        status: what it established.
        detail: one line for people.
        stage: the kind of method.
        scope: the V the claim covers (a proof or a refutation); for the structure
            stage the claim for every V, which the combiner restricts to ``decided``
            unless the vocabulary-invariance check confirms one program.
        decided: the V actually computed (structure: the V it derived).
        counterexample: a re-checked counterexample (JSON-ready), when refuted.
        condition: the exact convex region, when known (structure stage).
        samples: points examined (search stage).
        tokens: the sampled tokens ``k`` the record decided (``None``: every token;
            the combiner extends ``{0}`` to every token only beside a confirmed
            ``tokens`` record, the relabelling argument).
    """

    method: str
    status: StageStatus
    detail: str
    stage: Stage
    scope: Scope = Scope()
    decided: Scope = Scope()
    counterexample: dict[str, Any] | None = None
    condition: str | None = None
    samples: int = 0
    tokens: frozenset[int] | None = frozenset({0})

    def to_json(self) -> dict[str, str]:
        return {
            "method": self.method,
            "status": str(self.status),
            "detail": self.detail,
        }

"""The claim harness's data: a claim, its checks, their outcomes.

A :class:`Claim` is one proposition from a paper (or a user's own), with the checks
that test it. Each :class:`Check` is one method of one *kind* (:class:`Method`); two
checks of different kinds are independent routes to the same fact. A check returns a
:class:`CheckResult`; the claim's status is never written by hand but computed from
those results by :func:`theorycheck.claims.evaluate`.

Examples:
    >>> ok = Check(
    ...     "two ways", Method.NUMERIC, lambda: CheckResult(Outcome.PASS, "1+1=2")
    ... )
    >>> claim = Claim(
    ...     id="demo.sum",
    ...     source="arithmetic",
    ...     provenance="DERIVED",
    ...     statement="1 + 1 = 2",
    ...     checks=(ok,),
    ... )
    >>> claim.methods
    (<Method.NUMERIC: 'numeric'>,)
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping
from enum import StrEnum
from typing import Any

#: The provenance tags of the research notes (docs/papers.md): is the statement the
#: paper's
#: own text (PAPER), derived here (DERIVED), inferred (INFERRED), or is the paper's text
#: not found (NOT FOUND; the derived statement is then the spec)?
PROVENANCES = ("PAPER", "CODE", "DERIVED", "INFERRED", "NOT FOUND")

_ID = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)*$")


class Method(StrEnum):
    """The kind of a check; checks of different kinds are independent routes."""

    SYMBOLIC = "symbolic"  # SymPy identity / exact algebra
    Z3 = "z3"  # formal.prove: proof or refutation
    INTERVAL = "interval"  # validated interval/ball arithmetic
    PROPERTY = "property"  # hypothesis property test (run programmatically, seeded)
    NUMERIC = "numeric"  # autodiff / finite differences / brute force in float64
    SIMULATION = "simulation"  # simulated training / dynamics
    MEASUREMENT = "measurement"  # on the real checkpoint's distributions


class Kind(StrEnum):
    """What a claim is, as its source presents it.

    The paper's own statements (theorem ... assumption) are checked *as written, under
    their assumptions*; a stronger reading or another regime is an ``EXTENSION`` and a
    reviewer's objection a ``REVIEWER`` claim, each naming the claim it ``extends``, and
    neither is ever reported as the paper failing. An ``ASSUMPTION`` is measured at a
    stated setting, not "corrected".
    """

    THEOREM = "theorem"
    LEMMA = "lemma"
    PROPOSITION = "proposition"
    REMARK = "remark"
    EQUATION = "equation"
    ASSUMPTION = "assumption"
    REVIEWER = "reviewer"
    EXTENSION = "extension"

    @property
    def as_stated(self) -> bool:
        """True for the source's own statements (not an extension or an objection)."""
        return self not in (Kind.REVIEWER, Kind.EXTENSION)


class Outcome(StrEnum):
    """What one check found."""

    PASS = "pass"  # the check supports the statement (a proof, or evidence as stated)
    FAIL = "fail"  # a re-checked counterexample to the statement
    UNKNOWN = "unknown"  # undecided: timeout, z3 unknown, an error, ...


class Status(StrEnum):
    """A claim's computed status (see :func:`theorycheck.claims.status_of`)."""

    HOLDS = "holds"
    FAILS = "fails"
    HOLDS_WITH_CORRECTION = "holds_with_correction"
    UNKNOWN = "unknown"


#: The readings of a claim's status, in report order: the source's own statements
#: (as stated), its assumptions (measured at a stated setting), then extensions and
#: reviewer objections (never the paper failing).
VERDICTS = (
    "fails as stated",
    "holds as stated",
    "assumption fails at its setting",
    "assumption holds at its setting",
    "extension fails",
    "extension holds",
    "objection fails",
    "objection holds",
    "undecided",
)


def verdict_of(kind: Kind | str, status: Status | str) -> str:
    """What a status says, read with the claim's kind (one of :data:`VERDICTS`).

    ``fails`` and ``holds_with_correction`` both mean the statement itself fails.
    Only a theorem, lemma, proposition, remark or equation can fail *as stated*; an
    assumption holds or fails at its setting; an extension or a reviewer objection is
    never the paper failing.

    Examples:
        >>> verdict_of("extension", "holds_with_correction")
        'extension fails'
        >>> verdict_of("lemma", "holds")
        'holds as stated'
    """
    kind, status = Kind(kind), Status(status)
    if status is Status.UNKNOWN:
        return "undecided"
    ok = "holds" if status is Status.HOLDS else "fails"
    if kind is Kind.ASSUMPTION:
        return f"assumption {ok} at its setting"
    if kind is Kind.EXTENSION:
        return f"extension {ok}"
    if kind is Kind.REVIEWER:
        return f"objection {ok}"
    return f"{ok} as stated"


@dataclasses.dataclass(frozen=True)
class CheckResult:
    """One check's outcome.

    Attributes:
        outcome: pass, fail or unknown.
        detail: one line a person can read: what was computed, with its numbers.
        counterexample: the re-checked counterexample (exact values or float64);
            required when ``outcome`` is FAIL.
        data: measured numbers (JSON-able).
    """

    outcome: Outcome
    detail: str
    counterexample: Mapping[str, Any] | None = None
    data: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.outcome, Outcome):
            object.__setattr__(self, "outcome", Outcome(self.outcome))
        if self.outcome is Outcome.FAIL and not self.counterexample:
            raise ValueError("a FAIL needs its re-checked counterexample")
        if not isinstance(self.detail, str):
            raise TypeError(f"detail must be a str, got {type(self.detail).__name__}")


@dataclasses.dataclass(frozen=True)
class Check:
    """One method testing a statement.

    Attributes:
        name: short, e.g. ``"sympy identity"``, ``"z3 over the simplex, V=3"``.
        method: the kind of method.
        run: pure callable returning a :class:`CheckResult`; it may accept the keyword
            ``quick: bool`` (fewer samples, smaller sizes).
    """

    name: str
    method: Method
    run: Callable[..., CheckResult]

    def __post_init__(self) -> None:
        if not isinstance(self.method, Method):
            object.__setattr__(self, "method", Method(self.method))
        if not callable(self.run):
            raise TypeError(f"check {self.name!r}: run must be callable")


@dataclasses.dataclass(frozen=True)
class Correction:
    """A corrected statement that holds where the original fails, with its checks."""

    statement: str
    checks: tuple[Check, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "checks", tuple(self.checks))


@dataclasses.dataclass(frozen=True)
class Claim:
    """One proposition and the checks that test it.

    Attributes:
        id: dotted identifier, e.g. ``"pdm.prop1_ddot_closed_form"``.
        source: where it comes from, e.g. ``"seed 002, Prop. 1, Eq. (7)"``.
        provenance: ``"PAPER"``, ``"CODE"``, ``"DERIVED"``, ``"INFERRED"`` or
            ``"NOT FOUND"`` (the research notes' tag for the statement's text).
        statement: the statement checked, in words and formulas.
        checks: the checks; the claim holds only with two distinct method kinds.
        correction: an optional corrected statement, consulted when this one fails.
        objection: the reviewer's objection this claim tests, if any.
        quote: the source's own words (or, where its text is NOT FOUND, the derived
            statement the claim takes as its spec).
        location: where in the source: section, equation, remark number.
        kind: what the claim is (:class:`Kind`).
        assumptions: the conditions under which the source states it (full support,
            small step, fixed target, NTK regime, ...); the status is for the
            statement under these.
        extends: for an ``EXTENSION`` or ``REVIEWER`` claim, the id of the claim it
            strengthens or objects to.
        aliases: earlier ids of this claim (a renamed claim keeps its old id here;
            ``prove --only OLD`` still selects it).
    """

    id: str
    source: str
    provenance: str
    statement: str
    checks: tuple[Check, ...]
    correction: Correction | None = None
    objection: str | None = None
    quote: str = ""
    location: str = ""
    kind: Kind = Kind.PROPOSITION
    assumptions: tuple[str, ...] = ()
    extends: str | None = None
    aliases: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for cid in (self.id, *self.aliases):
            if not isinstance(cid, str) or not _ID.match(cid):
                raise ValueError(f"claim id {cid!r} must be a dotted identifier")
        object.__setattr__(self, "aliases", tuple(self.aliases))
        if self.provenance not in PROVENANCES:
            raise ValueError(
                f"claim {self.id}: provenance {self.provenance!r} is not one of "
                f"{', '.join(PROVENANCES)}"
            )
        object.__setattr__(self, "checks", tuple(self.checks))
        object.__setattr__(self, "kind", Kind(self.kind))
        object.__setattr__(self, "assumptions", tuple(self.assumptions))
        if self.extends is not None and self.kind.as_stated:
            raise ValueError(
                f"claim {self.id}: extends={self.extends!r} needs kind extension or "
                f"reviewer, not {self.kind.value}"
            )

    @property
    def methods(self) -> tuple[Method, ...]:
        """The distinct method kinds of the statement's checks, in order."""
        return tuple(dict.fromkeys(c.method for c in self.checks))

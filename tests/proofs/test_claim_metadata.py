"""Every claim of proofs/ says what its source says and under which conditions."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from theorycheck.claims import Kind, Method, discover

from ._helpers import PROOFS

#: One naming rule for claim ids: <folder>.<snake_case>, the folder the file is in.
_ID = re.compile(r"^[a-z]+\.[a-z0-9_]+$")


@pytest.fixture(scope="module")
def collected():
    return discover([PROOFS])


def test_every_claim_has_quote_location_kind_assumptions(collected):
    for item in collected:
        c = item.claim
        assert c.quote.strip(), c.id
        assert c.location.strip(), c.id
        assert isinstance(c.kind, Kind), c.id
        assert c.assumptions and all(a.strip() for a in c.assumptions), c.id
        if c.provenance == "NOT FOUND":
            assert "NOT FOUND" in c.quote, c.id


def test_extensions_and_objections_name_an_existing_claim(collected):
    ids = {item.claim.id for item in collected}
    for item in collected:
        c = item.claim
        if c.kind in (Kind.EXTENSION, Kind.REVIEWER):
            assert c.extends in ids and c.extends != c.id, c.id
            assert next(
                i.claim for i in collected if i.claim.id == c.extends
            ).kind not in (Kind.EXTENSION, Kind.REVIEWER), c.id
        else:
            assert c.extends is None, c.id


def test_ids_follow_the_folder(collected):
    for item in collected:
        assert _ID.match(item.claim.id), item.claim.id
        assert item.claim.id.split(".")[0] == item.path.parent.name, item.claim.id


def test_claim_objects_are_named_after_their_id(collected):
    """One naming rule: the module constant is the id's last part in upper case."""
    for item in collected:
        c = item.claim
        module = sys.modules[c.checks[0].run.__module__]
        names = [n for n, v in vars(module).items() if v is c]
        if Path(module.__file__).resolve() == item.path.resolve():
            assert names == [c.id.split(".")[-1].upper()], (c.id, names)


EXAMPLES = PROOFS.parent / "examples" / "claims"


@pytest.mark.parametrize("root", [PROOFS, EXAMPLES], ids=["proofs", "examples"])
def test_one_idiom_in_every_claim_file(root):
    """Results come from the adapters and constructors, precision from the harness's
    float64 scope: no hand-built CheckResult, no precision switch, in proofs/ and in
    the example to copy (docs/proofs.md's rules)."""
    banned = ("CheckResult(", "enable_x64", "jax_enable_x64", "config.update(")
    files = sorted(root.rglob("*.py"))
    assert files
    for path in files:
        text = path.read_text()
        found = [b for b in banned if b in text]
        assert not found, f"{path.relative_to(root)}: {found}"


def test_the_examples_numeric_checks_require_float64():
    """Every numeric check of the example to copy starts with require_float64()."""
    seen = 0
    for path in sorted(EXAMPLES.rglob("*.py")):
        module = path.read_text()
        for name, body in re.findall(
            r"\ndef (_\w+)\(quick: bool = False\) -> CheckResult:\n(.*?)\n\n\n",
            module,
            flags=re.S,
        ):
            assert "require_float64()" in body, f"{path.name}: {name}"
            seen += 1
    assert seen >= 3


#: One naming rule for checks: the name starts with the route of its method kind.
_ROUTE = {
    Method.SYMBOLIC: ("sympy", "exact"),
    Method.Z3: ("z3",),
    Method.INTERVAL: ("interval",),
    Method.PROPERTY: ("hypothesis",),
    Method.MEASUREMENT: ("SmolLM2", "tiny model"),
}


def test_check_names_start_with_their_route(collected):
    for item in collected:
        claim = item.claim
        checks = [*claim.checks, *(claim.correction.checks if claim.correction else ())]
        for check in checks:
            routes = _ROUTE.get(check.method)
            if routes:
                assert check.name.startswith(routes), (claim.id, check.name)

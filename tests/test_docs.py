"""The documentation: generated tables are current, every page is reachable from the
README, and every relative link (and its #anchor) resolves."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def _script(name: str):
    path = ROOT / "scripts" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_docs_generated_conventions_table_is_up_to_date():
    docgen = _script("docgen")
    stale = docgen.stale_blocks(_script("gen_conventions_table").blocks(), ROOT)
    assert stale == [], "run `make docs` (scripts/gen_conventions_table.py)"


def test_docs_generated_block_check_can_fail(tmp_path):
    # Meta-test: a hand edit inside a block is seen, and rewriting restores it.
    docgen = _script("docgen")
    page = tmp_path / "page.md"
    page.write_text(
        "intro\n<!-- BEGIN generated:t -->\nold\n<!-- END generated:t -->\nend\n"
    )
    blocks = {("page.md", "t"): "| a |\n|---|\n| 1 |"}
    assert docgen.stale_blocks(blocks, tmp_path) == ["page.md:t"]
    assert docgen.write_blocks(blocks, tmp_path) == ["page.md:t"]
    assert docgen.stale_blocks(blocks, tmp_path) == []
    assert page.read_text().startswith("intro\n") and page.read_text().endswith("end\n")
    with pytest.raises(ValueError, match="expected one"):
        docgen.replace_block("no markers", "t", "x")


def _links(path: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.DOTALL)
    return re.findall(r"\]\(([^)\s]+)\)", text)


def _slug(heading: str) -> str:
    # GitHub's anchor: lower case, punctuation dropped, spaces to hyphens
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.DOTALL)
    return {_slug(h) for h in re.findall(r"(?m)^#+ (.*)$", text)}


def test_docs_every_page_is_linked_from_the_readme():
    linked = {Path(link.split("#")[0]).name for link in _links(ROOT / "README.md")}
    pages = {p.name for p in DOCS.glob("*.md")}
    assert pages - linked == set()


@pytest.mark.parametrize(
    "page", [ROOT / "README.md", *sorted(DOCS.glob("*.md"))], ids=lambda p: p.name
)
def test_docs_relative_links_resolve(page):
    for link in _links(page):
        if re.match(r"[a-z]+:", link):
            continue  # an external address
        target, _, anchor = link.partition("#")
        path = (page.parent / target).resolve() if target else page
        assert path.exists(), f"{page.name}: {link} points to no file"
        if anchor and path.suffix == ".md":
            assert anchor in _anchors(path), f"{page.name}: {link}: no such heading"


def test_docs_anchor_check_can_fail(tmp_path):
    page = tmp_path / "a.md"
    page.write_text("# CLI: `theorycheck predict`\n")
    assert "cli-theorycheck-predict" in _anchors(page)
    assert "cli-predict" not in _anchors(page)


def _where_things_go_paths(text: str) -> list[str]:
    """The backticked paths in the rows of development.md's "Where things go" table
    (``<name>`` placeholders excluded)."""
    section = text.split("## Where things go", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ")][1:]
    paths = []
    for row in rows:
        for item in re.findall(r"`([^`]+)`", row):
            if "<" not in item and re.fullmatch(
                r"[\w./-]+\.(py|md|json)|[\w/.-]+/", item
            ):
                paths.append(item)
    return paths


def test_where_things_go_names_only_files_that_exist():
    paths = _where_things_go_paths((DOCS / "development.md").read_text())
    assert len(paths) >= 30
    missing = [p for p in paths if not (ROOT / p).exists()]
    assert not missing, f"development.md names files that do not exist: {missing}"


def test_where_things_go_check_can_fail():
    text = (
        "## Where things go\n\n| a | b | c |\n|---|---|---|\n"
        "| x | `theorycheck/gone.py` | y |\n"
    )
    assert _where_things_go_paths(text) == ["theorycheck/gone.py"]
    assert not (ROOT / "theorycheck/gone.py").exists()


def test_every_registry_rule_has_a_row_in_the_convexity_table():
    from theorycheck.losses import LOSSES

    gen = _script("gen_convexity_table")
    text = (ROOT / gen.PAGE).read_text()
    block = text.split(f"<!-- BEGIN generated:{gen.BLOCK} -->", 1)[1].split(
        "<!-- END", 1
    )[0]
    rows = {m for m in re.findall(r"^\| `(\w+)` \|", block, flags=re.M)}
    missing = sorted(set(LOSSES) - rows)
    assert not missing, f"rules without a row in {gen.PAGE}: {missing}"

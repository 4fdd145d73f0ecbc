"""Discovery finds module-level claims in files and folders, as pytest finds tests."""

import textwrap

import pytest

from theorycheck import BadInput
from theorycheck.claims import discover, select

_HEADER = """\
from theorycheck.claims import Check, CheckResult, Claim, Method, Outcome

def _ok():
    return CheckResult(Outcome.PASS, "ok")

def make(cid):
    return Claim(cid, "s", "DERIVED", "st", (Check("a", Method.Z3, _ok),))
"""


def _write(path, body):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(_HEADER + textwrap.dedent(body))
    return path


def test_discover_collects_in_definition_order(tmp_path):
    f = _write(tmp_path / "mine.py", "B = make('x.second')\nA = make('x.first')\n")
    ids = [c.claim.id for c in discover([f])]
    assert ids == ["x.second", "x.first"]


def test_discover_walks_folders_and_skips_private_files(tmp_path):
    _write(tmp_path / "b.py", "C = make('b.one')\n")
    _write(tmp_path / "a.py", "C = make('a.one')\n")
    _write(tmp_path / "_helpers.py", "C = make('hidden.one')\n")
    _write(tmp_path / "sub" / "c.py", "C = make('c.one')\n")
    (tmp_path / "README.md").write_text("not python")
    ids = [c.claim.id for c in discover([tmp_path])]
    assert ids == ["a.one", "b.one", "c.one"]


def test_discover_package_with_relative_imports(tmp_path):
    pkg = tmp_path / "mypaper"
    _write(pkg / "__init__.py", "")
    _write(pkg / "_common.py", "SHARED = make('shared.claim')\n")
    _write(pkg / "prop1.py", "from ._common import SHARED\nP = make('p.one')\n")
    ids = [c.claim.id for c in discover([pkg])]
    # SHARED is a module-level Claim of prop1 too (imported), collected once.
    assert ids == ["shared.claim", "p.one"]


def test_discover_duplicate_id_is_bad_input(tmp_path):
    _write(tmp_path / "one.py", "A = make('dup.id')\n")
    _write(tmp_path / "two.py", "B = make('dup.id')\n")
    with pytest.raises(BadInput, match="dup.id"):
        discover([tmp_path])


def test_discover_bad_paths_are_bad_input(tmp_path):
    with pytest.raises(BadInput, match="does not exist"):
        discover([tmp_path / "nope"])
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(BadInput, match="not a Python file"):
        discover([tmp_path / "notes.txt"])
    broken = tmp_path / "broken.py"
    broken.write_text("raise RuntimeError('bad module')\n")
    with pytest.raises(BadInput, match="bad module"):
        discover([broken])


def test_select_filters_and_refuses_unknown_ids(tmp_path):
    f = _write(tmp_path / "s.py", "A = make('s.a')\nB = make('s.b')\n")
    found = discover([f])
    assert [c.claim.id for c in select(found, ["s.b"])] == ["s.b"]
    assert len(select(found, [])) == 2
    with pytest.raises(BadInput, match="s.zzz"):
        select(found, ["s.zzz"])


def test_discover_leaves_sys_path_as_it_was(tmp_path):
    import sys

    pkg = tmp_path / "paperpkg"
    _write(pkg / "__init__.py", "")
    _write(pkg / "c.py", "C = make('pkg.c')\n")
    _write(tmp_path / "loose" / "l.py", "L = make('loose.l')\n")
    before = list(sys.path)
    ids = [c.claim.id for c in discover([pkg, tmp_path / "loose"])]
    assert ids == ["pkg.c", "loose.l"]
    assert sys.path == before


def test_two_paper_packages_each_with_their_own_common(tmp_path):
    for name, value in (("one", "'first'"), ("two", "'second'")):
        pkg = tmp_path / "papers" / name
        _write(pkg / "__init__.py", "")
        _write(pkg / "_common.py", f"TAG = {value}\n")
        _write(
            pkg / "claim.py", f"from ._common import TAG\nC = make('{name}.' + TAG)\n"
        )
    _write(tmp_path / "papers" / "__init__.py", "")
    ids = [c.claim.id for c in discover([tmp_path / "papers"])]
    assert ids == ["one.first", "two.second"]


def test_a_package_of_the_same_name_elsewhere_is_imported_afresh(tmp_path):
    for i in (1, 2):
        pkg = tmp_path / f"copy{i}" / "samename"
        _write(pkg / "__init__.py", "")
        _write(pkg / "c.py", f"C = make('same.v{i}')\n")
        assert [c.claim.id for c in discover([pkg])] == [f"same.v{i}"]

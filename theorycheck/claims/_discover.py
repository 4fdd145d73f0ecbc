"""Finding claims in files and folders, the way pytest finds tests.

A path is a ``.py`` file or a folder. In a folder every ``*.py`` file whose name does
not start with ``_`` is collected, recursively and in sorted order (so ``__init__.py``
and private helpers such as ``_common.py`` are not); hidden folders and ``__pycache__``
are skipped. A file named explicitly is always collected. Within a module the claims are
the module-level :class:`~theorycheck.claims.Claim` objects, in definition order; no
other registration. A claim object reached twice (imported by a second module) is
collected once; two different claims with one id are an error.

Modules inside a package (a folder with ``__init__.py``) are imported by their dotted
name, so relative imports (``from ._common import ...``) work: this is the way to share
helpers, and two folders may each have their own ``_common.py``. A loose file is
imported under a name derived from its path, with its folder on ``sys.path`` while it
imports, so a sibling helper imports by its bare name. Either way the path entry is
removed once the module has imported: discovery leaves ``sys.path`` as it was.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import importlib.util
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from types import ModuleType

from theorycheck._errors import BadInput
from theorycheck.claims._types import Claim


@dataclasses.dataclass(frozen=True)
class Collected:
    """A discovered claim and the file it was found in."""

    claim: Claim
    path: Path


def _files(path: Path) -> list[Path]:
    if path.is_file():
        if path.suffix != ".py":
            raise BadInput(f"{path} is not a Python file")
        return [path]
    if path.is_dir():
        found = []
        for f in sorted(path.rglob("*.py")):
            rel = f.relative_to(path).parts
            if f.name.startswith("_"):
                continue
            if any(p.startswith(".") or p == "__pycache__" for p in rel[:-1]):
                continue
            found.append(f)
        return found
    raise BadInput(f"{path} does not exist")


def _package_root(file: Path) -> Path | None:
    """The outermost folder above ``file`` that is still a package, if any."""
    root = None
    folder = file.parent
    while (folder / "__init__.py").is_file():
        root = folder
        if folder.parent == folder:
            break
        folder = folder.parent
    return root


@contextlib.contextmanager
def _on_path(folder: Path):
    """``folder`` on ``sys.path`` while a module imports, removed afterwards (also
    on an error): discovery leaves ``sys.path`` as it found it."""
    entry = str(folder)
    added = entry not in sys.path
    if added:
        sys.path.insert(0, entry)
    try:
        yield
    finally:
        if added and entry in sys.path:
            sys.path.remove(entry)


def _same_file(module: ModuleType, file: Path) -> bool:
    found = getattr(module, "__file__", None)
    return found is not None and Path(found).resolve() == file


def _forget(top: str) -> None:
    """Drops package ``top`` and its submodules from ``sys.modules`` (another folder
    of the same name was imported before)."""
    for name in [n for n in sys.modules if n == top or n.startswith(top + ".")]:
        del sys.modules[name]


def _import_package_module(file: Path, root: Path) -> ModuleType:
    base = root.parent
    parts = file.relative_to(base).with_suffix("").parts
    name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
    top = sys.modules.get(parts[0])
    if top is not None and not _same_file(top, root / "__init__.py"):
        _forget(parts[0])
    with _on_path(base):
        module = importlib.import_module(name)
    if not _same_file(module, file):
        raise ImportError(f"{name} resolves to {module.__file__}, not to {file}")
    return module


def _import(file: Path) -> ModuleType:
    file = file.resolve()
    root = _package_root(file)
    if root is not None:
        return _import_package_module(file, root)
    name = "theorycheck_claims_" + "_".join(
        p.replace("-", "_").replace(".", "_") for p in file.with_suffix("").parts[1:]
    )
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        with _on_path(file.parent):
            spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def _module_claims(module: ModuleType) -> Iterable[Claim]:
    for value in list(vars(module).values()):
        if isinstance(value, Claim):
            yield value


def discover(paths: Sequence[str | Path]) -> list[Collected]:
    """Collects the claims under ``paths``.

    Args:
        paths: ``.py`` files and folders.

    Returns:
        The claims with their files, in path order then definition order.

    Raises:
        BadInput: a path that does not exist or is no Python file, a module that
            fails to import (its error in the message), or one id used by two
            different claims.
    """
    seen: dict[int, Collected] = {}
    by_id: dict[str, Collected] = {}
    out: list[Collected] = []
    for raw in paths:
        for file in _files(Path(raw)):
            try:
                module = _import(file)
            except Exception as exc:  # noqa: BLE001 -- any import error is bad input
                raise BadInput(
                    f"{file}: cannot import: {type(exc).__name__}: {exc}"
                ) from exc
            for claim in _module_claims(module):
                if id(claim) in seen:
                    continue
                if claim.id in by_id:
                    first = by_id[claim.id].path
                    raise BadInput(
                        f"claim id {claim.id!r} is used twice: in {first} and in {file}"
                    )
                item = Collected(claim, file)
                seen[id(claim)] = by_id[claim.id] = item
                out.append(item)
    return out


def select(collected: Sequence[Collected], only: Sequence[str]) -> list[Collected]:
    """The claims whose ids (or earlier ids, ``Claim.aliases``) are in ``only`` (all
    when empty), in collection order.

    Raises:
        BadInput: an id in ``only`` that no collected claim has.
    """
    if not only:
        return list(collected)
    known = {cid for c in collected for cid in (c.claim.id, *c.claim.aliases)}
    for wanted in only:
        if wanted not in known:
            raise BadInput(f"only {wanted!r}: no such claim id")
    wanted = set(only)
    return [c for c in collected if wanted & {c.claim.id, *c.claim.aliases}]

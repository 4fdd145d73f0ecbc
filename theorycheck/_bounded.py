"""Bounded reading of the user's config and batch files: a file past a limit is refused
in one line (:class:`~theorycheck._errors.BadInput`) before it can exhaust the
stack, the memory or the clock.

* **size**: the file's size is checked before it is read (:data:`MAX_CONFIG_BYTES`,
  :data:`MAX_BATCH_BYTES`; an ``.npz`` archive by the sum of its members'
  uncompressed sizes, so a zip bomb is refused unopened);
* **depth**: nesting deeper than :data:`MAX_DEPTH` (a 5,000-deep YAML flow list, a
  100,000-deep JSON list) is refused: YAML is measured on libyaml's event stream, JSON
  on the parsed value (the parser's own recursion limit stops deeper text first);
* **expansion**: a YAML alias stands for a copy of its anchor, and an OmegaConf
  interpolation ``${key}`` for a copy of that key's value: the size of the config
  once every alias and interpolation is expanded is computed from the text (without
  expanding it) and refused past :data:`MAX_CONFIG_NODES` nodes or
  :data:`MAX_EXPANDED_CHARS` characters (an alias bomb is refused in milliseconds).

Examples:
    >>> parse_config_text("a: [1, 2]", "c.yaml", "config")
    {'a': [1, 2]}
    >>> parse_config_text("[" * 100 + "]" * 100, "c.json", "config")
    Traceback (most recent call last):
    ...
    theorycheck._errors.BadInput: config: nested more than 64 levels deep (limit)
"""

from __future__ import annotations

import json
import math
import os
import re
import zipfile
from pathlib import Path
from typing import Any

from theorycheck._errors import BadInput

__all__ = [
    "MAX_BATCH_BYTES",
    "MAX_CONFIG_BYTES",
    "MAX_CONFIG_NODES",
    "MAX_DEPTH",
    "MAX_EXPANDED_CHARS",
    "check_depth",
    "check_interpolations",
    "check_npz_size",
    "load_json",
    "parse_config_text",
    "read_bounded_text",
    "refuse_nan",
]

#: the largest config file read (a full verl trainer config is ~30 kB).
MAX_CONFIG_BYTES = 1 << 20
#: the largest batch file read (JSON text, or an .npz archive's members unpacked).
MAX_BATCH_BYTES = 256 << 20
#: the deepest nesting of lists and mappings read (verl's configs nest ~6 deep).
MAX_DEPTH = 64
#: the most values (mappings, lists and scalars) a config may hold once its aliases
#: are expanded.
MAX_CONFIG_NODES = 20_000
#: the most characters one config string may hold once its interpolations resolve.
MAX_EXPANDED_CHARS = 1 << 20


def read_bounded_text(path: str | os.PathLike, what: str, max_bytes: int) -> str:
    """The text of ``path`` if it holds at most ``max_bytes`` bytes.

    Raises:
        BadInput: too large, unreadable, or not UTF-8 text.
    """
    try:
        size = os.stat(path).st_size
        if size > max_bytes:
            raise BadInput(
                f"{what}: {size:,} bytes; at most {max_bytes:,} are read (limit)"
            )
        with open(path, "rb") as fh:
            data = fh.read(max_bytes + 1)
    except OSError as err:
        raise BadInput(f"{what}: unreadable ({err.strerror or err})") from None
    if len(data) > max_bytes:  # it grew while read (a pipe, a file being written)
        raise BadInput(f"{what}: more than {max_bytes:,} bytes (limit)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise BadInput(f"{what}: not UTF-8 text ({err.reason})") from None


def check_npz_size(path: str | os.PathLike, what: str, max_bytes: int) -> None:
    """Refuses an ``.npz`` archive whose members unpack to more than ``max_bytes``
    (read from the zip directory: nothing is decompressed)."""
    try:
        with zipfile.ZipFile(path) as archive:
            total = sum(info.file_size for info in archive.infolist())
    except (zipfile.BadZipFile, OSError, ValueError):
        return  # not a zip archive: numpy's reader names the problem
    if total > max_bytes:
        raise BadInput(
            f"{what}: unpacks to {total:,} bytes; at most {max_bytes:,} are read"
        )


def check_depth(value: Any, what: str, max_depth: int = MAX_DEPTH) -> int:
    """The number of values in ``value`` (lists, dicts, scalars), checked without
    recursion against ``max_depth`` levels of nesting."""
    count, todo = 0, [(value, 0)]
    while todo:
        item, depth = todo.pop()
        count += 1
        if isinstance(item, (list, tuple, dict)):
            if depth + 1 > max_depth:
                too_deep = f"nested more than {max_depth} levels deep (limit)"
                raise BadInput(f"{what}: {too_deep}")
            children = item.values() if isinstance(item, dict) else item
            todo.extend((child, depth + 1) for child in children)
    return count


def _json(text: str, what: str) -> Any:
    try:
        value = json.loads(text)
    except RecursionError:
        raise BadInput(
            f"{what}: nested too deeply; at most {MAX_DEPTH} levels are read"
        ) from None
    except ValueError as err:
        line = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise BadInput(f"{what}: not valid YAML/JSON ({line})") from None
    check_depth(value, what)
    return value


def _yaml_loader():
    import yaml

    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Sizes:
    """Expanded sizes along libyaml's event stream: one open collection per level."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.anchors: dict[str, int] = {}
        self.open: list[tuple[str | None, int]] = []  # (anchor, size so far)
        self.total = 0

    def add(self, size: int) -> None:
        if self.open:
            anchor, so_far = self.open[-1]
            self.open[-1] = (anchor, so_far + size)
        else:
            self.total += size
        if self.total + sum(s for _, s in self.open) > MAX_CONFIG_NODES:
            raise BadInput(
                f"{self.what}: more than {MAX_CONFIG_NODES:,} values once its YAML "
                "aliases are expanded (limit)"
            )

    def event(self, event) -> None:
        import yaml

        if isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
            if len(self.open) >= MAX_DEPTH:
                raise BadInput(
                    f"{self.what}: nested more than {MAX_DEPTH} levels deep (limit)"
                )
            self.open.append((event.anchor, 1))
        elif isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
            anchor, size = self.open.pop()
            self._done(anchor, size)
        elif isinstance(event, yaml.ScalarEvent):
            self._done(event.anchor, 1)
        elif isinstance(event, yaml.AliasEvent):
            self.add(self.anchors.get(event.anchor, 1))

    def _done(self, anchor: str | None, size: int) -> None:
        if anchor is not None:
            self.anchors[anchor] = size
        self.add(size)


def _yaml(text: str, what: str) -> Any:
    import yaml

    loader = _yaml_loader()
    sizes = _Sizes(what)
    try:
        for event in yaml.parse(text, Loader=loader):
            sizes.event(event)
        return yaml.load(text, Loader=loader)
    except RecursionError:
        raise BadInput(
            f"{what}: nested too deeply; at most {MAX_DEPTH} levels are read"
        ) from None
    except yaml.YAMLError as err:
        line = str(err).splitlines()[0] if str(err) else type(err).__name__
        if "flow level" in line:  # libyaml's own nesting limit, met first
            line = f"nested too deeply; at most {MAX_DEPTH} levels are read"
            raise BadInput(f"{what}: {line}") from None
        raise BadInput(f"{what}: not valid YAML/JSON ({line})") from None


#: ``${key}`` (or ``${.key}``, ``${..key}``): an OmegaConf reference to another key.
_REFERENCE = re.compile(r"\$\{(\.*)([A-Za-z_][\w.\-]*)\}")


def _strings(value: Any, prefix: tuple[str, ...] = ()):
    """``(path, text)`` of every string in a parsed config (depth already bounded)."""
    todo = [(value, prefix)]
    while todo:
        item, path = todo.pop()
        if isinstance(item, dict):
            todo.extend((v, (*path, str(k))) for k, v in item.items())
        elif isinstance(item, list):
            todo.extend((v, (*path, str(i))) for i, v in enumerate(item))
        elif isinstance(item, str):
            yield path, item


def _target(path: tuple[str, ...], dots: str, key: str) -> str:
    base = list(path[:-1])  # the node's container
    if dots:
        base = base[: len(base) - (len(dots) - 1)] if len(dots) > 1 else base
        return ".".join([*base, key])
    return key


def check_interpolations(value: Any, what: str) -> None:
    """Refuses a config whose ``${...}`` references would expand a string past
    :data:`MAX_EXPANDED_CHARS` characters (each reference doubling the one before:
    an interpolation bomb), computed over the references without resolving them."""
    texts = {".".join(path): (path, text) for path, text in _strings(value)}
    sizes: dict[str, int] = {}
    for start in texts:
        _expanded(start, texts, sizes, what)


def _expanded(start: str, texts: dict, sizes: dict[str, int], what: str) -> int:
    """Expanded length of the string at key ``start`` (iterative; a cycle counts as
    its literal length: OmegaConf refuses it itself)."""
    stack, visiting = [start], {start}
    while stack:
        key = stack[-1]
        path, text = texts[key]
        refs = [_target(path, d, k) for d, k in _REFERENCE.findall(text)]
        todo = [r for r in refs if r in texts and r not in sizes and r not in visiting]
        if todo:
            stack.append(todo[0])
            visiting.add(todo[0])
            continue
        stack.pop()
        visiting.discard(key)
        size = len(text) + sum(sizes.get(r, 0) for r in refs)
        if size > MAX_EXPANDED_CHARS:
            raise BadInput(
                f"{what}: {key} expands to more than {MAX_EXPANDED_CHARS:,} "
                "characters through its ${...} interpolations (limit)"
            )
        sizes[key] = size
    return sizes[start]


def refuse_nan(value: Any, what: str) -> None:
    """Refuses a NaN anywhere in a parsed config, naming its key (no setting means
    "not a number"; YAML's ``.nan`` and JSON's ``NaN`` would pass as values)."""
    todo = [(value, "")]
    while todo:
        item, key = todo.pop()
        if isinstance(item, dict):
            todo.extend((v, f"{key}.{k}" if key else str(k)) for k, v in item.items())
        elif isinstance(item, list):
            todo.extend((v, f"{key}[{i}]") for i, v in enumerate(item))
        elif isinstance(item, float) and math.isnan(item):
            raise BadInput(f"{what}: {key or 'the value'} is NaN; expected a number")


def load_json(path: str | os.PathLike, what: str, max_bytes: int) -> Any:
    """A JSON file read within ``max_bytes`` and :data:`MAX_DEPTH` (a batch).

    Raises:
        BadInput: too large, unreadable, not JSON, or nested too deeply.
    """
    return _json(read_bounded_text(path, what, max_bytes), what)


def parse_config_text(text: str, name: str, what: str) -> Any:
    """A config's text parsed (JSON for a ``.json`` NAME, YAML otherwise) within the
    depth and expansion limits of the module doc.

    Raises:
        BadInput: not valid YAML/JSON, or past a limit (named).
    """
    if Path(name).suffix.lower() == ".json":
        value = _json(text, what)
    else:
        value = _yaml(text, what)
    if check_depth(value, what) > MAX_CONFIG_NODES:
        raise BadInput(f"{what}: more than {MAX_CONFIG_NODES:,} values (limit)")
    return value

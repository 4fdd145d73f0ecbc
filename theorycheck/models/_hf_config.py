"""``config.json`` of a Hugging Face checkpoint -> :class:`ModelConfig`, strictly.

Fields that change the mathematics (rope scaling, activation, sliding window, ...) must
have the values this implementation computes; anything else is refused with the file and
the field named, never silently ignored.
"""

from __future__ import annotations

import json
import os

from theorycheck._errors import BadInput
from theorycheck.models._config import ModelConfig
from theorycheck.models._families import FAMILIES
from theorycheck.models._family import ConfigFields

#: architecture name -> the family module that reads it.
ARCHITECTURES = {
    arch: module for module in FAMILIES.values() for arch in module.hf_architectures
}

#: field -> values this implementation supports (a missing field counts as supported):
#: every family's fields (the first family to name a field sets its entry), so that a
#: field some family gives a meaning to is never silently ignored; the checkpoint's own
#: family's entries take precedence over these.
_REQUIRED_VALUES: dict[str, tuple] = {}
for _module in FAMILIES.values():
    for _field, _allowed in _module.hf_required.items():
        _REQUIRED_VALUES.setdefault(_field, _allowed)


def config_from_hf(raw: dict, path: str = "config.json") -> ModelConfig:
    """Builds a :class:`ModelConfig` from a parsed ``config.json``.

    Args:
        raw: the parsed JSON object.
        path: the file it came from (for error messages).

    Returns:
        The config; raises :class:`BadInput` naming the file and field otherwise.
    """
    archs = raw.get("architectures")
    if not isinstance(archs, list) or len(archs) != 1:
        raise BadInput(
            f"{path}: field 'architectures' = {archs!r} must list exactly "
            f"one of {sorted(ARCHITECTURES)}"
        )
    arch = archs[0]
    if arch not in ARCHITECTURES:
        raise BadInput(
            f"{path}: unknown architecture {arch!r} in field "
            f"'architectures'; supported: {sorted(ARCHITECTURES)}"
        )
    module = ARCHITECTURES[arch]
    required = {**_REQUIRED_VALUES, **module.hf_required}
    for field, allowed in required.items():
        if raw.get(field) not in allowed:
            raise BadInput(
                f"{path}: field {field!r} = {raw[field]!r} is not supported "
                f"(supported: {[a for a in allowed if a is not None]})"
            )
    try:
        return module.hf_config(arch, ConfigFields(raw, path), raw, path)
    except ValueError as err:
        raise BadInput(f"{path}: {err}") from None


def read_hf_config(directory: str) -> ModelConfig:
    """Reads and checks ``<directory>/config.json``.

    Args:
        directory: an HF-format checkpoint directory.

    Returns:
        Its :class:`ModelConfig`.
    """
    path = os.path.join(directory, "config.json")
    if not os.path.isfile(path):
        raise BadInput(
            f"{path}: missing (an HF checkpoint directory needs config.json)"
        )
    try:
        with open(path, encoding="utf-8") as fh:
            raw = json.load(fh)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise BadInput(f"{path}: not valid JSON ({err})") from None
    if not isinstance(raw, dict):
        raise BadInput(f"{path}: expected a JSON object")
    return config_from_hf(raw, path)

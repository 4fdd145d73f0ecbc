"""What a replay reads, checked before anything runs: the results file (JSON, its
schema, the types and finiteness of its config, the experiment it belongs to, its
units) and the recorded rollouts (a readable ``rollouts.npz`` holding the batch of
every unit replayed). Anything else is bad input, refused in one line."""

from __future__ import annotations

import dataclasses
import json
import math
import os

from experiments.runner.bank import RolloutBank
from experiments.runner.store import recorded_config
from theorycheck._errors import BadInput


def read_results(src: str, flag: str = "--replay") -> tuple[str, dict]:
    """``(path, data)`` of ``src``'s results file (``src`` a folder or the file)."""
    path = src if src.endswith(".json") else os.path.join(src, "results.json")
    if not os.path.isfile(path):
        raise BadInput(f"{flag} {src}: no results.json there")
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError, RecursionError) as err:
        why = " ".join(str(err).split())[:120]
        raise BadInput(f"{flag} {src}: {path} is not readable JSON ({why})") from None
    if not isinstance(data, dict):
        raise BadInput(f"{flag} {src}: {path} holds no JSON object")
    for key in ("config", "units"):
        if not isinstance(data.get(key), dict):
            raise BadInput(f"{flag} {src}: {path}'s {key!r} is not a JSON object")
    if not data["units"]:
        raise BadInput(f"{flag} {src}: {path} holds no finished unit")
    odd = [u for u, r in data["units"].items() if not isinstance(r, dict)]
    if odd:
        raise BadInput(f"{flag} {src}: unit {odd[0]!r} of {path} is not an object")
    return path, data


def _type_error(value, default) -> str | None:
    """Why ``value`` cannot be a config field whose default is ``default`` (None
    when it can)."""
    if default is None:
        return None
    if isinstance(default, bool):
        ok = isinstance(value, bool)
    elif isinstance(default, int):
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif isinstance(default, float):
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        if ok and not math.isfinite(value):
            return "is not finite"
    elif isinstance(default, tuple):
        ok = isinstance(value, list)
    else:
        ok = isinstance(value, type(default))
    return None if ok else f"is not a {type(default).__name__}"


def config_of(exp, data: dict, src: str, name: str, flag: str = "--replay"):
    """The experiment's ``Config`` of a results file's recorded config.

    Raises:
        BadInput: a field the experiment's config has not (another experiment's
            file), a value of the wrong type or not finite, a config refused.
    """
    fields = {f.name: f.default for f in dataclasses.fields(exp.Config)}
    foreign = sorted(set(data["config"]) - set(fields))
    if foreign:
        raise BadInput(
            f"{flag} {src}: its config has {', '.join(foreign[:3])}, which "
            f"experiments.{name} has not (a results file of another experiment?)"
        )
    values = recorded_config(data, fields)
    for key, value in values.items():
        why = _type_error(value, fields[key])
        if why:
            raise BadInput(f"{flag} {src}: config {key} = {value!r} {why}")
    try:
        return exp.Config(**{k: _untuple(v) for k, v in values.items()})
    except (TypeError, ValueError) as err:  # BadInput is a ValueError
        raise BadInput(f"{flag} {src}: its config is refused: {err}") from None


def check_units(recorded: dict, units: dict, chosen: list[str], src: str) -> None:
    """Every unit replayed (``chosen``) is one of the results file's (``recorded``)
    and one the experiment has with the recorded config (``units``)."""
    absent = [u for u in chosen if u not in recorded]
    if absent:
        raise BadInput(f"--replay-units {', '.join(absent[:5])}: not in {src}")
    foreign = [u for u in chosen if u not in units]
    if foreign:
        raise BadInput(
            f"--replay {src}: unit {foreign[0]!r} is not a unit of this experiment "
            "with the recorded config (a results file of another experiment?)"
        )


def read_bank(src: str, path: str, needed) -> RolloutBank:
    """The recorded rollouts beside ``path``, holding every ``(seed, engine)`` batch
    of ``needed`` with its readable ``meta``."""
    where = os.path.join(os.path.dirname(path), "rollouts.npz")
    if not os.path.isfile(where):
        raise BadInput(f"--replay {src}: no rollouts.npz beside results.json")
    bank = RolloutBank("", path=where)  # bad input where it is not readable
    for seed, engine in sorted(set(needed)):
        rec = bank.get(seed, engine)
        try:
            json.loads(str(rec["meta"]))
        except (TypeError, KeyError, ValueError):
            raise BadInput(
                f"--replay {src}: {where} holds no readable rollouts of seed {seed} "
                f"({engine})"
            ) from None
    return bank


def _untuple(v):
    return (
        tuple(tuple(x) if isinstance(x, list) else x for x in v)
        if isinstance(v, list)
        else v
    )

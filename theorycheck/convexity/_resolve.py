"""Resolving a SPEC (registry name or ``path/to/file.py:function``) and its inputs.

A loss is ``loss(logits, sampled, **inputs)``. Inputs it needs and the user did not set
get documented defaults: ``adv = 1``, behavior probability of the sampled token
``q = 1/2`` (turned into ``behavior_logp`` = log of ``[q at k, (1-q)/(V-1) elsewhere]``
when the loss reads ``behavior_logp``), ``old_logits = 0``. Values set with ``--set``
are
read exactly (``0.2`` -> ``1/5``) for the symbolic engines.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import inspect
import math
import pathlib
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from theorycheck._errors import BadInput

__all__ = ["ResolvedLoss", "resolve", "build_inputs"]

#: defaults for inputs a loss needs and the user did not set.
INPUT_DEFAULTS = {"adv": 1.0, "q": 0.5}


@dataclasses.dataclass(frozen=True)
class ResolvedLoss:
    """A loss ready to check: name, JAX function, and the names of its inputs."""

    name: str
    loss: Callable
    accepts: frozenset[str]
    required: frozenset[str]
    registered: bool
    symbolic: Callable | None = None


def _signature(fn: Callable) -> tuple[frozenset[str], frozenset[str], bool]:
    try:
        params = list(inspect.signature(fn).parameters.values())[2:]
    except (TypeError, ValueError) as err:
        raise BadInput(f"cannot read the signature of {fn!r}: {err}") from err
    var_kw = any(p.kind is p.VAR_KEYWORD for p in params)
    named = [p for p in params if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)]
    accepts = frozenset(p.name for p in named)
    required = frozenset(p.name for p in named if p.default is p.empty)
    return accepts, required, var_kw


def resolve(spec: str) -> ResolvedLoss:
    """Finds the loss named by ``spec``.

    Args:
        spec: a registry name (``"ppo"``) or ``path/to/file.py:function``.

    Returns:
        A :class:`ResolvedLoss`.

    Raises:
        BadInput: unknown name, missing file, missing or non-callable function.

    Examples:
        >>> resolve("sft").name
        'sft'
    """
    if ":" not in spec and not spec.endswith(".py"):
        from theorycheck.losses import LOSSES

        if spec not in LOSSES:
            raise BadInput(
                f"unknown loss {spec!r}; known: {', '.join(sorted(LOSSES))} "
                "or path/to/file.py:function"
            )
        entry = LOSSES[spec]
        accepts, required, _ = _signature(entry.loss)
        return ResolvedLoss(spec, entry.loss, accepts, required, True, entry.symbolic)
    path_text, _, func = spec.rpartition(":") if ":" in spec else (spec, "", "loss")
    path = pathlib.Path(path_text)
    if not path.is_file():
        raise BadInput(f"loss file {path_text!r} does not exist")
    module_spec = importlib.util.spec_from_file_location(
        f"_user_loss_{path.stem}", path
    )
    module = importlib.util.module_from_spec(module_spec)
    try:
        module_spec.loader.exec_module(module)
    except Exception as err:  # the user's file: report whatever it raised
        raise BadInput(
            f"loading {path_text!r} raised {type(err).__name__}: {err}"
        ) from err
    fn = getattr(module, func or "loss", None)
    if not callable(fn):
        raise BadInput(f"{path_text!r} has no function {func or 'loss'!r}")
    accepts, required, var_kw = _signature(fn)
    return ResolvedLoss(f"{path.name}:{func or 'loss'}", fn, accepts, required, False)


def _exact(value: float):
    import sympy as sp

    return sp.Rational(repr(float(value)))


def build_inputs(
    resolved: ResolvedLoss,
    params: Mapping[str, float],
    vocab: int,
    sampled: int,
    *,
    exact: bool = True,
) -> tuple[dict[str, Any], dict[str, Any], dict[str, float]]:
    """Numeric inputs, exact SymPy inputs, and the parameter record for one ``V``.

    Args:
        resolved: the loss.
        params: ``--set`` values (floats).
        vocab: ``V``.
        sampled: ``k``.
        exact: also build the exact SymPy inputs (skip at vocabulary scale).

    Returns:
        ``(numeric, exact, record)``: keyword inputs for the JAX loss, the same as exact
        SymPy values for the bridge, and the scalar parameters actually used.

    Raises:
        BadInput: an input the loss needs has no value, or ``q`` is outside (0, 1).
    """
    record = dict(params)
    numeric: dict[str, Any] = {}
    exact_in: dict[str, Any] = {}
    if exact:
        import sympy as sp
    for name, value in params.items():
        if not math.isfinite(value):
            raise BadInput(f"--set {name}={value}: the value must be finite")
        if name in resolved.accepts and name != "behavior_logp":
            numeric[name] = float(value)
            exact_in[name] = _exact(value) if exact else None
    needs = set(resolved.required) | ({"adv"} & set(resolved.accepts) - set(params))
    for name in sorted(needs - set(numeric)):
        if name == "behavior_logp":
            q = float(record.setdefault("q", INPUT_DEFAULTS["q"]))
            if not 0.0 < q < 1.0:
                raise BadInput(f"q = {q}: the behavior probability must be in (0, 1)")
            mu = np.full(vocab, (1.0 - q) / (vocab - 1))
            mu[sampled] = q
            numeric[name] = np.log(mu)
            if exact:
                qx = _exact(q)
                rest = sp.log((1 - qx) / (vocab - 1))
                exact_in[name] = np.asarray(
                    [sp.log(qx) if i == sampled else rest for i in range(vocab)],
                    dtype=object,
                )
        elif name == "old_logits":
            numeric[name] = np.zeros(vocab)
            if exact:
                exact_in[name] = np.asarray([sp.Integer(0)] * vocab, dtype=object)
        elif name in INPUT_DEFAULTS:
            record.setdefault(name, INPUT_DEFAULTS[name])
            numeric[name] = float(record[name])
            if exact:
                exact_in[name] = _exact(record[name])
        else:
            raise BadInput(
                f"the loss needs input {name!r}; pass it with --set {name}=..."
            )
    return numeric, exact_in, record

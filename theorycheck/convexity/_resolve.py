"""Resolving a SPEC (registry name or ``path/to/file.py:function``) and its inputs.

A loss is ``loss(logits, sampled, **inputs)``. Each input gets, in this order of
precedence: the ``--set`` value; the function's own default; the documented default
(``adv = 1``; ``behavior_logp`` = log of ``[q at k, (1-q)/(V-1) elsewhere]`` with
``q = 1/2``; ``old_logits = 0``), only for inputs that have no default. A ``--set`` key
the loss does not take is refused. Values set with ``--set`` are read exactly
(``0.2`` -> ``1/5``) for the symbolic engines; a default left to the function reaches
them through the traced program, read the same way.
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

__all__ = ["LossInputs", "ResolvedLoss", "build_inputs", "resolve"]

#: documented defaults for inputs a loss needs, has no default for, and the user did
#: not set.
INPUT_DEFAULTS = {"adv": 1.0, "q": 0.5}
#: how mu is built from q (recorded in every result's parameters).
MU_TEXT = "log mu; mu_k = q, mu_i = (1 - q)/(V - 1) for i != k"
#: array inputs built by the checker (not settable with --set).
ARRAY_INPUTS = ("behavior_logp", "old_logits")


@dataclasses.dataclass(frozen=True)
class ResolvedLoss:
    """A loss ready to check: name, JAX function, and the names of its inputs.

    Attributes:
        defaults: the function's own keyword defaults (``{name: value}``).
        var_keyword: the function takes ``**kwargs`` (any key is accepted).
    """

    name: str
    loss: Callable
    accepts: frozenset[str]
    required: frozenset[str]
    registered: bool
    symbolic: Callable | None = None
    defaults: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    var_keyword: bool = False


@dataclasses.dataclass(frozen=True)
class LossInputs:
    """The inputs of one loss at one V.

    Attributes:
        numeric: keyword inputs for the JAX loss.
        exact: the same as exact SymPy values for the bridge (empty when not built).
        params: every value actually used (JSON-ready): ``--set`` values, the
            function's defaults, the documented defaults, ``q`` and how mu was built.
    """

    numeric: dict[str, Any]
    exact: dict[str, Any]
    params: dict[str, Any]


def _signature(fn: Callable):
    """``(accepts, required, var_keyword, defaults)`` of the inputs after the first
    two parameters (logits, sampled)."""
    try:
        params = list(inspect.signature(fn).parameters.values())[2:]
    except (TypeError, ValueError) as err:
        raise BadInput(f"cannot read the signature of {fn!r}: {err}") from err
    var_kw = any(p.kind is p.VAR_KEYWORD for p in params)
    named = [p for p in params if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)]
    accepts = frozenset(p.name for p in named)
    required = frozenset(p.name for p in named if p.default is p.empty)
    # ``behavior_logp=None`` (or ``adv=None``) means "not given": the documented
    # default is built, not None passed through.
    built = set(ARRAY_INPUTS) | set(INPUT_DEFAULTS)
    defaults = {
        p.name: p.default
        for p in named
        if p.default is not p.empty and not (p.default is None and p.name in built)
    }
    return accepts, required, var_kw, defaults


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
        accepts, required, var_kw, defaults = _signature(entry.loss)
        return ResolvedLoss(
            spec,
            entry.loss,
            accepts,
            required,
            True,
            entry.symbolic,
            defaults,
            var_kw,
        )
    path_text, _, func = spec.rpartition(":") if ":" in spec else (spec, "", "loss")
    path = pathlib.Path(path_text)
    problem = loss_file_problem(path)
    if problem is not None:
        raise BadInput(f"loss file {path_text!r} {problem}")
    # --- PyTorch losses (theorycheck.torchfront): translated to a JAX function ---
    from theorycheck import torchfront

    if torchfront.split_function(func)[1] or torchfront.imports_torch(path):
        t = torchfront.load(path, func)
        var_kw = getattr(t.loss, "var_keyword", False)
        return ResolvedLoss(
            t.name, t.loss, t.accepts, t.required, False, None, t.defaults, var_kw
        )
    # --- end of the PyTorch hook ---
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
    accepts, required, var_kw, defaults = _signature(fn)
    name = f"{path.name}:{func or 'loss'}"
    return ResolvedLoss(name, fn, accepts, required, False, None, defaults, var_kw)


def loss_file_problem(path: pathlib.Path) -> str | None:
    """What is wrong with ``path`` as a loss file (None: a readable ``.py`` file).

    Examples:
        >>> loss_file_problem(pathlib.Path("/dev/null"))
        'is not a regular file'
    """
    if not path.exists():
        return "does not exist"
    if path.is_dir():
        return "is a directory, not a Python file"
    if not path.is_file():
        return "is not a regular file"
    if path.suffix != ".py":
        return f"is not a Python file (.py), its suffix is {path.suffix or 'empty'!r}"
    return None


def _exact(value: float):
    import sympy as sp

    return sp.Rational(repr(float(value)))


def settable(resolved: ResolvedLoss) -> list[str]:
    """The ``--set`` keys a loss takes (``q`` when it reads ``behavior_logp``)."""
    keys = sorted(resolved.accepts - set(ARRAY_INPUTS))
    if "behavior_logp" in resolved.accepts and "q" not in resolved.accepts:
        keys.append("q")
    return keys


def check_params(resolved: ResolvedLoss, params: Mapping[str, float]) -> dict:
    """Validates ``--set`` values against the loss: every key must be one it takes.

    Registry rules also check each value's range (``eps_low`` in [0, 1), ...).

    Raises:
        BadInput: an unknown key (naming the keys it takes), an array input, a value
            out of range or not finite, ``q`` outside (0, 1).
    """
    valid = settable(resolved)
    out: dict[str, Any] = {}
    for key, value in params.items():
        if key in ARRAY_INPUTS and key in resolved.accepts:
            how = "from q (--set q=...)" if key == "behavior_logp" else "as zeros"
            raise BadInput(f"params {key}: an array input, built {how}")
        if key not in valid and not resolved.var_keyword:
            raise BadInput(
                f"{resolved.name}: unknown parameter {key!r}; it takes: "
                f"{', '.join(valid) or '(none)'}"
            )
        if resolved.registered and key in resolved.accepts:
            from theorycheck.losses import check_rule_value

            value = check_rule_value(resolved.name, key, value)
        elif not math.isfinite(value):
            raise BadInput(f"params {key}={value}: the value must be finite")
        out[key] = value
    q = out.get("q", INPUT_DEFAULTS["q"])
    if "q" in valid and "q" not in resolved.accepts and not 0.0 < q < 1.0:
        raise BadInput(f"q = {q}: the behavior probability must be in (0, 1)")
    return out


def _jsonable(value: Any) -> Any:
    """A default as JSON: numbers stay numbers, arrays and sequences become lists,
    mappings dicts; anything else its ``repr``."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        arr = np.asarray(value)
        if arr.dtype.kind in "biuf" and arr.size <= 64:
            return arr.tolist()
    return repr(value)


def _behavior_logp(q: float, vocab: int, sampled: int, exact: bool):
    mu = np.full(vocab, (1.0 - q) / (vocab - 1))
    mu[sampled] = q
    if not exact:
        return np.log(mu), None
    import sympy as sp

    qx = _exact(q)
    rest = sp.log((1 - qx) / (vocab - 1))
    sym = [sp.log(qx) if i == sampled else rest for i in range(vocab)]
    return np.log(mu), np.asarray(sym, dtype=object)


def build_inputs(
    resolved: ResolvedLoss,
    params: Mapping[str, float],
    vocab: int,
    sampled: int,
    *,
    exact: bool = True,
) -> LossInputs:
    """Numeric inputs, exact SymPy inputs, and the values actually used, for one V.

    Precedence per input: ``--set`` > the function's own default (left to the
    function, so every route sees the same value) > the documented default.

    Args:
        resolved: the loss.
        params: ``--set`` values (floats).
        vocab: ``V``.
        sampled: ``k``.
        exact: also build the exact SymPy inputs (skip at vocabulary scale).

    Returns:
        A :class:`LossInputs`.

    Raises:
        BadInput: an unknown key, a bad value, or an input without any value.
    """
    params = check_params(resolved, params)
    extra = set(params) - resolved.accepts
    if "behavior_logp" in resolved.accepts:
        extra.discard("q")
    numeric: dict[str, Any] = {}
    exact_in: dict[str, Any] = {}
    record: dict[str, Any] = {}
    for name in sorted(resolved.accepts | extra):
        if name in params:
            numeric[name] = params[name]
            record[name] = params[name]
            if exact:
                exact_in[name] = _exact(params[name])
        elif name in resolved.defaults:
            record[name] = _jsonable(resolved.defaults[name])  # the function's own
        elif name == "behavior_logp":
            q = float(params.get("q", INPUT_DEFAULTS["q"]))
            numeric[name], sym = _behavior_logp(q, vocab, sampled, exact)
            record["q"], record[name] = q, MU_TEXT
            if exact:
                exact_in[name] = sym
        elif name == "old_logits":
            numeric[name] = np.zeros(vocab)
            record[name] = "zeros"
            if exact:
                exact_in[name] = np.asarray([_exact(0.0)] * vocab, dtype=object)
        elif name in INPUT_DEFAULTS:
            numeric[name] = record[name] = INPUT_DEFAULTS[name]
            if exact:
                exact_in[name] = _exact(INPUT_DEFAULTS[name])
        else:
            raise BadInput(
                f"params: the loss needs input {name!r}; give it a value ({name}=...)"
            )
    return LossInputs(numeric, exact_in, record)

"""The two forms' JAX functions: trace, translate and gate each program once."""

from __future__ import annotations

import inspect
import multiprocessing
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import torch

from theorycheck._errors import BadInput
from theorycheck.torchfront import _cache, _loss
from theorycheck.torchfront._gate import boundary_points, gate, record
from theorycheck.torchfront._loss import JaxLoss, VerlMisuse
from theorycheck.torchfront._trace import pick_loss, trace
from theorycheck.torchfront._verl import MissingKey, VerlConfig, config_values


def _gated(name, translation, reference, lines, *, wrt, labels):
    """The translation, once the gate passed. In a worker process of the checker
    (the structure stage's) the gate is the parent's: the parent translates and
    gates the same programs (V = 3, 4, 5, 16 and every searched V) before it
    decides, and a refusal there ends the check."""
    if multiprocessing.parent_process() is not None:
        return translation

    def run():
        with jax.enable_x64(True):  # per thread: this one is the gate's own
            return _run()

    def _run():
        points, count = boundary_points(translation, lines)
        return gate(
            name,
            translation,
            reference,
            points,
            wrt=wrt,
            labels=labels,
            boundaries=count,
        )

    report = _loss.outside_trace(run)
    record(report)
    return translation


def _concrete(x) -> bool:
    return not isinstance(x, jax.core.Tracer)


# ----------------------------------------------------------------------- logits form


def _logits_lines(vocab, sampled, names, values, seed):
    """Lines through (logits, inputs): e_k, e_j and two random directions, each
    with the inputs as given and with the advantage's sign flipped."""
    rng = np.random.default_rng(seed)
    z0 = 0.3 * rng.standard_normal(vocab)
    dirs = [np.eye(vocab)[sampled], np.eye(vocab)[(sampled + 1) % vocab]]
    dirs += [d / np.linalg.norm(d) for d in rng.standard_normal((2, vocab))]
    variants = [list(values)]
    if any("adv" in n for n in names):
        variants.append([-v if "adv" in n else v for n, v in zip(names, values)])
    lines = []
    for inputs in variants:
        for d in dirs:
            base = [z0] + [np.asarray(v, np.float64) for v in inputs]
            direction = [d] + [np.zeros(np.shape(v)) for v in inputs]
            lines.append((base, direction))
    return lines


def logits_loss(
    fn: Callable,
    name: str,
    path: Path,
    params: list[inspect.Parameter],
    *,
    func: str,
    naive: bool = False,
) -> _loss.TorchLoss:
    """``fn(logits, sampled, **params)`` as a JAX loss of the same inputs."""
    var_kw = any(p.kind is p.VAR_KEYWORD for p in params)
    named = [p for p in params if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)]
    defaults = {p.name: p.default for p in named if p.default is not p.empty}
    cache: dict = {}
    user_file = path.resolve()

    def build(vocab, sampled, static, names, shapes, values):
        def reference(z, *arrays):
            kwargs = {**static, **dict(zip(names, arrays))}
            return pick_loss(fn(z, sampled, **kwargs), name)

        translation = trace(
            reference,
            [(vocab,), *shapes],
            name=name,
            user_file=user_file,
            naive=naive,
        )
        lines = _logits_lines(vocab, sampled, names, values, seed=vocab)
        labels = ["logits", *names]
        return _gated(name, translation, reference, lines, wrt=0, labels=labels)

    floats = {k: v for k, v in defaults.items() if type(v) is float}

    accepts = frozenset(p.name for p in named)
    required = frozenset(p.name for p in named if p.default is p.empty)
    meta = {
        "name": name,
        "accepts": accepts,
        "required": required,
        "defaults": defaults,
        "form": "logits",
        "var_keyword": var_kw,
        "floats": floats,
    }

    def loss(logits, sampled, **inputs):
        key, static, names, arrays = _cache.logits_key(logits, sampled, inputs, floats)
        vocab = key[0]
        if key not in cache:
            values = [
                np.asarray(a)
                if _concrete(a)
                else _loss.nominal(k, defaults.get(k), a.shape, int(sampled))
                for k, a in zip(names, arrays)
            ]
            shapes = [a.shape for a in arrays]
            cache[key] = build(vocab, int(sampled), static, names, shapes, values)
            if not naive:
                _cache.put(path, func, meta, key, cache[key])
        return cache[key](jnp.asarray(logits, jnp.float64), *arrays)

    jax_loss = JaxLoss(loss, var_kw)
    jax_loss.symbolic_v = lambda by_v: symbolic_v(fn, name, by_v, floats)
    return _loss.TorchLoss(name, jax_loss, accepts, required, defaults, "logits", fn)


#: The largest V ``torch.export`` is asked to cover (its dynamic dimensions need a
#: finite bound; far above any vocabulary the checker builds).
SYMBOLIC_MAX_VOCAB = 2**24
_GUARD_INT = re.compile(r"(?:<=|>=|<|>|==|!=)\s*(\d+)|(\d+)\s*(?:<=|>=|<|>|==|!=)")


def symbolic_v(
    fn: Callable, name: str, inputs_by_v, floats: Mapping[str, float] | None = None
) -> tuple[str, tuple[int, ...]]:
    """The PyTorch side of the checker's symbolic-V trace
    (``theorycheck.convexity._genericity.symbolic_v``): ``torch.export`` of
    ``fn(logits, 0, **inputs)`` with the logits' length (and every input dimension
    that is 3 at V = 3 and 4 at V = 4) one dynamic dimension ``2 <= V <=``
    :data:`SYMBOLIC_MAX_VOCAB`. A Python branch on the length specialises it and
    the export fails ("Constraints violated"): ``(why, constants)`` then, with the
    integers of the guard it generated (``V <= 40``), else ``("", ())``. The inputs
    are passed as the translation passes them (``_cache.logits_key``): floats, the
    function's float defaults included (``floats``), as tensors; bools, ints and
    strings as they are.

    The translation itself is traced per V (torch needs concrete shapes), so this
    is what stands for the JAX trace with a symbolic V.
    """
    from torch.export import Dim, export

    dim = Dim("V", min=2, max=SYMBOLIC_MAX_VOCAB)
    in3 = {**(floats or {}), **inputs_by_v[3]}
    in4 = {**(floats or {}), **inputs_by_v[4]}
    names, arrays, specs, static = [], [], [], {}
    for key, value in in4.items():
        if isinstance(value, (bool, int, str)):
            static[key] = value
            continue
        dims = {}
        for i, (d3, d4) in enumerate(zip(np.shape(in3[key]), np.shape(value))):
            if (d3, d4) == (3, 4):
                dims[i] = dim
            elif d3 != d4:
                return (
                    f"the input {key} has a dimension {d3} at V = 3, {d4} at V = 4",
                    (),
                )
        names.append(key)
        arrays.append(torch.as_tensor(np.asarray(value, np.float64)))
        specs.append(dims or None)

    class _Loss(torch.nn.Module):
        def forward(self, z, arrs):
            return pick_loss(fn(z, 0, **static, **dict(zip(names, arrs))), name)

    z = torch.linspace(-1.0, 1.0, 4, dtype=torch.float64)
    try:
        export(_Loss(), (z, tuple(arrays)), dynamic_shapes=({0: dim}, tuple(specs)))
    except Exception as err:  # the user's Python depends on V (or cannot say)
        text = str(err)
        first = text.split("\n")[0].strip()
        guard = next((ln for ln in text.split("\n") if "guard" in ln), "")
        found = {int(a or b) for a, b in _GUARD_INT.findall(guard)}
        constants = tuple(sorted(c for c in found if 2 < c < SYMBOLIC_MAX_VOCAB))
        why = (
            "the torch loss does not export with a dynamic vocabulary size: "
            f"{type(err).__name__}: {first[:160].rstrip('.!')}"
        )
        if guard:
            why += f" ({guard.strip()[:160]})"
        return why, constants
    return "", ()


# ------------------------------------------------------------------------- verl form

_LABELS = ["old_log_prob", "log_prob", "advantages", "response_mask"]


def _verl_lines():
    """Lines in (old_log_prob, log_prob, adv, mask): the log ratio swept over
    [-40, 40] at q = 0.1 and 0.5, for advantages of both signs and sizes."""
    lines = []
    for q in (0.1, 0.5):
        for adv in (1.0, -1.0, 0.4, -2.5):
            old = np.full((1, 1), np.log(q))
            base = [old, old.copy(), np.full((1, 1), adv), np.ones((1, 1))]
            direction = [np.zeros((1, 1)), np.ones((1, 1))] + [np.zeros((1, 1))] * 2
            lines.append((base, direction))
    return lines


def _verl_reference(fn, name, params, values, reads):
    takes = {p.name for p in params}

    def reference(old, logp, adv, mask):
        kwargs: dict[str, Any] = {}
        if "config" in takes:
            kwargs["config"] = VerlConfig(values, reads)
        if "rollout_is_weights" in takes:
            kwargs["rollout_is_weights"] = None
        try:
            out = fn(
                old_log_prob=old,
                log_prob=logp,
                advantages=adv,
                response_mask=mask,
                **kwargs,
            )
        except MissingKey as err:
            raise BadInput(f"{name}: {err}") from None
        return pick_loss(out, name)

    return reference


def verl_loss(
    fn: Callable,
    name: str,
    path: Path,
    params: list[inspect.Parameter],
    settings: Mapping[str, float],
    *,
    func: str,
    naive: bool = False,
) -> _loss.TorchLoss:
    """verl's policy-loss function as a JAX loss of the logits (module docstring)."""
    extra = [
        p.name
        for p in params[4:]
        if p.name not in _loss.VERL_KEYWORDS
        and p.default is p.empty
        and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)
    ]
    if extra:
        raise BadInput(
            f"{name}: needs {', '.join(extra)}, which verl's signature does not pass"
        )
    values = config_values(settings)
    reads: dict[str, Any] = {}
    reference = _verl_reference(fn, name, params, values, reads)
    translation = trace(
        reference, [(1, 1)] * 4, name=name, user_file=path.resolve(), naive=naive
    )
    unread = sorted(set(settings) - set(reads) - {k.split(".")[-1] for k in reads})
    if unread:
        raise BadInput(
            f"{name}: unknown parameter {unread[0]!r}: the loss reads "
            f"{', '.join(sorted(reads)) or 'no config value'} (and takes adv, q)"
        )
    box: dict[str, Any] = {}
    config_keys = set(reads)

    accepts = frozenset({"adv", "behavior_logp"} | config_keys)
    meta = {
        "name": name,
        "accepts": accepts,
        "required": frozenset({"adv", "behavior_logp"}),
        "defaults": dict(reads),
        "form": "verl",
        "var_keyword": False,
    }

    def loss(logits, sampled, *, adv, behavior_logp, **extra):
        if extra:
            raise VerlMisuse(name, extra)
        if "translation" not in box:
            box["translation"] = _gated(
                name, translation, reference, _verl_lines(), wrt=1, labels=_LABELS
            )
            if not naive:
                _cache.put(path, func, meta, "verl", translation)
        return _cache.verl_call(box["translation"], logits, sampled, adv, behavior_logp)

    return _loss.TorchLoss(
        name,
        JaxLoss(loss, False),
        accepts,
        frozenset({"adv", "behavior_logp"}),
        dict(reads),
        "verl",
        fn,
        reference,
    )


def torch_scalar(x: Any) -> torch.Tensor:
    """A float64 tensor of ``x``."""
    return torch.as_tensor(np.asarray(x, np.float64))

"""The two forms' JAX functions: trace, translate and gate each program once."""

from __future__ import annotations

import dataclasses
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
from theorycheck.torchfront._signatures import VERL, config_values
from theorycheck.torchfront._trace import lifted_casts, pick_loss, trace
from theorycheck.torchfront._verl import MissingKey, VerlConfig


def _gated(name, translation, reference, lines, *, wrt, labels, notes=()):
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
        report = gate(
            name,
            translation,
            reference,
            points,
            wrt=wrt,
            labels=labels,
            boundaries=count,
        )
        return dataclasses.replace(report, notes=tuple(notes))

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


def _user_config(fn, framework, settings, reads, name):
    """An instance of the user's own config class (``ActorConfig``,
    ``AlgorithmConfig``) when the loss's module has it: built by the class from
    its defaults, the ``--set`` values written on it, and every attribute the loss
    reads recorded in ``reads``. ``None``: the module has no such class."""
    cls = getattr(fn, "__globals__", {}).get(framework.config_class or "")
    if not isinstance(cls, type):
        return None
    try:
        config = cls()
        for key, value in settings.items():
            *path, last = _section_key(config, key).split(".")
            target = config
            for part in path:
                target = getattr(target, part)
            object.__setattr__(target, last, value)
        config.__class__ = _recording(cls, reads, "")
    except Exception as err:  # the user's class: say how to go on
        raise BadInput(
            f"{name}: cannot build the config {cls.__name__}() from its defaults "
            f"and --set ({type(err).__name__}: {err}); give every field a default "
            f"or --set it, or remove {cls.__name__} from the loss's module to use "
            f"{framework.name}'s documented defaults"
        ) from None
    return config


def _section_key(config, key: str) -> str:
    """``key`` as the config has it: itself, or ``section.key`` when exactly one
    nested section has it (verl's ``dro_beta`` is ``policy_loss.dro_beta``)."""
    if "." in key or hasattr(config, key):
        return key
    found = [
        name
        for name, value in vars(config).items()
        if hasattr(value, "__dict__") and hasattr(value, key)
    ]
    return f"{found[0]}.{key}" if len(found) == 1 else key


def _recording(cls, reads, prefix):
    """A subclass of ``cls`` (``isinstance`` checks pass) that records reads as
    ``prefix + key``; a nested section (a plain object with fields) read from it
    records its own reads as ``section.key``."""

    def __getattribute__(self, key):
        value = super(recorded, self).__getattribute__(key)
        if key.startswith("_"):
            return value
        if _plain(value):
            reads[prefix + key] = value
        elif _section(value):
            value.__class__ = _recording(type(value), reads, f"{prefix}{key}.")
        return value

    recorded = type(cls.__name__, (cls,), {"__getattribute__": __getattribute__})
    recorded._theorycheck_recording = True
    return recorded


def _section(value) -> bool:
    """A nested config section not yet recording (an instance with fields)."""
    return (
        hasattr(value, "__dict__")
        and not isinstance(value, type)
        and not callable(value)
        and not getattr(type(value), "_theorycheck_recording", False)
    )


def _plain(value) -> bool:
    return value is None or isinstance(value, (bool, int, float, str))


def _call(framework, fn, params, config, tensors):
    """``fn`` called as the trainer calls it with one token's tensors."""
    old, logp, adv, mask = tensors
    takes = {p.name for p in params}
    if framework.name == "miles":
        eps = {k: v for k, v in config.items() if k in takes}
        return pick_loss(fn(old - logp, adv, **eps), "").sum()
    if framework.name == "skyrl":
        extra = {"rollout_logprobs": old} if "rollout_logprobs" in takes else {}
        return fn(logp, old, adv, config, mask, **extra)
    kwargs: dict[str, Any] = {}
    if "config" in takes:
        kwargs["config"] = config
    if "rollout_is_weights" in takes:
        kwargs["rollout_is_weights"] = None
    return fn(
        old_log_prob=old, log_prob=logp, advantages=adv, response_mask=mask, **kwargs
    )


def _framework_reference(fn, name, framework, params, settings, reads):
    values = config_values(framework, settings)

    def reference(old, logp, adv, mask):
        config = _user_config(fn, framework, settings, reads, name)
        if config is None and framework.config_class is None:
            reads.update(values)
            config = values
        elif config is None:
            config = VerlConfig(values, reads)
        try:
            out = _call(framework, fn, params, config, (old, logp, adv, mask))
        except MissingKey as err:
            raise BadInput(f"{name}: {err}") from None
        return pick_loss(out, name)

    return reference


def _eager_reads(reference, name, user_file):
    """One eager call at ``q = 1/2, p = 0.4, A = 1``: the config values the loss
    reads, and the user's own error (with its ``file.py:LINE``) before any trace."""
    from theorycheck.torchfront._trace import float64_default, where

    t = lambda x: torch.full((1, 1), float(x), dtype=torch.float64)  # noqa: E731
    try:
        with float64_default():
            reference(t(np.log(0.5)), t(np.log(0.4)), t(1.0), t(1.0))
    except BadInput:
        raise
    except Exception as err:  # the user's code: one line naming its place
        raise BadInput(
            f"{name}: the loss raised {type(err).__name__}: "
            f"{str(err).splitlines()[0] if str(err) else ''}{where(err, user_file)}"
        ) from None


def verl_loss(
    fn: Callable,
    name: str,
    path: Path,
    params: list[inspect.Parameter],
    settings: Mapping[str, float],
    *,
    func: str,
    naive: bool = False,
    framework=VERL,
) -> _loss.TorchLoss:
    """A trainer's policy-loss function as a JAX loss of the logits
    (:mod:`~theorycheck.torchfront._signatures`). Loading it runs it once, eagerly
    (the config values it reads; ``coefficient`` needs nothing more); the trace,
    translation and gate come with the first call of the JAX loss."""
    extra = [
        p.name
        for p in params[len(framework.first) :]
        if p.name not in _KNOWN[framework.name]
        and p.default is p.empty
        and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)
    ]
    if extra:
        raise BadInput(
            f"{name}: needs {', '.join(extra)}, which {framework.name}'s signature "
            "does not pass"
        )
    reads: dict[str, Any] = {}
    user_file = path.resolve()
    reference = _framework_reference(fn, name, framework, params, settings, reads)
    _eager_reads(reference, name, user_file)
    read_names = set(reads) | {k.split(".")[-1] for k in reads}
    unread = sorted(set(settings) - read_names)
    if unread:
        raise BadInput(
            f"{name}: unknown parameter {unread[0]!r}: the loss reads "
            f"{', '.join(sorted(reads)) or 'no config value'} (and takes adv, q)"
        )
    box: dict[str, Any] = {}
    accepts = frozenset({"adv", "behavior_logp"} | set(reads))
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
            formula, lifted = lifted_casts(reference)
            translation = trace(
                formula, [(1, 1)] * 4, name=name, user_file=user_file, naive=naive
            )
            notes = (
                [
                    f"casts kept in float64 (the formula without training precision): "
                    f"{', '.join(sorted(lifted))}"
                ]
                if lifted
                else []
            )
            box["translation"] = _gated(
                name,
                translation,
                formula,
                _verl_lines(),
                wrt=1,
                labels=_LABELS,
                notes=notes,
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
        framework.name,
    )


#: the parameters after the tensors that each signature passes.
_KNOWN = {
    "verl": frozenset(_loss.VERL_KEYWORDS),
    "skyrl": frozenset({"config", "loss_mask", "rollout_logprobs"}),
    "miles": frozenset({"eps_clip", "eps_clip_high", "eps_clip_c"}),
}


def torch_scalar(x: Any) -> torch.Tensor:
    """A float64 tensor of ``x``."""
    return torch.as_tensor(np.asarray(x, np.float64))

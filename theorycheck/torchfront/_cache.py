"""Translations shared with the checker's worker processes, where torch is not
imported.

The convexity checker runs its structure stage in a spawned worker that resolves the
SPEC again. For a PyTorch loss that would import torch and trace the function once
more (tens of seconds on a loaded 2-core machine). Instead, the process that
translated and gated a program stores it (torch-free steps, pickled) in a directory
named by the environment variable ``THEORYCHECK_TORCHFRONT_CACHE`` (created on first
use and inherited by the workers); a worker reads the programs of its SPEC from there
and runs them without torch. A program the worker does not find is translated as
usual. The file is keyed by the loss file's absolute path, modification time and
the function text, so an edited file is never served an old program.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

ENV = "THEORYCHECK_TORCHFRONT_CACHE"
_CREATED: list[str] = []  # the directories this process made (and may remove)


def _file(path: Path, func: str, create: bool) -> Path | None:
    root = os.environ.get(ENV)
    if root is None:
        if not create:
            return None
        root = tempfile.mkdtemp(prefix="theorycheck-torchfront-")
        os.environ[ENV] = root
        _CREATED.append(root)
    try:
        stamp = path.resolve().stat().st_mtime_ns
    except OSError:
        return None
    text = f"{path.resolve()}\0{stamp}\0{func}".encode()
    return Path(root) / f"{hashlib.sha1(text).hexdigest()}.pkl"


def put(path: Path, func: str, meta: dict, key: Any, program: Any) -> None:
    """Adds ``program`` (a gated translation) under ``key`` (best effort)."""
    target = _file(path, func, create=True)
    if target is None:
        return
    entry = get(path, func) or {"meta": meta, "programs": {}}
    entry["programs"][key] = program
    try:
        data = pickle.dumps(entry)
    except Exception:  # a default value that does not pickle: no cache
        return
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(data)
        os.replace(tmp, target)
    except OSError:  # best effort: a worker then translates the program itself
        tmp.unlink(missing_ok=True)


def get(path: Path, func: str) -> dict | None:
    """The stored entry of ``path:func`` (``None``: nothing stored)."""
    target = _file(path, func, create=False)
    if target is None or not target.is_file():
        return None
    try:
        return pickle.loads(target.read_bytes())
    except Exception:
        return None


def clear() -> None:
    """Removes the cache directory this process made (the command's end); one
    inherited from a parent is left to it."""
    root = os.environ.get(ENV)
    if root is not None and root in _CREATED:
        os.environ.pop(ENV)
        _CREATED.remove(root)
        shutil.rmtree(root, ignore_errors=True)


def logits_key(logits, sampled, inputs: dict, floats: dict):
    """``(key, names, arrays)`` of one call of a logits-form loss: the program is
    one per V, sampled token, static values and input shapes."""
    inputs = {**floats, **inputs}  # a float default is a tensor input too
    static = {k: v for k, v in inputs.items() if isinstance(v, (bool, int, str))}
    names = sorted(k for k in inputs if k not in static)
    arrays = [jnp.asarray(inputs[k], jnp.float64) for k in names]
    key = (
        int(np.shape(logits)[0]),
        int(sampled),
        tuple(sorted(static.items())),
        tuple((k, a.shape) for k, a in zip(names, arrays)),
    )
    return key, static, names, arrays


def verl_call(program, logits, sampled, adv, behavior_logp):
    r""":math:`L(z) = \texttt{fn}(\log\mu_k, \log\operatorname{softmax}(z)_k, \hat A,
    1)` on ``(1, 1)`` tensors."""
    logp = jax.nn.log_softmax(jnp.asarray(logits, jnp.float64))[sampled]
    old = jnp.asarray(behavior_logp, jnp.float64)[sampled]
    adv = jnp.broadcast_to(jnp.asarray(adv, jnp.float64), (1, 1))
    return program(old.reshape(1, 1), logp.reshape(1, 1), adv, jnp.ones((1, 1)))


def cached_loss(entry: dict, fallback: Callable[[], Any]):
    """The ``TorchLoss`` of a stored entry; ``fallback()`` loads it the usual way
    (torch imported) for a program that was not stored."""
    from theorycheck.torchfront._loss import JaxLoss, TorchLoss, VerlMisuse

    meta, programs = entry["meta"], entry["programs"]
    box: dict[str, Any] = {}

    def slow():
        if "loss" not in box:
            box["loss"] = fallback().loss
        return box["loss"]

    if meta["form"] == "verl":

        def loss(logits, sampled, *, adv, behavior_logp, **extra):
            if extra:
                raise VerlMisuse(meta["name"], extra)
            return verl_call(programs["verl"], logits, sampled, adv, behavior_logp)

    else:

        def loss(logits, sampled, **inputs):
            key, _, _, arrays = logits_key(logits, sampled, inputs, meta["floats"])
            if key not in programs:
                return slow()(logits, sampled, **inputs)
            return programs[key](jnp.asarray(logits, jnp.float64), *arrays)

    return TorchLoss(
        meta["name"],
        JaxLoss(loss, meta["var_keyword"]),
        meta["accepts"],
        meta["required"],
        meta["defaults"],
        meta["form"],
        None,
    )

"""What the torchfront modules share, with no import of theirs: the loaded loss
(:class:`TorchLoss`), its picklable JAX callable, the verl signature's names, and the
helpers the forms use. Every other module of the package imports from here, never
the other way round (no import cycle)."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from theorycheck._errors import BadInput

#: verl's policy-loss signature: the tensors, then the keywords.
VERL_TENSORS = ("old_log_prob", "log_prob", "advantages", "response_mask")
VERL_KEYWORDS = ("loss_agg_mode", "config", "rollout_is_weights")
#: the one line for a torch loss when the extra is not installed.
INSTALL_HINT = "pip install 'theorycheck[torch]'"


@dataclasses.dataclass(frozen=True)
class TorchLoss:
    """A PyTorch loss translated to a JAX ``loss(logits, sampled, **inputs)``.

    Attributes:
        name: ``file.py:function`` (``[verl]`` added for the verl form).
        loss: the JAX function (translation + gate on first use of each program).
        accepts: the inputs and parameters it takes.
        required: those without a default.
        defaults: the function's own defaults (verl form: every config value the
            loss read, documented default or ``--set``).
        form: ``"logits"`` or ``"verl"``.
        torch_fn: the user's function.
        reference: the torch function of the traced program's inputs (verl form:
            ``(old_log_prob, log_prob, advantages, response_mask) -> loss``).
        signature: ``logits``, or the trainer whose signature it has
            (``verl``, ``skyrl``, ``miles``; the form is then ``"verl"``).
    """

    name: str
    loss: Callable
    accepts: frozenset[str]
    required: frozenset[str]
    defaults: Mapping[str, Any]
    form: str
    torch_fn: Callable
    reference: Callable | None = None
    signature: str = "logits"


class JaxLoss:
    """The translated loss as a callable that pickles to nothing (like the user's
    own code, it never leaves the isolated process that runs it)."""

    def __init__(self, fn: Callable, var_keyword: bool) -> None:
        self.fn = fn
        self.var_keyword = var_keyword

    def __call__(self, logits, sampled, **inputs):
        return self.fn(logits, sampled, **inputs)

    def __reduce__(self):
        return (_left_behind, ())


def _left_behind() -> None:
    """What a translated loss unpickles to outside its process."""
    return None


class VerlMisuse(BadInput):
    """A verl config value passed as a loss input (it belongs in the SPEC)."""

    def __init__(self, name: str, extra: Mapping[str, Any]) -> None:
        key = sorted(extra)[0]
        super().__init__(
            f"{name}: {key} is a verl config value; set it with --set on the "
            "command line (it is part of the SPEC: FILE.py:FN[verl;KEY=VALUE])"
        )


def outside_trace(fn: Callable, *args: Any) -> Any:
    """``fn(*args)`` in a thread of its own, outside any JAX trace of the caller
    (JAX's trace state is per thread): the gate evaluates numbers while the checker
    may be tracing the loss."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = fn(*args)
        except BaseException as err:  # re-raised in the caller's thread
            box["error"] = err

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


def nominal(name: str, default: Any, shape: tuple[int, ...], sampled: int):
    """A value for an input the gate cannot read (a tracer): the documented
    defaults (``adv = 1``, ``q = 1/2``, μ from q, zeros), else the function's
    default, else 1/2."""
    if name == "behavior_logp":
        vocab = shape[0]
        mu = np.full(vocab, 0.5 / max(vocab - 1, 1))
        mu[sampled] = 0.5
        return np.log(mu)
    if name == "old_logits":
        return np.zeros(shape)
    if name == "adv":
        return np.ones(shape)
    if isinstance(default, (int, float)) and not isinstance(default, bool):
        return np.full(shape, float(default))
    return np.full(shape, 0.5)

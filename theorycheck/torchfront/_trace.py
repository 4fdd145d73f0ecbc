"""Tracing a PyTorch loss into an ATen graph (``make_fx``, pre-dispatch, fake
tensors) and the refusals that tracing itself reveals.

Fake tensors carry no values, so Python code that branches on a tensor's value (an
``if`` on a tensor, ``float(t)`` used in a branch, boolean-mask indexing) cannot be
traced: it is refused as data-dependent control flow, naming the line of the user's
file. The traced function returns the loss only: a tuple's first element, the rest
(verl's metrics) dropped.
"""

from __future__ import annotations

import contextlib
import traceback
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import torch
from torch.fx.experimental.proxy_tensor import make_fx

from theorycheck._errors import BadInput
from theorycheck.torchfront._interp import Translation, Untranslatable


def pick_loss(out, name: str):
    """The loss in what a loss function returned: a tensor, or a tuple/list whose
    first element is the loss (verl's ``(loss, metrics)``)."""
    if isinstance(out, (tuple, list)):
        if not out or not isinstance(out[0], torch.Tensor):
            first = type(out[0]).__name__ if out else "nothing"
            raise BadInput(
                f"{name}: returns a {type(out).__name__} whose first element is "
                f"{first}, not the loss tensor (expected a tensor or (loss, metrics))"
            )
        out = out[0]
    if not isinstance(out, torch.Tensor):
        raise BadInput(
            f"{name}: returns {type(out).__name__}, not a torch tensor (the loss)"
        )
    return out


def check_output(loss: torch.Tensor, name: str) -> None:
    """One real float64 scalar on the CPU."""
    if loss.dtype in (torch.float16, torch.bfloat16, torch.float32):
        raise BadInput(
            f"{name}: returns a {loss.dtype} loss; theorycheck checks losses in "
            "float64 (remove the cast to a lower precision)"
        )
    if not loss.dtype.is_floating_point:
        raise BadInput(f"{name}: returns a {loss.dtype} tensor, not a real loss")
    if loss.device.type != "cpu":
        raise BadInput(f"{name}: returns a tensor on device {loss.device}")
    if loss.numel() != 1:
        raise BadInput(
            f"{name}: returns a tensor of shape {tuple(loss.shape)}, not a scalar loss"
        )


@contextlib.contextmanager
def float64_default() -> Iterator[None]:
    """torch's default dtype float64 (``torch.tensor(0.2)`` in a loss is then the
    float64 0.2 in the trace, the gate and the coefficient alike)."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        yield
    finally:
        torch.set_default_dtype(previous)


_LOW = (torch.float32, torch.float16, torch.bfloat16)


class Float64Casts(torch.overrides.TorchFunctionMode):
    """Keeps float64 tensors in float64 where the code casts them down
    (``x.to(torch.float32)``, ``.float()``, ``.half()``, ``.bfloat16()``): the loss
    as its formula, without the rounding of a training run's lower precision (a
    trainer's ``exp(delta.to(float32))`` ratio). ``lifted`` names each cast
    kept."""

    def __init__(self) -> None:
        super().__init__()
        self.lifted: set[str] = set()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        x = args[0] if args else None
        if isinstance(x, torch.Tensor) and x.dtype == torch.float64:
            name = getattr(func, "__name__", "")
            dtype = kwargs.get("dtype")
            dtype = dtype or next(
                (a for a in args[1:] if isinstance(a, torch.dtype)), None
            )
            if name in ("float", "half", "bfloat16") or (
                name in ("to", "type") and dtype in _LOW
            ):
                self.lifted.add(f".{name}({dtype or ''})".replace("torch.", ""))
                return x
        return func(*args, **kwargs)


def lifted_casts(fn: Callable) -> tuple[Callable, set[str]]:
    """``fn`` run under :class:`Float64Casts`, and the casts it kept in float64."""
    lifted: set[str] = set()

    def run(*tensors):
        mode = Float64Casts()
        with mode:
            out = fn(*tensors)
        lifted.update(mode.lifted)
        return out

    return run, lifted


def where(err: BaseException, user_file: Path | None) -> str:
    """`` at file.py:LINE``: the innermost frame of the user's file in the error's
    traceback (``""`` if none)."""
    frames = traceback.extract_tb(err.__traceback__)
    if user_file is not None:
        mine = [f for f in frames if Path(f.filename).resolve() == user_file]
        if mine:
            return f" at {user_file.name}:{mine[-1].lineno}"
    return ""


def _data_dependent(err: BaseException) -> bool:
    names = {type(e).__name__ for e in (err, err.__cause__, err.__context__) if e}
    kinds = (
        "GuardOnDataDependentSymNode",
        "DataDependentOutputException",
        "DynamicOutputShapeException",
    )
    return bool(names & set(kinds)) or "data-dependent" in str(err)


def trace(
    fn: Callable,
    shapes: Sequence[tuple[int, ...]],
    *,
    name: str,
    user_file: Path | None,
    naive: bool = False,
) -> Translation:
    """The translation of ``fn(*tensors)`` (float64 tensors of ``shapes``).

    Raises:
        BadInput: data-dependent control flow, a construct the translation refuses
            (in-place update, randomness, a device, a float cast), a bad output;
            an exception of the user's code propagates unchanged.
    """

    def loss_only(*tensors):
        loss = pick_loss(fn(*tensors), name)
        check_output(loss, name)
        return loss.reshape(())

    examples = [torch.zeros(s, dtype=torch.float64) for s in shapes]
    try:
        with float64_default():
            gm = make_fx(loss_only, pre_dispatch=True, tracing_mode="fake")(*examples)
        return Translation(gm, naive=naive)
    except BadInput:
        raise
    except Untranslatable as err:
        raise BadInput(f"{name}: refused: the loss uses {err}") from None
    except Exception as err:
        if _data_dependent(err):
            raise BadInput(
                f"{name}: refused: data-dependent Python control flow (a Python "
                f"branch or conversion on a tensor's value{where(err, user_file)}); "
                "write it with torch.where"
            ) from None
        raise

r"""PyTorch losses as JAX functions of one position's logits, in two forms.

* **logits form** ``fn(logits, sampled, **params)``: the conventions of the JAX form.
  Inputs given as numbers or arrays (``adv``, ``q``, ``behavior_logp``, ``--set``
  values) reach the torch function as float64 tensors (0-d for a number), exactly as
  the JAX form traces them; ``int``/``bool``/``str`` stay Python values; a parameter
  left to its default keeps the function's own default.
* **verl form** ``fn(old_log_prob, log_prob, advantages, response_mask,
  loss_agg_mode="token-mean", config=None, rollout_is_weights=None)`` returning a loss
  or ``(loss, metrics)``: the loss of one token,

  .. math::
      L(z) = \texttt{fn}(\log\mu_k,\ \log\operatorname{softmax}(z)_k,\ \hat A,\
      \text{mask} = 1)

  with tensors of shape ``(1, 1)`` (one sequence of one token), ``config`` a
  :class:`~theorycheck.torchfront._verl.VerlConfig` of verl's documented defaults and
  the ``--set`` values, ``rollout_is_weights=None``, and ``loss_agg_mode`` the
  function's own default (with one token every mode of verl's ``agg_loss`` is the
  token's loss). Its inputs are ``adv`` and ``behavior_logp`` (``q``), as for the
  registry's token rules.

Each traced program (one per vocabulary size, sampled token and input shapes) is
translated by :mod:`~theorycheck.torchfront._interp` and passes the gate
(:mod:`~theorycheck.torchfront._gate`) before it is used.
"""

from __future__ import annotations

import importlib.util
import inspect
import multiprocessing
import os
import re
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from theorycheck._errors import BadInput
from theorycheck.torchfront._loss import (
    INSTALL_HINT,
    VERL_KEYWORDS,
    VERL_TENSORS,
    TorchLoss,
)
from theorycheck.torchfront._signatures import FRAMEWORKS, SIGNATURES, unwrap

_IMPORTS_TORCH = re.compile(r"^\s*(import\s+torch\b|from\s+torch\b)", re.MULTILINE)
_SUFFIX = re.compile(r"^(?P<fn>[^\[]*)\[(?P<sig>[a-z]+)(?P<rest>(;[^\]]*)?)\]$")


def split_function(func: str) -> tuple[str, str | None, dict[str, float]]:
    """``"loss[verl;clip_ratio=0.28]"`` -> ``("loss", "verl", {"clip_ratio": 0.28})``.

    Examples:
        >>> split_function("loss[verl;clip_ratio_high=0.28]")
        ('loss', 'verl', {'clip_ratio_high': 0.28})
        >>> split_function("loss")
        ('loss', None, {})
    """
    m = _SUFFIX.match(func)
    if m is None:
        return func, None, {}
    settings: dict[str, Any] = {}
    for item in filter(None, m["rest"].split(";")):
        key, eq, value = item.partition("=")
        if not key or not eq:
            raise BadInput(f"{func!r}: {item!r} is not KEY=VALUE")
        settings[key] = _setting(value)
    return m["fn"], m["sig"], settings


def _setting(text: str) -> Any:
    """A ``--set`` value of a trainer config: a number, ``None``, or a name
    (``policy_loss_type=dual_clip``; quotes optional)."""
    try:
        return float(text)
    except ValueError:
        pass
    if text == "None":
        return None
    return text.strip("'\"")


def imports_torch(path: Path) -> bool:
    """Whether the file's source imports torch (read as text: nothing is run)."""
    try:
        return bool(_IMPORTS_TORCH.search(path.read_text(errors="replace")))
    except OSError:
        return False


def command_spec(
    spec: str, signature: str, params: Mapping[str, float]
) -> tuple[str, dict[str, float]]:
    """The SPEC and ``--set`` values a check runs with, for ``--signature``.

    For ``--signature verl`` the ``--set`` values other than ``adv`` and ``q`` are
    verl config values: they become part of the SPEC (``FILE.py:FN[verl;k=v]``), which
    every process of the check resolves the same way.

    Raises:
        BadInput: ``--signature verl`` for a file that does not import torch, or a
            registry name.
    """
    if signature not in SIGNATURES:
        raise BadInput(
            f"--signature {signature!r}: choose one of {', '.join(SIGNATURES)}"
        )
    if ":" not in spec and not spec.endswith(".py"):
        if signature != "logits":
            raise BadInput(f"--signature {signature} is for a PyTorch FILE.py:FN")
        return spec, dict(params)
    path_text, _, func = spec.rpartition(":") if ":" in spec else (spec, "", "loss")
    if signature == "logits":
        return spec, dict(params)
    path = Path(path_text)
    if path.is_file() and not imports_torch(path):
        raise BadInput(
            f"--signature {signature}: {path_text!r} does not import torch (the "
            f"{signature} signature is for PyTorch losses)"
        )
    config = {k: v for k, v in params.items() if k not in ("adv", "q")}
    inputs = {k: v for k, v in params.items() if k in ("adv", "q")}
    suffix = "".join(f";{k}={v!r}" for k, v in config.items())
    return f"{path_text}:{func or 'loss'}[{signature}{suffix}]", inputs


def _import_torch(path: Path) -> None:
    try:
        import torch  # noqa: F401
    except ModuleNotFoundError as err:
        if err.name != "torch":
            raise
        raise BadInput(
            f"{path.name} imports torch, which is not installed: {INSTALL_HINT}"
        ) from None


#: directories (``os.pathsep``-separated) where a loss file's own imports are
#: found: the trainer's stubs or sources, kept apart from theorycheck's imports.
LOSS_PATH_ENV = "THEORYCHECK_LOSS_PATH"


def package_root(path: Path) -> Path:
    """The directory above the loss file's top package (the file's directory when
    it is in no package): ``verl/trainer/ppo/core_algos.py`` -> the checkout, so
    that the file's ``import verl...`` finds its own package."""
    here = path.resolve().parent
    while (here / "__init__.py").is_file() and here.parent != here:
        here = here.parent
    return here


def _module_name(path: Path) -> str:
    """The file's dotted name inside its package (``verl.trainer.ppo.core_algos``),
    so that its relative imports work; a file in no package gets a private name."""
    root = package_root(path)
    parts = path.resolve().with_suffix("").relative_to(root).parts
    if len(parts) > 1:
        return ".".join(parts)
    return f"_user_torch_loss_{path.stem}"


def _loss_paths(path: Path) -> list[str]:
    extra = [p for p in os.environ.get(LOSS_PATH_ENV, "").split(os.pathsep) if p]
    return [str(package_root(path)), *extra]


def _own_imports_first() -> None:
    """Imports what theorycheck itself imports (jaxtyping, the registry), so that
    a module of the same name in the user's directories (a ``jaxtyping`` stub)
    can never replace it: Python serves a module already imported from
    ``sys.modules``."""
    import theorycheck.losses  # noqa: F401


def _load_module(path: Path):
    _own_imports_first()
    name = _module_name(path)
    module_spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(module_spec)
    for entry in reversed(_loss_paths(path)):
        if entry not in sys.path:
            sys.path.append(entry)  # after theorycheck's own: never shadows them
    if "." in name:
        sys.modules[name] = module  # the package's own imports see this module
    try:
        module_spec.loader.exec_module(module)
    except ModuleNotFoundError as err:
        if err.name == "torch":
            raise BadInput(
                f"{path.name} imports torch, which is not installed: {INSTALL_HINT}"
            ) from None
        raise BadInput(
            f"loading {str(path)!r} raised {type(err).__name__}: {err}"
        ) from err
    except Exception as err:  # the user's file: report whatever it raised
        raise BadInput(
            f"loading {str(path)!r} raised {type(err).__name__}: {err}"
        ) from err
    return module


def _parameters(fn: Callable, name: str) -> list[inspect.Parameter]:
    try:
        return list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError) as err:
        raise BadInput(f"{name}: cannot read the signature: {err}") from None


def _is_verl(params: list[inspect.Parameter]) -> bool:
    return tuple(p.name for p in params[:4]) == VERL_TENSORS


def _trainer_loss(fn, name, path, signature, settings, func, naive) -> TorchLoss:
    """A trainer's loss (``--signature verl|skyrl|miles``): its own function, a
    ``torch.compile``\\ d one unwrapped."""
    framework = FRAMEWORKS.get(signature)
    if framework is None:
        raise BadInput(
            f"{name}: unknown signature {signature!r}; choose one of "
            f"{', '.join(SIGNATURES)}"
        )
    fn = unwrap(fn)
    params = _parameters(fn, name)
    got = tuple(p.name for p in params[: len(framework.first)])
    if got != framework.first:
        raise BadInput(
            f"{name}: --signature {signature} needs {signature}'s policy-loss "
            f"signature, parameters beginning ({', '.join(framework.first)}); got "
            f"({', '.join(got)})"
        )
    from theorycheck.torchfront._forms import verl_loss

    return verl_loss(
        fn,
        f"{name}[{signature}]",
        path,
        params,
        settings,
        func=func,
        naive=naive,
        framework=framework,
    )


def _verl_text() -> str:
    return f"({', '.join(VERL_TENSORS + VERL_KEYWORDS)})"


def load(path: Path, func: str, *, naive: bool = False) -> TorchLoss:
    """Loads ``FN`` (``func`` may carry ``[verl;...]``) of a PyTorch file.

    Args:
        path: the ``.py`` file.
        func: the function's name, optionally with the signature suffix.
        naive: translate ``detach``/``no_grad`` as the identity (tests of the gate).

    Raises:
        BadInput: torch is not installed, the file cannot be loaded, the function is
            missing or has neither form, or (verl) a config key is unknown.
    """
    fn_name, signature, settings = split_function(func or "loss")
    if multiprocessing.parent_process() is not None and not naive:
        from theorycheck.torchfront import _cache  # a worker: the parent's programs

        entry = _cache.get(path, func or "loss")
        if entry is not None:
            return _cache.cached_loss(entry, lambda: _load(path, func, naive))
    return _load(path, func, naive)


def _load(path: Path, func: str, naive: bool) -> TorchLoss:
    fn_name, signature, settings = split_function(func or "loss")
    _import_torch(path)
    module = _load_module(path)
    fn = getattr(module, fn_name or "loss", None)
    name = f"{path.name}:{fn_name or 'loss'}"
    if not callable(fn):
        raise BadInput(f"{str(path)!r} has no function {fn_name or 'loss'!r}")
    params = _parameters(fn, name)
    if signature is not None and signature != "logits":
        return _trainer_loss(fn, name, path, signature, settings, func, naive)
    positional = [
        p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    if _is_verl(params):
        raise BadInput(
            f"{name}: has verl's policy-loss signature; pass --signature verl"
        )
    if len(positional) < 2:
        got = ", ".join(p.name for p in params)
        raise BadInput(
            f"{name}: takes ({got}); a PyTorch loss is fn(logits, sampled, **params) "
            f"or, with --signature verl, {_verl_text()}"
        )
    from theorycheck.torchfront._forms import logits_loss

    return logits_loss(fn, name, path, params[2:], func=func or "loss", naive=naive)


def from_function(fn: Callable, signature: str, settings: Mapping[str, Any]):
    """A trainer's loss given as the function itself (not ``FILE.py:FN``): the
    :class:`TorchLoss` that ``--signature`` builds from a file."""
    _import_torch(Path("the loss"))
    fn = unwrap(fn)
    try:
        source = Path(inspect.getsourcefile(fn) or "loss.py")
    except TypeError:
        source = Path("loss.py")
    name = f"{source.name}:{getattr(fn, '__qualname__', 'loss')}"
    return _trainer_loss(fn, name, source, signature, dict(settings), name, False)

r"""The gradient coefficient of a PyTorch loss, from torch autograd.

The coefficient of a token rule is :math:`c = \partial j/\partial\log\pi_k` with
:math:`j = -L` (the registry's convention, so that :math:`\nabla_z j = c\,(e_k - \pi)`):

* verl form: :math:`c = -\partial L/\partial\,\texttt{log\_prob}` at
  ``old_log_prob = log q``, ``log_prob = log p``, ``advantages = adv``, mask 1;
* logits form: at :math:`z = \log\pi` with :math:`\pi_k = p` and the other
  :math:`V - 1 = 3` tokens sharing :math:`1 - p` (μ likewise from q), the gradient
  must lie along :math:`e_k - \pi`; then :math:`c = -(\nabla_z L)_k / (1 - p)`. A
  gradient off that line is refused (the loss is not a rule of the sampled token).

:func:`compare_rule` evaluates a registry rule at the same point and on a grid of
:math:`p` (both signs of the advantage, the same q) and says where they differ.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from theorycheck._errors import BadInput

#: verl config names -> the registry's names of the same hyperparameters.
VERL_TO_RULE = {
    "clip_ratio_low": "eps_low",
    "clip_ratio_high": "eps_high",
    "clip_ratio_c": "kappa",
}
#: the vocabulary of the logits form's coefficient point.
VOCAB = 4
#: p of the comparison grid: 106 geometric steps from 0.001 to 0.99, none of them a
#: round number, so that r = p/q does not land exactly on a clip boundary (a tie,
#: where torch.minimum splits the gradient and the registry keeps the token).
GRID = np.geomspace(1e-3, 0.99, 106)


def _verl_c(loss, p: float, q: float, adv: float) -> float:
    import torch

    ref = loss.reference
    t = lambda x: torch.full((1, 1), float(x), dtype=torch.float64)  # noqa: E731
    logp = t(np.log(p)).requires_grad_(True)
    out = ref(t(np.log(q)), logp, t(adv), t(1.0))
    if not out.requires_grad:
        return 0.0
    (grad,) = torch.autograd.grad(out, logp, allow_unused=True)
    return 0.0 if grad is None else -float(grad.reshape(()))


def _logits_c(loss, p: float, q: float, adv: float, params: Mapping) -> float:
    import torch

    from theorycheck.torchfront._trace import pick_loss

    if p >= 1.0:
        raise BadInput("--p 1: pi = e_k leaves no direction e_k - pi to read c from")
    pi = np.full(VOCAB, (1 - p) / (VOCAB - 1))
    pi[0] = p
    mu = np.full(VOCAB, (1 - q) / (VOCAB - 1))
    mu[0] = q
    kwargs: dict[str, Any] = {}
    inputs = {"adv": adv, "q": q, "behavior_logp": np.log(mu), **params}
    for key in loss.accepts:
        if key in inputs:
            kwargs[key] = torch.as_tensor(np.asarray(inputs[key], np.float64))
    z = torch.tensor(np.log(pi), dtype=torch.float64, requires_grad=True)
    out = pick_loss(loss.torch_fn(z, 0, **kwargs), loss.name).reshape(())
    (grad,) = torch.autograd.grad(out, z, allow_unused=True)
    g = np.zeros(VOCAB) if grad is None else -grad.numpy()
    c = g[0] / (1 - p)
    direction = np.eye(VOCAB)[0] - pi
    if np.max(np.abs(g - c * direction)) > 1e-9 * (1 + np.max(np.abs(g))):
        raise BadInput(
            f"{loss.name}: its gradient at p={p:g} is not along e_k - pi "
            f"({np.round(g, 6).tolist()}): not a rule of the sampled token, so it "
            "has no coefficient c"
        )
    return float(c)


def _c_function(path: Path, func: str, params: Mapping) -> tuple[Any, Callable]:
    from theorycheck.torchfront._front import load

    loss = load(path, func)
    unknown = sorted(set(params) - set(loss.accepts) - {"q"})
    if loss.form == "logits" and unknown:
        raise BadInput(
            f"{loss.name}: unknown parameter {unknown[0]!r}; it takes: "
            f"{', '.join(sorted(loss.accepts)) or '(none)'}"
        )
    if loss.form == "verl":
        return loss, lambda p, q, adv: _verl_c(loss, p, q, adv)  # eager: no trace
    return loss, lambda p, q, adv: _logits_c(loss, p, q, adv, params)


def torch_coefficient(
    path: str, func: str, p: float, q: float, adv: float, params: Mapping[str, float]
) -> dict[str, Any]:
    """c of a PyTorch loss at (p, q, adv) by torch autograd (module docstring).

    Args:
        path: the loss file.
        func: the function, optionally with ``[verl;KEY=VALUE...]``.
        p: current probability of the sampled token.
        q: behavior probability.
        adv: advantage.
        params: ``--set`` values for the logits form (verl: in ``func``).

    Returns:
        ``{"loss", "form", "coefficient", "params"}``.
    """
    loss, c_of = _c_function(Path(path), func, params)  # torch missing: one line
    from theorycheck.torchfront._trace import float64_default

    with float64_default():
        c = c_of(p, q, adv) + 0.0  # no -0
    used = {k: v for k, v in loss.defaults.items() if _plain(v)}
    used.update(params)
    for key in ("adv", "q", "behavior_logp"):  # given by --adv, --q
        used.pop(key, None)
    return {"loss": loss.name, "form": loss.form, "coefficient": c, "params": used}


def _plain(v: Any) -> bool:
    return v is None or isinstance(v, (bool, int, float, str))


def _rule_c(rule: str, settings: Mapping[str, Any]) -> tuple[Callable, dict]:
    from theorycheck.losses import get_rule, resolve_params

    spec = get_rule(rule, token=True)
    mine = {k: v for k, v in settings.items() if k in spec.defaults}
    params, inputs = resolve_params(rule, mine)

    def c_of(p, q, adv):
        import jax

        with jax.enable_x64(True):
            c, _ = spec.coefficient(p, q, adv, **inputs, **params)
        return float(c)

    return c_of, {**params, **inputs}


def rule_settings(loss, rule: str, params: Mapping[str, Any]) -> tuple[dict, dict]:
    """The rule's parameters for comparing ``loss`` with ``rule``, and where each
    came from: for a trainer's signature, the values its loss read (the trainer's
    defaults and ``--set``) mapped onto the rule's names
    (:meth:`~theorycheck.torchfront._signatures.Framework.rule_params`); for the
    logits form, the ``--set`` values (verl's ``clip_ratio_*`` names read as
    ``eps_low``, ``eps_high``, ``kappa``)."""
    from theorycheck.torchfront._signatures import FRAMEWORKS

    framework = FRAMEWORKS.get(getattr(loss, "signature", "logits"))
    if framework is None:
        mapped = {VERL_TO_RULE.get(k, k): v for k, v in params.items()}
        return mapped, {k: VERL_TO_RULE.get(k, k) for k in params}
    return framework.rule_params(rule, {**loss.defaults, **params})


#: documented conventions a difference may be (largest relative difference, name):
#: verl's token-mean divides by ``mask.sum() + 1e-8`` (a relative 1e-8), and a
#: ratio rounded through float32 carries a relative ~6e-8 (2^-24) per rounding.
CONVENTIONS = (
    (2e-8, "length bias (a 1e-8 in the denominator of the token mean)"),
    (1e-6, "float32 ratio rounding (relative ~1e-7)"),
)


def classify(torch_c: float, rule_c: float) -> str:
    """``equal`` (within ``1e-9 (1 + |c|)``), the name of a documented convention
    (:data:`CONVENTIONS`, by the relative difference), or ``real``."""
    if _equal(torch_c, rule_c):
        return "equal"
    if not (np.isfinite(torch_c) and np.isfinite(rule_c)):
        return "real"
    rel = abs(torch_c - rule_c) / max(abs(torch_c), abs(rule_c))
    for bound, name in CONVENTIONS:
        if rel <= bound:
            return name
    return "real"


def _regions(rows: list[tuple], q: float):
    """Runs of grid points that differ in the same class, per advantage: ratio
    ranges, the class and an example."""
    out = []
    for adv in sorted({r[1] for r in rows}):
        mine = [r for r in rows if r[1] == adv]
        run: list = []
        for row in mine + [None]:
            if run and (row is None or row[4] != run[-1][4]):
                mid = run[len(run) // 2]
                out.append(
                    {
                        "adv": adv,
                        "class": run[0][4],
                        "ratio_min": run[0][0] / q,
                        "ratio_max": run[-1][0] / q,
                        "points": len(run),
                        "example": {"p": mid[0], "torch": mid[2], "rule": mid[3]},
                    }
                )
                run = []
            if row is not None and row[4] != "equal":
                run.append(row)
    return out


def compare_rule(
    path: str,
    func: str,
    rule: str,
    p: float,
    q: float,
    adv: float,
    params: Mapping[str, float],
) -> dict[str, Any]:
    """Does the PyTorch loss have the coefficient of registry rule ``rule``?

    At (p, q, adv) and on a grid of p (``GRID``, 106 geometric values in
    [0.001, 0.99]) at the same q for both signs of the advantage (+-|adv|, +-1 when
    adv = 0). The rule gets the parameters the loss used (:func:`rule_settings`:
    a trainer's values mapped onto the rule's names), its own defaults for the
    rest. Each point is ``equal`` within ``1e-9 (1 + |c|)``, a documented
    convention (:data:`CONVENTIONS`) or ``real``; the largest absolute and
    relative differences are reported.

    Returns:
        ``{"rule", "rule_params", "mapping", "coefficient", "equal", "verdict",
        "grid_points", "differ", "classes", "max_abs", "max_rel", "regions"}``.
    """
    from theorycheck.torchfront._front import split_function

    _, _, config = split_function(func)
    loss, c_of = _c_function(Path(path), func, params)  # torch missing: one line
    from theorycheck.torchfront._trace import float64_default

    def c_torch(*point):
        with float64_default():
            return c_of(*point) + 0.0

    mapped, sources = rule_settings(loss, rule, {**config, **params})
    c_rule, rule_params = _rule_c(rule, mapped)
    here, mine = c_rule(p, q, adv), c_torch(p, q, adv)
    size = abs(adv) or 1.0
    rows = []
    for a in (size, -size):
        for x in GRID:
            ct, cr = c_torch(float(x), q, a), c_rule(float(x), q, a) + 0.0
            rows.append((float(x), a, ct, cr, classify(ct, cr)))
    return {
        "rule": rule,
        "rule_params": rule_params,
        "mapping": sources,
        "coefficient": here,
        "equal": _equal(mine, here),
        **summary(rows),
        "regions": _regions(rows, q),
    }


def summary(rows: list[tuple]) -> dict[str, Any]:
    """The grid's verdict: ``EQUAL``, ``EQUAL up to conventions`` (every
    difference a documented one) or ``DIFFERENT``, with the counts per class and
    the largest absolute and relative differences."""
    classes: dict[str, int] = {}
    max_abs = max_rel = 0.0
    for _, _, ct, cr, kind in rows:
        if kind == "equal":
            continue
        classes[kind] = classes.get(kind, 0) + 1
        diff = abs(ct - cr) if np.isfinite(ct) and np.isfinite(cr) else np.inf
        max_abs = max(max_abs, diff)
        scale = max(abs(ct), abs(cr))
        max_rel = max(max_rel, diff / scale if scale else np.inf)
    if not classes:
        verdict = "EQUAL"
    elif "real" in classes:
        verdict = "DIFFERENT"
    else:
        verdict = "EQUAL up to conventions"
    return {
        "verdict": verdict,
        "grid_points": len(rows),
        "differ": sum(classes.values()),
        "classes": classes,
        "max_abs": float(max_abs),
        "max_rel": float(max_rel),
    }


def _equal(a: float, b: float) -> bool:
    if not (np.isfinite(a) and np.isfinite(b)):
        return a == b
    return abs(a - b) <= 1e-9 * (1 + abs(b))

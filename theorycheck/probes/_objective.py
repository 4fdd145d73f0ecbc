r"""A trainer's batch as ``apply_fn(params, view) -> logits`` and any registry loss.

The probes of :mod:`._linearization` and :mod:`._gradnorm` take a generic
``apply_fn``. :func:`trainer_view` turns a :class:`theorycheck.rl.Trainer` (frozen
trunk computed once, trainable top) into that form with every weight and activation a
jit argument, and :func:`objective_fn` gives the minibatch objective of any registered
rule, token rules (PPO, ...) and the distribution rules against a FIXED target
(``sft``, ``lco_*``: :math:`z^* = z_{old} + \hat A/\beta` with :math:`z_{old}` the
logits at the start of the run, the fixed-target setting of LCO Props. 4.4, 4.8, 4.9):

.. math::
    L(\theta) = \sum_{s,t} w_{st}\,\ell\big(z_{st}(\theta), k_{st};\ \hat A_s,
    \log\mu_{st}, z_{old,st}\big),\qquad w_{st} = 1/(\text{tokens}).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax

from theorycheck._errors import BadInput
from theorycheck.losses import LOSSES
from theorycheck.models import logits_from_hidden


class View(NamedTuple):
    """Everything the trainable top reads besides its own weights (jit arguments).

    Attributes:
        hidden: ``[b, S, D]`` the frozen trunk's residual stream.
        attention_mask: ``[b, S]``.
        head_params: the frozen head weights (``embed`` / ``lm_head``).
    """

    hidden: jax.Array
    attention_mask: jax.Array
    head_params: dict


class Targets(NamedTuple):
    """Per-token loss inputs of the rows of a :class:`View` (``[b, N, ...]``).

    Attributes:
        weight: ``[b, N]`` reduction weights w (sum to 1 over the rows).
        sampled: ``[b, N]`` sampled tokens k.
        adv: ``[b, N]`` advantages Â.
        behavior_logp: ``[b, N, V]`` log μ (the fixed anchor).
        old_logits: ``[b, N, V]`` z_old (the fixed LCO target's base).
    """

    weight: jax.Array
    sampled: jax.Array
    adv: jax.Array
    behavior_logp: jax.Array
    old_logits: jax.Array


@functools.lru_cache(maxsize=16)
def trainer_apply_fn(config, rows):
    """``apply_fn(trainable, view) -> logits [b, N, V]`` of the response rows.

    Cached: the same (config, rows) gives the same function object, so jitted probes
    keyed on it compile once per shape.
    """

    def apply_fn(trainable, view: View):
        return logits_from_hidden(
            trainable,
            view.head_params,
            config,
            view.hidden,
            view.attention_mask,
            rows=rows,
        )

    return apply_fn


def trainer_view(trainer, rows=None, dtype=None) -> tuple[View, Targets]:
    """The (view, targets) of a :class:`theorycheck.rl.Trainer`'s rows at its start.

    ``old_logits`` are the trainer's logits at ``trainer.trainable0`` (the fixed
    target's base); weights are the token mean over the selected rows.

    Args:
        trainer: a prepared Trainer.
        rows: sequence row indices (None = the whole batch).
        dtype: cast activations and head weights (e.g. float64 for evaluation).

    Returns:
        ``(View, Targets)``.
    """
    b = (
        trainer.batch
        if rows is None
        else jax.tree_util.tree_map(lambda x: x[rows], trainer.batch)
    )
    cast = (lambda x: x) if dtype is None else (lambda x: x.astype(dtype))
    view = View(
        cast(b.hidden),
        b.attention_mask,
        optax.tree.cast(trainer.head_params, dtype),
    )
    params0 = optax.tree.cast(trainer.trainable0, dtype)
    old = trainer_apply_fn(trainer.model_config, trainer.rows)(params0, view)
    mask = cast(b.response_mask)
    targets = Targets(
        weight=mask / jnp.sum(mask),
        sampled=b.sampled,
        adv=cast(b.adv),
        behavior_logp=cast(b.behavior_logp),
        old_logits=old,
    )
    return view, targets


@functools.lru_cache(maxsize=32)
def objective_fn(loss: str, loss_params: tuple = ()):
    """``loss_fn(logits, targets) -> (L, token_losses)`` of a registered rule.

    Cached per (loss, loss_params), like :func:`trainer_apply_fn`.

    Args:
        loss: a name in ``theorycheck.losses.LOSSES`` (token rules, ``sft`` and the
            ``lco_*`` distribution rules; sequence rules are refused).
        loss_params: ``((key, value), ...)`` overrides of the rule's defaults.

    Returns:
        The loss function.
    """
    spec = LOSSES.get(loss)
    if spec is None:
        raise BadInput(f"unknown loss {loss!r}; valid: {', '.join(LOSSES)}")
    if spec.family == "sequence":
        raise BadInput(f"loss {loss!r} is a sequence rule; token/distribution only")
    kw = dict(loss_params)
    for key in kw:
        if key not in spec.defaults:
            raise BadInput(f"loss {loss!r} takes no parameter {key!r}")

    def one(z, k, a, b, o):
        avail = {"adv": a, "behavior_logp": b, "old_logits": o}
        return spec.loss(z, k, **{n: avail[n] for n in spec.inputs}, **kw)

    def loss_fn(logits, t: Targets):
        tok = jax.vmap(jax.vmap(one))(
            logits, t.sampled, t.adv, t.behavior_logp, t.old_logits
        )
        return jnp.sum(t.weight * tok), tok

    return loss_fn


@functools.partial(jax.jit, static_argnames=("apply_fn", "loss_fn"))
def value_and_grad(trainable, view, targets, apply_fn, loss_fn):
    """``(L, ∇_θL)`` of ``loss_fn(apply_fn(trainable, view), targets)`` (jitted)."""
    return jax.value_and_grad(lambda p: loss_fn(apply_fn(p, view), targets)[0])(
        trainable
    )

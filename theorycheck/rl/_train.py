r"""A GRPO-style training loop with a fixed rollout anchor, trainable top, any loss.

One rollout batch (anchor μ fixed) is split into M minibatches; each minibatch gives one
optimizer step, and the whole batch may be passed over for several epochs, all against
the same μ (the multi-minibatch / multi-epoch schedule of production trainers). The
objective of a minibatch is

.. math::
    \mathcal L(\theta) = \sum_{s,t} w_{st}\, m_{st}\,
        \ell_\text{rule}\big(z_{st}(\theta), k_{st};\ \hat A_s, \log\mu_{st}\big)

with the registry's token rule :math:`\ell_\text{rule}` (``theorycheck.losses.LOSSES``),
the registry's reduction weights :math:`w` (computed on the minibatch, as frameworks
do), an optional keep-mask :math:`m` (masked tokens stay in the reduction's
denominator, as in verl) and GRPO group advantages :math:`\hat A_s`
(``theorycheck.losses.grpo_advantages``, sample standard deviation).

Only the last ``trainable_blocks`` blocks and the final norm (plus an untied head)
train: the frozen trunk's residual stream is computed once (exact) and the top runs in
float64, so tiny realized changes of D at small learning rates are not rounding noise.
Weights are always jit arguments.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from theorycheck._errors import BadInput
from theorycheck.losses import LOSSES, Reduction, grpo_advantages, reduction_weights
from theorycheck.models import (
    cast_params,
    distinct_prefixes,
    hidden_states,
    logits_from_hidden,
    prefix_hidden_states,
    split_params,
)
from theorycheck.rl._config import TrainConfig, make_optimizer


class Batch(NamedTuple):
    """The trainer's view of one rollout batch (rows in minibatch order).

    Attributes:
        hidden: ``[B, S, D]`` the frozen trunk's residual stream.
        attention_mask: ``[B, S]`` prompt padding mask.
        sampled: ``[B, N]`` sampled tokens.
        adv: ``[B, N]`` per-token advantages (the response's GRPO advantage).
        behavior_logp: ``[B, N, V]`` log μ (the fixed anchor).
        response_mask: ``[B, N]`` 1 for trained tokens.
        group: ``[B]`` prompt ids.
    """

    hidden: jax.Array
    attention_mask: jax.Array
    sampled: jax.Array
    adv: jax.Array
    behavior_logp: jax.Array
    response_mask: jax.Array
    group: jax.Array


class Step(NamedTuple):
    r"""One optimizer step of :meth:`Trainer.steps`: θ_t to θ_{t+1} = θ_t + Δθ_t.

    Attributes:
        epoch: the pass over the batch (0-based).
        step: the minibatch's index within the epoch.
        rows: the minibatch's row indices.
        trainable: θ_t, the parameters before the update.
        opt_state: the optimizer state before the update.
        value: what the gradient function returned beside the gradient (the
            minibatch loss for the trainer's own objective).
        grads: the gradient at θ_t.
        delta: Δθ_t, the optimizer's update (``optax.apply_updates`` adds it).
        new_trainable: θ_{t+1}.
        new_opt_state: the optimizer state after the update.
    """

    epoch: int
    step: int
    rows: np.ndarray
    trainable: Any
    opt_state: Any
    value: Any
    grads: Any
    delta: Any
    new_trainable: Any
    new_opt_state: Any


@functools.partial(jax.jit, static_argnames=("config", "rows"))
def _logits(trainable, head_params, config, hidden, attention_mask, rows):
    return logits_from_hidden(
        trainable, head_params, config, hidden, attention_mask, rows=rows
    )


def token_losses(logits, batch: Batch, loss: str, params: tuple):
    r"""Every token's loss ``ℓ(z_{b,n}, k_{b,n}; Â_{b,n}, log μ_{b,n})``, ``[B, N]``.

    Args:
        logits: ``[B, N, V]``.
        batch: anything with ``sampled``, ``adv`` and ``behavior_logp`` ``[B, N]``
            (a :class:`Batch`, or the probes' row views of one).
        loss: a registered token rule (``theorycheck.losses.LOSSES``).
        params: the rule's ``(name, value)`` pairs.
    """
    spec = LOSSES[loss]
    kw = dict(params)

    def one(z, k, a, b):
        inputs = {"adv": a, "behavior_logp": b}
        return spec.loss(z, k, **{n: inputs[n] for n in spec.inputs}, **kw)

    return jax.vmap(jax.vmap(one))(
        logits, batch.sampled, batch.adv, batch.behavior_logp
    )


@functools.partial(
    jax.jit, static_argnames=("config", "rows", "loss", "params", "reduction", "groups")
)
def _grad(
    trainable, head_params, batch, keep, config, rows, loss, params, reduction, groups
):
    weights = reduction_weights(
        batch.response_mask,
        Reduction(reduction),
        group_ids=batch.group,
        num_groups=groups,
    )

    def objective(tr):
        z = logits_from_hidden(
            tr, head_params, config, batch.hidden, batch.attention_mask, rows=rows
        )
        return jnp.sum(weights * keep * token_losses(z, batch, loss, params))

    return jax.value_and_grad(objective)(trainable)


def take_rows(batch: Batch, rows) -> Batch:
    """The sub-batch of sequence rows ``rows`` (an index array or slice)."""
    return Batch(*(x[rows] for x in batch))


def _trunk(params, cfg, rollouts, order, num_blocks):
    r"""``[B, P + N, D]`` the frozen trunk's residual stream of the rows ``order``.

    A float64 trunk runs each distinct prompt once
    (:func:`theorycheck.models.prefix_hidden_states`: the G samples of a group
    share their prompt's activations) and gives every row its prompt's: the same
    numbers as the full sequences to float64 rounding (~1e-16 relative, what the
    float64 trunk is there to make negligible). A float32 trunk runs the full
    sequences, as the results recorded with it did (its rounding, ~1e-7, depends
    on the shapes of the products)."""
    if params["embed"].dtype != jnp.float64:
        ids, amask = rollouts.sequences()
        return hidden_states(
            params, cfg, ids[order], num_blocks=num_blocks, attention_mask=amask[order]
        )
    prefix_ids, prefix_mask, group = distinct_prefixes(
        rollouts.prompt_ids[order], rollouts.prompt_mask[order]
    )
    prefix, rows = prefix_hidden_states(
        params,
        cfg,
        prefix_ids,
        prefix_mask,
        np.asarray(rollouts.tokens[order], np.int32),
        group,
        num_blocks=num_blocks,
    )
    return jnp.concatenate([prefix[jnp.asarray(group)], rows], axis=1)


class Trainer:
    """One rollout batch prepared for training: frozen trunk, anchor, optimizer.

    Args:
        model: a :class:`theorycheck.models.Model` (float32 parameters).
        rollouts: :class:`~theorycheck.rl.Rollouts` recorded with ``full_vocab``.
        config: the :class:`TrainConfig`.
        seed: seeds the minibatch assignment (a permutation of the rows).
        dtype: dtype of the trainable top (float64 by default).
        sharding: a ``jax.sharding.Sharding`` for the row axis (data parallel) or
            None; the batch arrays are placed with it, weights are replicated.
        chunk: sequences per call of the whole-batch probes (memory); None = the
            whole batch at once (the default with a ``sharding``).
        trunk: a dict shared by the trainers of ONE model and ONE rollout batch: the
            frozen trunk's residual stream is computed once per (trainable blocks,
            seed, dtype, ``config.trunk_dtype``) and reused by the others (exact:
            the same array), e.g. by the variants of one seed that differ only in
            their optimizer or epochs.
    """

    def __init__(
        self,
        model,
        rollouts,
        config: TrainConfig,
        *,
        seed: int,
        dtype=jnp.float64,
        sharding=None,
        chunk: int | None = 4,
        trunk: dict | None = None,
    ):
        cfg, params, _ = model
        if config.mismatch and rollouts.behavior_logp is None:
            raise BadInput(
                "rollouts need the engine's full log-probs for the trainer's anchor "
                "(full_vocab=True, or rescore) when mismatch is on"
            )
        b, n = rollouts.tokens.shape
        m = config.minibatches
        if b % m:
            raise BadInput(f"{b} sequences do not split into minibatches = {m}")
        self.config, self.model_config = config, cfg
        self.chunk = None if sharding is not None else chunk
        trainable, frozen = split_params(
            params, cfg, config.trainable_blocks, train_head=config.train_head
        )
        cast = lambda t: jax.tree_util.tree_map(lambda a: a.astype(dtype), t)
        self.trainable0 = cast(trainable)
        self.head_params = cast(
            {k: frozen[k] for k in ("embed", "lm_head") if k in frozen}
        )
        order = np.random.default_rng(seed).permutation(b)
        _, amask = rollouts.sequences()
        amask = amask[order]
        trunk_dtype = jnp.dtype(config.trunk_dtype)
        key = (config.trainable_blocks, seed, jnp.dtype(dtype).name, trunk_dtype.name)
        hidden = None if trunk is None else trunk.get(key)
        if hidden is None:
            hidden = _trunk(
                params
                if trunk_dtype == params["embed"].dtype
                else cast_params(params, trunk_dtype),
                cfg,
                rollouts,
                order,
                cfg.num_layers - config.trainable_blocks,
            ).astype(dtype)
            if trunk is not None:
                trunk[key] = hidden
        start = rollouts.prompt_ids.shape[1] - 1  # row t scores the token at t + 1
        self.rows = (start, start + n)
        self.groups = int(rollouts.group.max()) + 1
        advantages = grpo_advantages(
            rollouts.reward, rollouts.group, num_groups=self.groups
        )
        self.sequence_adv = np.asarray(advantages.adv)[order]
        self.zero_groups = int(np.sum(np.asarray(advantages.zero_group)))
        self.order = order
        put = (
            (lambda x: x)
            if sharding is None
            else (lambda x: jax.device_put(x, sharding))
        )
        batch = Batch(
            hidden=hidden,
            attention_mask=jnp.asarray(amask),
            sampled=jnp.asarray(rollouts.tokens[order]),
            adv=jnp.asarray(np.repeat(self.sequence_adv[:, None], n, 1), dtype),
            # set below: the anchor, or the policy's own log-probs (which read
            # the batch's other fields); a [B, N, V] placeholder cost its size
            behavior_logp=jnp.zeros((b, n, 0), dtype),
            response_mask=jnp.ones((b, n), dtype),
            group=jnp.asarray(rollouts.group[order]),
        )
        if config.mismatch:
            blogp = jnp.asarray(rollouts.behavior_logp[order], dtype)
        else:
            blogp = jax.nn.log_softmax(self.logits(self.trainable0, batch), axis=-1)
        self.batch = jax.tree_util.tree_map(put, batch._replace(behavior_logp=blogp))
        self.optimizer = make_optimizer(config)
        size = b // m
        self.minibatch_rows = [np.arange(j * size, (j + 1) * size) for j in range(m)]

    def logits(self, trainable, batch: Batch | None = None) -> jax.Array:
        """``[b, N, V]`` trainer logits of the response rows of ``batch``."""
        batch = self.batch if batch is None else batch
        return _logits(
            trainable,
            self.head_params,
            self.model_config,
            batch.hidden,
            batch.attention_mask,
            self.rows,
        )

    def loss_and_grad(self, trainable, rows, keep=None):
        """Minibatch objective and its gradient, optionally with a keep-mask.

        Args:
            trainable: the trainable parameters.
            rows: the minibatch's row indices.
            keep: ``[len(rows), N]`` 1 = keep, 0 = masked (None = keep all).

        Returns:
            ``(loss, grads)``.
        """
        sub = take_rows(self.batch, rows)
        keep = (
            jnp.ones_like(sub.adv) if keep is None else jnp.asarray(keep, sub.adv.dtype)
        )
        c = self.config
        return _grad(
            trainable,
            self.head_params,
            sub,
            keep,
            self.model_config,
            self.rows,
            c.loss,
            tuple(c.loss_params),
            c.reduction,
            self.groups,
        )

    def update(self, trainable, opt_state, grads):
        """``(new_trainable, new_opt_state, delta)`` of one optimizer step."""
        updates, new_state = self.optimizer.update(grads, opt_state, trainable)
        return optax.apply_updates(trainable, updates), new_state, updates

    def schedule(self):
        """Yields ``(epoch, step, rows)`` for every optimizer step of the run."""
        for epoch in range(self.config.epochs):
            for step, rows in enumerate(self.minibatch_rows):
                yield epoch, step, rows

    def steps(
        self,
        trainable=None,
        opt_state=None,
        *,
        grad_fn=None,
        update_fn=None,
        timer=None,
    ):
        r"""Runs :meth:`schedule` and yields one :class:`Step` per optimizer step.

        .. math::
            g_t = \nabla_\theta\mathcal L_{rows_t}(\theta_t),\qquad
            (\Delta\theta_t, s_{t+1}) = \text{opt}(g_t, s_t, \theta_t),\qquad
            \theta_{t+1} = \theta_t + \Delta\theta_t

        The one training loop of the project: :func:`train` and the probes
        (``theorycheck.probes``) iterate it and read each step's record instead of
        repeating the loop. The step is computed before it is yielded; the caller
        may evaluate anything at θ_t (or θ_{t+1}) before asking for the next one.

        Args:
            trainable: θ_0 (None: :attr:`trainable0`).
            opt_state: the optimizer state at θ_0 (None: ``optimizer.init(θ_0)``).
            grad_fn: ``(trainable, step, rows) -> (value, grads)`` (None: the
                trainer's objective, :meth:`loss_and_grad`; the experiments pass
                their own objective of the same rows).
            update_fn: ``(trainable, opt_state, grads) -> (θ_{t+1}, s_{t+1}, Δθ_t)``
                (None: :meth:`update`; the probes' fast path passes its jitted
                update of the same optimizer).
            timer: ``(phase, fn, *args) -> fn(*args)`` wrapped around the
                ``"grad"`` and ``"update"`` calls (a probe's CPU clock), or None.

        Yields:
            :class:`Step`, in schedule order.
        """
        trainable = self.trainable0 if trainable is None else trainable
        if opt_state is None:
            opt_state = self.optimizer.init(trainable)
        if grad_fn is None:
            grad_fn = lambda tr, _step, rows: self.loss_and_grad(tr, rows)  # noqa: E731
        if update_fn is None:
            update_fn = self.update
        if timer is None:
            timer = lambda _phase, fn, *args: fn(*args)  # noqa: E731
        for epoch, step, rows in self.schedule():
            value, grads = timer("grad", grad_fn, trainable, step, rows)
            new, new_state, delta = timer(
                "update", update_fn, trainable, opt_state, grads
            )
            yield Step(
                epoch=epoch,
                step=step,
                rows=rows,
                trainable=trainable,
                opt_state=opt_state,
                value=value,
                grads=grads,
                delta=delta,
                new_trainable=new,
                new_opt_state=new_state,
            )
            trainable, opt_state = new, new_state


def train(trainer: Trainer, *, on_step=None):
    """Runs every step of ``trainer.steps()``; returns the final parameters.

    Args:
        trainer: a prepared :class:`Trainer`.
        on_step: optional callback called with each step's :class:`Step` (θ_t, the
            optimizer state, the gradient and the update Δθ_t, before the next step).

    Returns:
        ``(trainable, losses)`` with the per-step minibatch losses.
    """
    trainable, losses = trainer.trainable0, []
    for step in trainer.steps():
        if on_step is not None:
            on_step(step)
        trainable = step.new_trainable
        losses.append(float(step.value))
    return trainable, losses

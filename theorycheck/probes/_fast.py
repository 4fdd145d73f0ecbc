r"""The sign-agreement probe's fast path: the same numbers as the plain loop, cheaper.

:func:`~theorycheck.probes.run_probe` (``fast=True``, the default) computes every
quantity of the plain per-step loop (``fast=False``) with these changes, each exact
(the same function of the same inputs; the numbers agree to float64 rounding, checked
against the plain loop in ``tests/probes/test_fast.py``):

* **Shared prompts.** The G samples of a GRPO group share their prompt, and causal
  attention makes the prompt's activations independent of the response, so the
  trainable top runs over each distinct prompt once and over every response
  (:func:`theorycheck.models.logits_from_prefix`) instead of over B full sequences.
* **One pass per step.** D, the ratio, the exact and top-K Ḋ (from the primal logits)
  and :math:`g'(0), g''(0)` along the step's update (one nested JVP) come from one
  jitted call over all rows; D after step t is the primal of step t + 1's pass (the
  same function at :math:`\theta_{t+1}`), so no separate realized pass runs except at
  the start and the end of the run (the start's direct pass is compared with the
  first JVP's primal, ``d0_check``).
* **Row subsets** (``run_probe(probe_rows="minibatch")``, not a change of the
  numbers but of which are computed): :meth:`FastProbe.probe_pass` and
  :meth:`FastProbe.divergences` take a row subset (``idx``), run in group-sorted
  chunks of a fixed size (one compile for every subset of one size), and leave the
  rows outside it NaN.
* **Masks from the step's own head pullback.** The minibatch objective
  :math:`J_k = \sum w\,k\,\ell(W h)` is linear in the keep-mask k and each token's
  loss depends on its own logits, so with the head W frozen the cotangent at the
  head's input is :math:`k \odot e`, :math:`e = w\,W^\top\nabla_z\ell`, for every
  k: the unmasked gradient's call returns e, and the three masks' gradients are
  three pullbacks through the blocks of one forward (``vmap`` over the keep-masks;
  no head product, :func:`_grads_from`); their post-update D comes from one vmapped
  forward over the three updated parameter sets. The matched controls
  (:func:`matched_controls`) take the unmasked and their three gradients from one
  such call.
* **Jitted optimizer steps.** The trainer's optimizer step (``optax``: global-norm
  clip, then AdamW / Adam / SGD, :func:`theorycheck.rl.make_optimizer` of the
  trainer's config) runs as one compiled program per config instead of one dispatch
  per leaf operation, and the masks' three updates from the same state as one
  vmapped program.
* **No branch for a mask that clips nothing.** A mask whose keep-mask is all ones
  has the unmasked update, so its D after the step is the trajectory's (no gradient,
  update or forward of its own); when no mask clips a token (exactly on-policy at
  θ = θ_old, where D, the ratio's direction and Ḋ are all rounding noise, see
  :func:`~theorycheck.probes.outside`), the step's mask work is skipped.
* **Compile once per shape.** The prompt is left-padded to a multiple of
  :data:`BUCKET` positions, the rows run in fixed-size chunks and a minibatch's
  prompts are padded to the most it can hold, so every seed and variant with the
  same batch shape reuses one compiled program; weights are jit arguments.
"""

from __future__ import annotations

import functools
import time
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from theorycheck.losses import Reduction, reduction_weights
from theorycheck.models import logits_from_prefix
from theorycheck.numeric import MaskConfig, token_stats
from theorycheck.probes._metrics import ESTIMATORS
from theorycheck.probes._taylor import kl_rows, taylor_fn
from theorycheck.rl import token_losses

#: prompts are left-padded to a multiple of this many positions (one compile for all
#: prompt lengths in a bucket).
BUCKET = 32
#: rows x response tokens per probe-pass call (bounds the [tokens, V] temporaries).
TOKENS_PER_CALL = 512


class Layout(NamedTuple):
    """A trainer batch split into distinct prompts and per-row responses.

    Attributes:
        prefix_hidden: ``[G, P, D]`` trunk residual stream of each group's prompt
            (positions before the first scored row), left-padded to :data:`BUCKET`.
        prefix_mask: ``[G, P]``.
        hidden: ``[B, N, D]`` the scored rows' residual stream.
        group: ``[B]`` each row's prompt.
        shared: whether prompts are shared within groups (False: one prefix per row).
    """

    prefix_hidden: jax.Array
    prefix_mask: jax.Array
    hidden: jax.Array
    group: np.ndarray
    shared: bool


def layout(trainer) -> Layout:
    """The :class:`Layout` of a trainer's batch.

    A group's rows share one prefix only when their prompt masks are equal and the
    trunk's residual stream agrees bitwise on every real prompt position (it does:
    the same tokens through the same weights); otherwise every row keeps its own.
    """
    b = trainer.batch
    start, stop = trainer.rows
    hidden = np.asarray(b.hidden)
    mask = np.asarray(b.attention_mask)[:, :start]
    group = np.asarray(b.group)
    ids = np.unique(group)
    first = np.array([np.flatnonzero(group == g)[0] for g in ids])
    local = np.searchsorted(ids, group)
    shared = True
    for i, g in enumerate(local):
        j = first[g]
        live = mask[i] > 0
        if not (
            np.array_equal(mask[i], mask[j])
            and np.array_equal(hidden[i, :start][live], hidden[j, :start][live])
        ):
            shared = False
            break
    if not shared:
        first, local = np.arange(len(group)), np.arange(len(group))
    pad = -start % BUCKET
    ph = np.pad(hidden[first, :start], ((0, 0), (pad, 0), (0, 0)))
    pm = np.pad(mask[first], ((0, 0), (pad, 0)))
    return Layout(
        jnp.asarray(ph),
        jnp.asarray(pm),
        b.hidden[:, start:stop],
        local.astype(np.int32),
        shared,
    )


class _Rows(NamedTuple):
    """The per-row inputs of one call: the batch's device arrays whole (never
    copied) and the rows ``take`` and prompts ``present`` that a jitted call reads
    from them (:func:`_gather`, inside the call)."""

    prefix_hidden: jax.Array
    prefix_mask: jax.Array
    hidden: jax.Array
    group: jax.Array
    sampled: jax.Array
    adv: jax.Array
    behavior_logp: jax.Array
    response_mask: jax.Array
    gids: jax.Array
    take: jax.Array
    present: jax.Array


def _gather(r: _Rows) -> _Rows:
    """The rows ``r.take`` and prompts ``r.present`` of the whole arrays of ``r``
    (in a jitted call: the gather is part of its program, so the ``[b, N, V]``
    anchor of a row subset is never a separate copy; an eager gather per call
    copied it and dispatched nine gathers from Python)."""
    t, p = r.take, r.present
    return r._replace(
        prefix_hidden=r.prefix_hidden[p],
        prefix_mask=r.prefix_mask[p],
        hidden=r.hidden[t],
        sampled=r.sampled[t],
        adv=r.adv[t],
        behavior_logp=r.behavior_logp[t],
        response_mask=r.response_mask[t],
        gids=r.gids[t],
    )


class _Plan:
    """Row subsets with their prompts, padded to fixed shapes (one compile each)."""

    def __init__(self, trainer, lay: Layout):
        self.trainer, self.lay = trainer, lay
        b, n = trainer.batch.sampled.shape
        size = max(1, min(b, TOKENS_PER_CALL // max(n, 1)))
        order = np.argsort(lay.group, kind="stable")  # group-sorted: few per chunk
        self.chunks = [order[s : s + size] for s in range(0, b, size)]
        self.chunk = size
        self.groups = max(len(np.unique(lay.group[c])) for c in self.chunks)
        # a minibatch's prompts padded to the most it can hold: the same shape for
        # every seed (its rows are a random permutation's slice)
        size_mb = max(len(r) for r in trainer.minibatch_rows)
        self.mb_groups = min(size_mb, len(np.unique(lay.group)))

    def rows(self, idx, size=None, groups=None) -> _Rows:
        """``_Rows`` of the row indices ``idx``, padded to ``size`` rows and
        ``groups`` prompts (default: the chunks')."""
        idx = np.asarray(idx)
        size = len(idx) if size is None else size
        groups = self.groups if groups is None else groups
        idx = np.concatenate([idx, np.repeat(idx[-1:], size - len(idx))])
        present = np.unique(self.lay.group[idx])
        present = np.concatenate(
            [present, np.repeat(present[-1:], groups - len(present))]
        )
        local = np.searchsorted(present[: len(np.unique(present))], self.lay.group[idx])
        b = self.trainer.batch
        return _Rows(
            self.lay.prefix_hidden,
            self.lay.prefix_mask,
            self.lay.hidden,
            jnp.asarray(local, jnp.int32),
            b.sampled,
            b.adv,
            b.behavior_logp,
            b.response_mask,
            b.group,
            jnp.asarray(idx, jnp.int32),
            jnp.asarray(present, jnp.int32),
        )


def _logits(trainable, head_params, config, r: _Rows, features: bool = False):
    """The rows' logits ``[b, N, V]``, or with ``features`` the head's input (after
    the final norm) ``[b, N, D]``."""
    return logits_from_prefix(
        trainable,
        head_params,
        config,
        r.prefix_hidden,
        r.prefix_mask,
        r.hidden,
        r.group,
        features=features,
    )


@functools.partial(
    jax.jit, static_argnames=("config", "loss", "params", "reduction", "groups")
)
def _grads(
    trainable, head_params, r: _Rows, keeps, config, loss, params, reduction, groups
):
    """Minibatch objective and gradient for each keep-mask ``keeps [K, b, N]``
    (the trainer's ``loss_and_grad``, ``theorycheck.rl``; one forward, K pullbacks)."""
    r = _gather(r)
    weights = reduction_weights(
        r.response_mask, Reduction(reduction), group_ids=r.gids, num_groups=groups
    )

    def objective(tr, keep):
        z = _logits(tr, head_params, config, r)
        return jnp.sum(weights * keep * token_losses(z, r, loss, params))

    grad = jax.value_and_grad(objective)
    return jax.vmap(grad, in_axes=(None, 0))(trainable, keeps)


@functools.partial(
    jax.jit, static_argnames=("config", "loss", "params", "reduction", "groups")
)
def _grads_frozen_head(
    trainable, head_params, r: _Rows, keeps, config, loss, params, reduction, groups
):
    r"""``(losses [K], grads [K, ...], e)`` for keep-masks ``keeps [K, b, N]``, with
    the frozen head's pullback taken once for all K.

    With :math:`z = W h(\theta)` and the objective
    :math:`J_k = \sum_{b,t} w_{bt}\,k_{bt}\,\ell(z_{bt})` (linear in the keep-mask
    k, each token's loss a function of its own logits), the cotangent at the head's
    input is :math:`k_{bt}\,e_{bt}` with
    :math:`e_{bt} = w_{bt}\,W^\top \nabla_z \ell(z_{bt})`, so
    :math:`\nabla_\theta J_k = J_h^\top (k \odot e)`: one head product forward,
    one backward, then K pullbacks through the blocks (``e`` is returned so that
    later keep-masks of the same state reuse it, :func:`_grads_from`).
    """
    r = _gather(r)
    weights = reduction_weights(
        r.response_mask, Reduction(reduction), group_ids=r.gids, num_groups=groups
    )
    w = _head_matrix(trainable, head_params, config)
    h, pull = jax.vjp(
        lambda tr: _logits(tr, head_params, config, r, features=True), trainable
    )
    acc = jnp.promote_types(h.dtype, jnp.float32)

    def objective(h):
        z = jnp.einsum("bsd,vd->bsv", h, w, preferred_element_type=acc)
        return weights * token_losses(z, r, loss, params)

    per_token, back = jax.vjp(objective, h)
    e = back(jnp.ones_like(per_token))[0]
    losses = jnp.einsum("kbs,bs->k", keeps, per_token)
    grads = jax.vmap(lambda k: pull(k[..., None] * e)[0])(keeps)
    return losses, grads, e


@functools.partial(jax.jit, static_argnames=("config",))
def _grads_from(trainable, head_params, r: _Rows, e, keeps, config):
    """``grads [K, ...]`` of keep-masks ``keeps [K, b, N]`` from the head-input
    cotangent ``e`` of the same state (:func:`_grads_frozen_head`): a forward of the
    blocks and K pullbacks, no head product."""
    r = _gather(r)
    _, pull = jax.vjp(
        lambda tr: _logits(tr, head_params, config, r, features=True), trainable
    )
    return jax.vmap(lambda k: pull(k[..., None] * e)[0])(keeps)


def _head_matrix(trainable, head_params, config):
    """The ``[V, D]`` head matrix when it is frozen (None when it trains)."""
    if "lm_head" in trainable or "embed" in trainable:
        return None
    if config.tie_embeddings:
        return head_params["embed"]
    return head_params["lm_head"].T


def _taylor_through_head(trainable, delta, head_params, r: _Rows, config, w):
    r"""``(z, D, g'(0), g''(0))`` with the frozen linear head taken analytically.

    With :math:`z(\varepsilon) = W h(\varepsilon)` (h the head's input) and
    :math:`D(z) = \sum_v \mu_v(\log\mu_v - \log\pi_v)`, :math:`s = \sum_v \mu_v`:

    .. math::
        g' = \langle s\pi - \mu, W h'\rangle, \qquad
        g'' = s\,\mathrm{Var}_\pi(W h') + \langle W^\top(s\pi - \mu), h''\rangle

    (the derivatives of :func:`~theorycheck.probes.kl_rows`, exact), where h, h', h''
    come from one nested JVP of the blocks and the final norm: three ``[V, D]``
    products instead of the nested JVP's four plus their softmax passes.
    """

    def feats(tr):
        return logits_from_prefix(
            tr,
            head_params,
            config,
            r.prefix_hidden,
            r.prefix_mask,
            r.hidden,
            r.group,
            features=True,
        )

    h, h1, h2 = taylor_fn(feats)(trainable, delta)
    acc = jnp.promote_types(h.dtype, jnp.float32)
    z = jnp.einsum("bsd,vd->bsv", h, w, preferred_element_type=acc)
    z1 = jnp.einsum("bsd,vd->bsv", h1, w, preferred_element_type=acc)
    b = jnp.asarray(r.behavior_logp, z.dtype)
    live = b > -jnp.inf
    mu = jnp.where(live, jnp.exp(jnp.where(live, b, 0.0)), 0.0)
    s = jnp.sum(mu, -1, keepdims=True)
    pi = jax.nn.softmax(z, axis=-1)
    g = s * pi - mu
    d1 = jnp.sum(g * z1, -1)
    m1 = jnp.sum(pi * z1, -1, keepdims=True)
    var = jnp.sum(pi * (z1 - m1) ** 2, -1)
    back = jnp.einsum("bsv,vd->bsd", g, w.astype(acc))
    d2 = s[..., 0] * var + jnp.sum(back * h2.astype(acc), -1)
    return z, kl_rows(b, z), d1, d2


@functools.partial(jax.jit, static_argnames=("config", "topk"))
def _probe_pass(trainable, delta, head_params, r: _Rows, config, topk):
    """D, g'(0), g''(0) along ``delta`` and the ratio and Ḋ of the primal logits."""
    r = _gather(r)
    w = _head_matrix(trainable, head_params, config)
    if w is not None:
        z, d0, d1, d2 = _taylor_through_head(
            trainable, delta, head_params, r, config, w
        )
    else:  # a trainable head: the nested JVP through it

        def d_fn(tr):
            return kl_rows(r.behavior_logp, _logits(tr, head_params, config, r))

        d0, d1, d2 = taylor_fn(d_fn)(trainable, delta)
        z = _logits(trainable, head_params, config, r)
    stats = token_stats(
        r.behavior_logp,
        z,
        r.sampled,
        r.adv,
        config=MaskConfig(topk=topk),
        parts=("full", "topk"),
        check=False,
    )
    out = {"d0": d0, "first": d1, "second": d2, "ratio": stats["ratio"]}
    for est in ESTIMATORS:
        out[f"ddot_{est}"] = stats[f"ddot_kl_{est}"]
    return out


@functools.partial(jax.jit, static_argnames=("config",))
def _divergences(stacked, head_params, r: _Rows, config):
    """``[K, b, N]`` D at each of K stacked parameter sets."""
    r = _gather(r)

    def one(tr):
        return kl_rows(r.behavior_logp, _logits(tr, head_params, config, r))

    return jax.vmap(one)(stacked)


@functools.cache
def _updaters(config):
    """The jitted optimizer step of a ``TrainConfig`` (one compile per config) and its
    vmap over K stacked gradients from the same state (the new parameters only)."""
    from theorycheck.rl import make_optimizer

    opt = make_optimizer(config)

    def one(trainable, opt_state, grads):
        updates, new_state = opt.update(grads, opt_state, trainable)
        return optax.apply_updates(trainable, updates), new_state, updates

    many = jax.vmap(lambda t, s, g: one(t, s, g)[0], in_axes=(None, None, 0))
    return jax.jit(one), jax.jit(many)


def _stack(trees):
    return jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *trees)


class _Clock:
    """Accumulates CPU seconds per phase into ``timings`` (None: no timing)."""

    def __init__(self, timings):
        self.timings = timings

    def __call__(self, phase, fn, *args, **kwargs):
        if self.timings is None:
            return fn(*args, **kwargs)
        t = time.process_time()
        out = jax.block_until_ready(fn(*args, **kwargs))
        self.timings[phase] = self.timings.get(phase, 0.0) + time.process_time() - t
        return out


class FastProbe:
    """The trainer's batch in the fast layout and its jitted calls (see module).

    ``subset``: the most rows a row subset passed to :meth:`probe_pass` or
    :meth:`divergences` (``idx``) holds; its rows then run in group-sorted chunks of
    ``min(subset, chunk)`` rows (one compile for every subset of that size).
    """

    def __init__(self, trainer, *, topk: int, timings=None, subset: int | None = None):
        self.trainer, self.topk = trainer, topk
        self.clock = _Clock(timings)
        self.lay = self.clock("layout", layout, trainer)
        self.plan = _Plan(trainer, self.lay)
        b = trainer.batch.sampled.shape[0]
        self.chunk_rows = [self.plan.rows(c, self.plan.chunk) for c in self.plan.chunks]
        self.mb_rows = [
            self.plan.rows(r, groups=self.plan.mb_groups)
            for r in trainer.minibatch_rows
        ]
        self.b = b
        self.sub = min(self.plan.chunk, subset or self.plan.chunk)
        self.sub_groups = min(self.sub, len(np.unique(self.lay.group)))

    def _sets(self, idx):
        """``[(row indices, _Rows), ...]``: every row (``idx`` None, the fixed
        chunks), or the rows ``idx`` in group-sorted chunks of ``self.sub`` rows."""
        if idx is None:
            return list(zip(self.plan.chunks, self.chunk_rows))
        idx = np.asarray(idx)
        idx = idx[np.argsort(self.lay.group[idx], kind="stable")]
        size = self.sub
        parts = [idx[s : s + size] for s in range(0, len(idx), size)]
        return [(c, self.plan.rows(c, size, self.sub_groups)) for c in parts]

    def grads(self, trainable, step: int, keeps):
        """``(losses [K], grads [K, ...], e)`` of minibatch ``step`` for ``keeps``;
        ``e`` is the head-input cotangent that :meth:`grads_from` reuses (None when
        the head trains: then every call runs the whole forward and backward)."""
        t, c = self.trainer, self.trainer.config
        args = (
            trainable,
            t.head_params,
            self.mb_rows[step],
            jnp.asarray(keeps, t.batch.adv.dtype),
            t.model_config,
            c.loss,
            tuple(c.loss_params),
            c.reduction,
            t.groups,
        )
        if _head_matrix(trainable, t.head_params, t.model_config) is None:
            return (*_grads(*args), None)
        return _grads_frozen_head(*args)

    def grads_from(self, trainable, step: int, e, keeps):
        """``grads [K, ...]`` of minibatch ``step`` for ``keeps`` at the state whose
        :meth:`grads` gave ``e`` (the same numbers as ``grads(...)[1]``)."""
        t = self.trainer
        keeps = jnp.asarray(keeps, t.batch.adv.dtype)
        if e is None:
            return self.grads(trainable, step, keeps)[1]
        return _grads_from(
            trainable, t.head_params, self.mb_rows[step], e, keeps, t.model_config
        )

    def update(self, trainable, opt_state, grads):
        """``(new_trainable, new_opt_state, delta)``: the trainer's ``update``, jitted
        (the trainer's optimizer is ``make_optimizer(trainer.config)``)."""
        return _updaters(self.trainer.config)[0](trainable, opt_state, grads)

    def update_many(self, trainable, opt_state, stacked_grads):
        """The new parameters of K updates from the same state, stacked ``[K, ...]``."""
        return _updaters(self.trainer.config)[1](trainable, opt_state, stacked_grads)

    def probe_pass(self, trainable, delta, idx=None) -> dict:
        """Every per-token quantity at θ along Δθ, ``[B, N]`` numpy arrays, over
        every row (``idx`` None) or the rows ``idx`` (NaN on the others)."""
        t = self.trainer
        n = t.batch.sampled.shape[1]
        out: dict = {}
        for c, r in self._sets(idx):
            o = _probe_pass(
                trainable, delta, t.head_params, r, t.model_config, self.topk
            )
            for k, v in o.items():
                out.setdefault(k, np.full((self.b, n), np.nan))[c] = np.asarray(v)[
                    : len(c)
                ]
        return out

    def divergences(self, trainables, idx=None) -> np.ndarray:
        """``[K, B, N]`` D at each parameter set, of the whole batch (``idx`` None)
        or of the rows ``idx`` (NaN on the others)."""
        t = self.trainer
        stacked = _stack(trainables)
        n = t.batch.sampled.shape[1]
        full = np.full((len(trainables), self.b, n), np.nan)
        for c, r in self._sets(idx):
            d = _divergences(stacked, t.head_params, r, t.model_config)
            full[:, c] = np.asarray(d)[:, : len(c)]
        return full

    def minibatch_divergences(self, stacked, step: int) -> np.ndarray:
        """``[K, b, N]`` D of minibatch ``step``'s rows at K stacked parameter sets."""
        t = self.trainer
        d = _divergences(stacked, t.head_params, self.mb_rows[step], t.model_config)
        return np.asarray(d)


def first_of(stacked):
    """The first of K stacked pytrees."""
    return jax.tree_util.tree_map(lambda x: x[0], stacked)


def update_norm(delta) -> float:
    """Global norm of an update."""
    return float(optax.tree.norm(delta))


def matched_controls(trainer, probe, *, delta: float = 0.0, seed: int = 0) -> dict:
    """:func:`theorycheck.probes._matched.matched_controls` on the fast path: the same
    schedule, keep-masks (the same random draws in the same order) and scores.

    At every step the unmasked gradient and the three controls' gradients come from
    one forward of the minibatch and one pullback of the frozen head
    (:func:`_grads_frozen_head`, K = 4 keep-masks), the three controls' updates are
    one vmapped program and their D after the step one vmapped forward of the
    minibatch rows (at a step where no control removes a token, each control's D
    after the step is the probe's unmasked one); the unmasked trajectory is retraced
    (its update norms compared with the probe's, ``max_rel_update_norm_gap``).

    Returns:
        ``{control: {"masked_share", "kept_mean_d_after", "kept_mean_change",
        "unsafe_keep"}, "max_rel_update_norm_gap": float}``.
    """
    from theorycheck.probes._mask import coupled_mask
    from theorycheck.probes._matched import CONTROLS, _score, matched_keeps
    from theorycheck.probes._metrics import outside

    fp = FastProbe(trainer, topk=1)
    rng = np.random.default_rng(seed)
    records: dict = {k: [] for k in CONTROLS}
    gap = 0.0
    count = iter(range(len(probe["steps"])))

    def grad_fn(trainable, step, rows):
        """Step t's keep-masks (the same draws in the same order) and the unmasked
        and the controls' gradients from one call; the value carries them."""
        t = next(count)
        rec = probe["steps"][t]
        sub = {k: rec[k][rows] for k in ("adv", "d0", "ratio", "ddot_full", "ntk2")}
        if "masks" in rec:
            ckeep = rec["masks"]["coupled"]["keep"]
        else:
            ckeep = coupled_mask(sub["d0"], sub["ntk2"], sub["adv"], delta=delta)
        keeps = matched_keeps(sub, ckeep, delta, rng)
        ones = np.ones_like(sub["d0"])
        moved = not all(np.all(keeps[k] == 1.0) for k in CONTROLS)
        stack = np.stack([ones] + [keeps[k] for k in CONTROLS]) if moved else ones[None]
        _, grads, _ = fp.grads(trainable, step, stack)
        return (t, sub, keeps, moved, grads), first_of(grads)

    for s in trainer.steps(grad_fn=grad_fn, update_fn=fp.update):
        t, sub, keeps, moved, grads = s.value
        if moved:
            rest = jax.tree_util.tree_map(lambda x: x[1:], grads)
            news = fp.update_many(s.trainable, s.opt_state, rest)
            afters = fp.minibatch_divergences(news, s.step)
        else:
            # no control removes a token: each is the unmasked update (the probe's)
            afters = [probe["trajectory"][t + 1][s.rows]] * len(CONTROLS)
        for i, name in enumerate(CONTROLS):
            records[name].append(
                {
                    "live": sub["adv"] != 0,
                    "keep": keeps[name] > 0,
                    "d0": sub["d0"],
                    "out": outside(sub["d0"], delta),
                    "after": afters[i],
                }
            )
        want = probe["update_norms"][t]
        got = update_norm(s.delta)
        gap = max(gap, abs(got - want) / want if want else abs(got))
    out = {k: _score(v) for k, v in records.items()}
    out["max_rel_update_norm_gap"] = gap
    return out

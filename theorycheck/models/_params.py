"""Parameter pytree helpers: split into trainable and frozen parts, merge, cast, count.

The probes differentiate through the last blocks only. :func:`split_params` cuts the
stacked block arrays along the layer axis; :func:`merge_params` glues them back, and
:func:`logits_from_hidden` runs the trainable top on a frozen trunk's output computed
once by :func:`~theorycheck.models.hidden_states` (exact, and much cheaper per step).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
from jax import Array
from jaxtyping import Float, Int

from theorycheck._errors import BadInput
from theorycheck.models._config import ModelConfig
from theorycheck.models._families import FAMILIES
from theorycheck.models._transformer import (
    Params,
    continue_prefixes,
    final_norm,
    head,
    positions_and_mask,
    run_blocks,
)


def init_params(
    config: ModelConfig, *, key: Array, dtype=jnp.float32, scale: float = 0.02
) -> Params:
    r"""Random parameters for a synthetic model (tests, ``--tiny`` experiments).

    Matrices and embeddings are :math:`\mathcal N(0, \text{scale}^2)`, norm gains 1,
    biases 0 (the GPT-2 initialisation of Radford et al. 2019, without its depth
    scaling); the family says which key is which (Gemma stores its gains as offsets
    from 1, so their arrays are 0).

    Args:
        config: the model to build.
        key: PRNG key.
        dtype: parameter dtype.
        scale: standard deviation of the random weights.

    Returns:
        The parameter pytree ``forward`` expects.

    Examples:
        >>> import jax.random as jr
        >>> from theorycheck.models import Family
        >>> cfg = ModelConfig(family=Family.LLAMA, vocab_size=11, hidden_size=8,
        ...                   num_layers=2, num_heads=2, num_kv_heads=1, head_dim=4,
        ...                   intermediate_size=16)
        >>> params = init_params(cfg, key=jr.key(0))
        >>> params["blocks"]["wq"].shape
        (2, 8, 8)
    """
    family = FAMILIES[config.family]
    shapes = family.shapes(config)
    flat = {
        **shapes["top"],
        **{("blocks", k): (config.num_layers, *v) for k, v in shapes["block"].items()},
    }
    keys = dict(zip(flat, jr.split(key, len(flat))))
    params: dict = {"blocks": {}}
    for name, shape in flat.items():
        short = name[1] if isinstance(name, tuple) else name
        kind = family.init_value(short)
        if kind == "ones":
            value = jnp.ones(shape, dtype)
        elif kind == "zeros":
            value = jnp.zeros(shape, dtype)
        else:
            value = scale * jr.normal(keys[name], shape, dtype)
        if isinstance(name, tuple):
            params["blocks"][short] = value
        else:
            params[short] = value
    return params


def split_params(
    params: Params,
    config: ModelConfig,
    num_trainable_blocks: int,
    *,
    train_head: bool = False,
) -> tuple[Params, Params]:
    """Splits parameters into the trainable top and the frozen rest.

    The trainable part is the last ``num_trainable_blocks`` blocks and the final norm,
    plus the untied ``lm_head`` when ``train_head``. A tied head (``embed`` shared with
    the input embedding) always stays frozen, so the frozen trunk's output is exact.

    Args:
        params: the full parameter pytree.
        config: its :class:`ModelConfig`.
        num_trainable_blocks: n in ``[0, L]``.
        train_head: also train an untied ``lm_head``.

    Returns:
        ``(trainable, frozen)``; ``merge_params(trainable, frozen)`` gives ``params``.
    """
    n_layers = config.num_layers
    if not 0 <= num_trainable_blocks <= n_layers:
        raise BadInput(
            f"num_trainable_blocks = {num_trainable_blocks} is outside [0, {n_layers}]"
        )
    if train_head and config.tie_embeddings:
        raise BadInput(
            "train_head=True needs an untied lm_head; this model ties it to embed"
        )
    cut = n_layers - num_trainable_blocks
    blocks = params["blocks"]
    trainable = {"blocks": jax.tree_util.tree_map(lambda a: a[cut:], blocks)}
    frozen = {"blocks": jax.tree_util.tree_map(lambda a: a[:cut], blocks)}
    top = FAMILIES[config.family].top_keys + (("lm_head",) if train_head else ())
    for key, value in params.items():
        if key != "blocks":
            (trainable if key in top else frozen)[key] = value
    return trainable, frozen


def merge_params(trainable: Params, frozen: Params) -> Params:
    """Inverse of :func:`split_params`: frozen blocks first, then the trainable ones.

    Args:
        trainable: the top part.
        frozen: the rest.

    Returns:
        The full parameter pytree.
    """
    merged = {**frozen, **{k: v for k, v in trainable.items() if k != "blocks"}}
    merged["blocks"] = jax.tree_util.tree_map(
        lambda a, b: jnp.concatenate([a, b], axis=0),
        frozen["blocks"],
        trainable["blocks"],
    )
    return merged


@functools.partial(jax.jit, static_argnames=("config", "rows"))
def logits_from_hidden(
    trainable: Params,
    frozen: Params,
    config: ModelConfig,
    hidden: Float[Array, "batch seq D"],
    attention_mask: Int[Array, "batch seq"] | None = None,
    rows: tuple[int, int] | None = None,
) -> Float[Array, "batch rows V"]:
    """Logits from the frozen trunk's residual stream through the trainable top.

    Equals ``forward(merge_params(trainable, frozen), ...)`` when ``hidden`` is
    ``hidden_states(params, config, tokens, num_blocks=L - n)``.

    Args:
        trainable: from :func:`split_params` (its ``blocks`` are run here).
        frozen: from :func:`split_params` (only its head weights are read).
        config: the model's config.
        hidden: ``[batch, seq, D]`` after the frozen blocks.
        attention_mask: the same padding mask the trunk used.
        rows: ``(start, stop)``: only these positions go through the head (the
            response rows of an RL batch; the head dominates the cost at large V).

    Returns:
        ``[batch, seq, V]`` logits, or ``[batch, stop - start, V]`` with ``rows``.
    """
    b, s, _ = hidden.shape
    positions, mask = positions_and_mask(attention_mask, b, s)
    x, _ = run_blocks(trainable["blocks"], config, hidden, positions, mask)
    if rows is not None:
        x = x[:, rows[0] : rows[1]]
    return head({**frozen, **trainable}, config, x)


def logits_from_prefix(
    trainable: Params,
    frozen: Params,
    config: ModelConfig,
    prefix_hidden: Float[Array, "groups prefix D"],
    prefix_mask: Int[Array, "groups prefix"],
    hidden: Float[Array, "batch rows D"],
    group: Int[Array, " batch"],
    *,
    features: bool = False,
) -> Float[Array, "batch rows V"]:
    r"""Logits of rows that continue shared prefixes, through the trainable top.

    Row b is the sequence ``prefix[group[b]] + rows[b]``: the prefix (the first
    ``prefix`` positions, left-padded with ``prefix_mask``) is common to every row of
    its group, as a prompt is to the G samples of a GRPO group. Causal attention makes
    the prefix's activations independent of what follows, so the top blocks run over
    each distinct prefix once (its keys and values kept, as a KV cache does in
    generation) and then over the ``rows`` positions of every row, which attend to
    their group's prefix and causally to themselves:

    .. math:: z_{b,t} = \mathrm{top}\big(h_{\text{prefix}[g_b]} \,\Vert\,
              h_{b,\le t}\big)_t

    The same function as :func:`logits_from_hidden` on the full sequences (to float
    rounding: sums over the same keys in another order), at a fraction of the cost
    when prefixes are long and shared (a prompt of P tokens and G samples: G-fold
    fewer prefix positions).

    Args:
        trainable: from :func:`split_params`.
        frozen: from :func:`split_params` (only its head weights are read).
        config: the model's config.
        prefix_hidden: ``[groups, prefix, D]`` the trunk's residual stream of each
            distinct prefix.
        prefix_mask: ``[groups, prefix]`` 1 for real prefix tokens (left padding 0).
        hidden: ``[batch, rows, D]`` the trunk's residual stream of the positions
            after the prefix (every one a real token).
        group: ``[batch]`` the prefix of each row.
        features: return the head's input instead (``[batch, rows, D]``, after the
            final norm; the logits are it times the head matrix).

    Returns:
        ``[batch, rows, V]`` logits.
    """
    _, x = continue_prefixes(
        trainable["blocks"], config, prefix_hidden, prefix_mask, hidden, group
    )
    if features:
        return final_norm({**frozen, **trainable}, config, x)
    return head({**frozen, **trainable}, config, x)


def partition_params(
    params: Params, select: Callable[[str], bool]
) -> tuple[Params, Params]:
    """Splits any subset of parameter arrays from the rest, by path.

    Paths are ``"embed"``, ``"final_norm"``, ``"blocks/wq"``, ... (whole stacked arrays;
    use :func:`split_params` to cut along the layer axis). Differentiate in the first
    part and pass the second as a jit argument too (closed-over weights are
    constant-folded by XLA).

    Args:
        params: a parameter pytree (nested dicts of arrays).
        select: path -> True for the arrays to take.

    Returns:
        ``(selected, rest)``, nested dicts without empty branches;
        ``combine_params(selected, rest)`` gives ``params`` back.

    Examples:
        >>> sel, rest = partition_params({"a": 1, "b": {"c": 2, "d": 3}},
        ...                              lambda path: path.endswith("c"))
        >>> sel, rest
        ({'b': {'c': 2}}, {'a': 1, 'b': {'d': 3}})
    """
    selected: dict = {}
    rest: dict = {}
    for key, value in params.items():
        if isinstance(value, dict):
            sub_sel, sub_rest = partition_params(
                value, lambda path, key=key: select(f"{key}/{path}")
            )
            if sub_sel:
                selected[key] = sub_sel
            if sub_rest:
                rest[key] = sub_rest
        else:
            (selected if select(key) else rest)[key] = value
    return selected, rest


def combine_params(selected: Params, rest: Params) -> Params:
    """Inverse of :func:`partition_params` (a recursive union of the two dicts).

    Args:
        selected: the first part.
        rest: the second part.

    Returns:
        The full parameter pytree.
    """
    out = dict(rest)
    for key, value in selected.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = combine_params(value, out[key])
        else:
            out[key] = value
    return out


def cast_params(params: Params, dtype) -> Params:
    """Casts every floating array to ``dtype`` (e.g. ``jnp.bfloat16``).

    Args:
        params: a parameter pytree.
        dtype: the target floating dtype.

    Returns:
        The same pytree with floating leaves cast.
    """
    return jax.tree_util.tree_map(
        lambda a: a.astype(dtype) if jnp.issubdtype(a.dtype, jnp.floating) else a,
        params,
    )


def count_params(params: Params) -> int:
    """Total number of scalars in the pytree.

    Args:
        params: a parameter pytree.

    Returns:
        The sum of the leaves' sizes.
    """
    return int(sum(np.prod(a.shape) for a in jax.tree_util.tree_leaves(params)))

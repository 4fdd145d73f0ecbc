"""split_params, merge_params, logits_from_hidden: the trunk shortcut is exact."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests.models._checkpoints import token_batch
from theorycheck import BadInput
from theorycheck.models import (
    count_params,
    forward,
    hidden_states,
    load_hf,
    logits_from_hidden,
    merge_params,
    split_params,
)
from theorycheck.testing import assert_close


@pytest.mark.parametrize("kind,n", [("llama", 1), ("qwen2", 3), ("gpt2", 0)])
def test_split_params_round_trips_and_trunk_shortcut_is_exact(tiny_dirs, kind, n):
    cfg, params, _ = load_hf(tiny_dirs[kind][0], dtype=np.float64)
    trainable, frozen = split_params(params, cfg, n)
    assert count_params(trainable) + count_params(frozen) == count_params(params)
    merged = merge_params(trainable, frozen)
    jax.tree_util.tree_map(np.testing.assert_array_equal, merged, params)
    ids = token_batch(cfg.vocab_size, 2, 7, seed=14)
    hidden = hidden_states(params, cfg, ids, num_blocks=cfg.num_layers - n)
    assert_close(
        logits_from_hidden(trainable, frozen, cfg, hidden), forward(params, cfg, ids)
    )


def test_split_params_gradient_through_trunk_shortcut_matches_full(tiny_dirs):
    cfg, params, _ = load_hf(tiny_dirs["qwen3"][0], dtype=np.float64)
    trainable, frozen = split_params(params, cfg, 2, train_head=True)
    assert "lm_head" in trainable and "embed" in frozen
    ids = token_batch(cfg.vocab_size, 1, 6, seed=15)
    hidden = hidden_states(params, cfg, ids, num_blocks=cfg.num_layers - 2)

    def via_full(t, f):
        return jnp.sum(
            jax.nn.log_softmax(forward(merge_params(t, f), cfg, ids))[0, :, 3]
        )

    def via_trunk(t, f, h):
        return jnp.sum(jax.nn.log_softmax(logits_from_hidden(t, f, cfg, h))[0, :, 3])

    g_full = jax.jit(jax.grad(via_full))(trainable, frozen)
    g_trunk = jax.jit(jax.grad(via_trunk))(trainable, frozen, hidden)
    jax.tree_util.tree_map(assert_close, g_trunk, g_full)


def test_split_params_refuses_bad_counts(tiny_dirs):
    cfg, params, _ = load_hf(tiny_dirs["llama"][0])
    with pytest.raises(BadInput, match="num_trainable_blocks = 4 is outside"):
        split_params(params, cfg, 4)
    with pytest.raises(BadInput, match="ties it"):
        split_params(params, cfg, 1, train_head=True)


@pytest.mark.parametrize("kind", ["qwen3", "gpt2"])
def test_init_params_has_the_loaders_structure(tiny_dirs, kind):
    import jax.random as jr

    from theorycheck.models import init_params

    cfg, loaded, _ = load_hf(tiny_dirs[kind][0])
    fresh = init_params(cfg, key=jr.key(0))
    shapes = lambda tree: jax.tree_util.tree_map(lambda a: a.shape, tree)
    assert shapes(fresh) == shapes(loaded)
    assert float(jnp.std(fresh["embed"])) == pytest.approx(0.02, rel=0.05)
    norm = "final_norm"
    np.testing.assert_array_equal(fresh[norm], np.ones(cfg.hidden_size, np.float32))


def test_partition_params_jvp_in_a_subset_equals_zero_padded_full_jvp(tiny_dirs):
    from theorycheck.models import combine_params, partition_params

    cfg, params, _ = load_hf(tiny_dirs["qwen3"][0], dtype=np.float64)
    picked = {"blocks/q_norm", "blocks/k_norm", "final_norm"}
    sel, rest = partition_params(params, lambda path: path in picked)
    assert set(sel) == {"blocks", "final_norm"} and set(sel["blocks"]) == {
        "q_norm",
        "k_norm",
    }
    jax.tree_util.tree_map(
        np.testing.assert_array_equal, combine_params(sel, rest), params
    )
    ids = token_batch(cfg.vocab_size, 1, 5, seed=16)
    rng = np.random.default_rng(2)
    t_sel = jax.tree_util.tree_map(
        lambda a: jnp.asarray(rng.standard_normal(a.shape), a.dtype), sel
    )
    f_sub = lambda s, r: forward(combine_params(s, r), cfg, ids)
    _, jvp_sub = jax.jit(lambda s, r, t: jax.jvp(lambda q: f_sub(q, r), (s,), (t,)))(
        sel, rest, t_sel
    )
    t_full = combine_params(t_sel, jax.tree_util.tree_map(jnp.zeros_like, rest))
    _, jvp_full = jax.jit(
        lambda p, t: jax.jvp(lambda q: forward(q, cfg, ids), (p,), (t,))
    )(params, t_full)
    assert_close(jvp_sub, jvp_full)
    assert float(jnp.max(jnp.abs(jvp_sub))) > 1e-3  # the subset does move the logits

"""Reduction weights: the survey's J_token / J_seq / J_prompt, framework variants, and
the fact that equal reduction weights do not give equal gradient norms."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from theorycheck._errors import BadInput
from theorycheck.losses import Reduction, reduction_weights, sequence_gradient_norms
from theorycheck.testing import assert_close

MASK = np.array(
    [[1, 1, 1, 0], [1, 0, 0, 0], [0, 0, 0, 0], [1, 1, 1, 1]], dtype=np.float64
)
PROMPTS = np.array([0, 0, 1, 1])


def _loss(j, reduction):
    w = reduction_weights(MASK, reduction, group_ids=PROMPTS, num_groups=2)
    return float(jnp.sum(w * j))


def test_reduction_weights_match_survey_formulas():
    j = np.random.default_rng(0).normal(size=MASK.shape) * MASK
    lengths = MASK.sum(1)
    # J_token = sum j / sum L
    assert _loss(j, Reduction("token_mean")) == pytest.approx(j.sum() / lengths.sum())
    # J_seq over non-empty responses (verl) and over all rows (SkyRL / TRL / Miles)
    seq = j.sum(1)[lengths > 0] / lengths[lengths > 0]
    assert _loss(j, Reduction("seq_mean_token_mean")) == pytest.approx(seq.mean())
    assert _loss(j, Reduction("seq_mean_token_mean", count_empty=True)) == (
        pytest.approx(seq.sum() / 4)
    )
    # J_prompt = 1/B sum_i (sum_{g,t} j) / (sum_g L)
    prompt = [j[PROMPTS == i].sum() / lengths[PROMPTS == i].sum() for i in (0, 1)]
    assert _loss(j, Reduction("prompt_mean")) == pytest.approx(np.mean(prompt))
    # Dr. GRPO: sum / (N * L_max); verl: sum / L_max
    assert _loss(j, Reduction("seq_mean_token_sum_norm", max_len=8)) == (
        pytest.approx(j.sum() / (3 * 8))
    )
    assert _loss(
        j, Reduction("seq_mean_token_sum_norm", max_len=8, divide_by_sequences=False)
    ) == pytest.approx(j.sum() / 8)
    assert _loss(j, Reduction("seq_mean_token_sum")) == pytest.approx(j.sum() / 3)


def test_reduction_weights_micro_batches_average_local_means():
    mask = np.array(
        [[1, 1, 1, 0], [1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 1]], dtype=np.float64
    )
    j = np.random.default_rng(1).normal(size=mask.shape) * mask
    local = [j[:2].sum() / mask[:2].sum(), j[2:].sum() / mask[2:].sum()]
    w = reduction_weights(mask, Reduction("token_mean", micro_batch_size=2))
    got = float(jnp.sum(w * j))
    assert got == pytest.approx(np.mean(local))
    assert got != pytest.approx(j.sum() / mask.sum())


def test_reduction_weights_are_zero_on_padding():
    for mode in ("token_mean", "seq_mean_token_mean", "prompt_mean", "sample_mean"):
        w = np.asarray(
            reduction_weights(MASK, Reduction(mode), group_ids=PROMPTS, num_groups=2)
        )
        assert np.all(w[MASK == 0] == 0) and np.all(np.isfinite(w))


def test_reduction_rejects_unknown_mode():
    with pytest.raises(BadInput, match="'seq_mean'"):
        Reduction("seq_mean")


def test_sequence_gradient_norms_differ_under_equal_sequence_weights():
    # A shared linear softmax policy: logits_t = W x_t,
    # grad_W log pi_k = (e_k - pi) x_t^T.
    rng = np.random.default_rng(0)
    vocab, dim, lengths = 16, 8, (2, 8, 32)
    width = max(lengths)
    w_mat = rng.normal(size=(vocab, dim))
    x = rng.normal(size=(len(lengths), width, dim))
    sampled = rng.integers(0, vocab, size=(len(lengths), width))
    mask = (np.arange(width)[None] < np.array(lengths)[:, None]).astype(np.float64)

    def token_grad(x_t, k):
        return jax.grad(lambda w: jax.nn.log_softmax(w @ x_t)[k])(jnp.asarray(w_mat))

    grads = jax.jit(jax.vmap(jax.vmap(token_grad)))(
        jnp.asarray(x), jnp.asarray(sampled)
    )
    grads = grads.reshape(len(lengths), width, -1)
    weights = reduction_weights(mask, Reduction("seq_mean_token_mean"))
    assert_close(jnp.sum(weights, axis=1), np.full(3, 1.0 / 3.0))  # equal weights
    norms = np.asarray(sequence_gradient_norms(grads, weights))

    # Second route: the norm of the gradient of the weighted sum of log-probs.
    def seq_objective(w, s):
        lp = jax.nn.log_softmax(jnp.einsum("vd,td->tv", w, x[s]), axis=-1)
        return jnp.sum(weights[s] * lp[jnp.arange(width), sampled[s]])

    direct = [
        float(jnp.linalg.norm(jax.grad(seq_objective)(jnp.asarray(w_mat), s)))
        for s in range(3)
    ]
    assert_close(norms, direct)
    assert norms[0] > 1.5 * norms[2]  # the 2-token response dominates the 32-token one

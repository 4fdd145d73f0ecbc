"""The translation and its gate, in-process (no verdict needed): what the gate
accepts, what it refuses and that it catches a translation that ignores detach,
no_grad and .item() (torchax's behaviour)."""

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from theorycheck._errors import BadInput

torch = pytest.importorskip("torch")

from theorycheck import torchfront  # noqa: E402
from theorycheck.torchfront import _gate  # noqa: E402

CORPUS = Path(__file__).with_name("corpus.py")
V = 4


def _mu(q=0.3):
    mu = np.full(V, (1 - q) / (V - 1))
    mu[0] = q
    return np.log(mu)


def _call(func, naive=False, **inputs):
    loss = torchfront.load(CORPUS, func, naive=naive)
    inputs = {k: v for k, v in inputs.items() if k in loss.accepts}
    z = jnp.asarray([0.3, -0.2, 0.1, 0.5])
    with jax.enable_x64(True):
        value, grad = jax.value_and_grad(lambda x: loss.loss(x, 0, **inputs))(z)
    return loss, float(value), np.asarray(grad)


@pytest.mark.parametrize(
    "func", ["cispo_verl[verl]", "cispo_detach_verl[verl]", "item_weight_verl[verl]"]
)
def test_frozen_weights_translate_to_stop_gradient(func):
    """detach, no_grad and .item() are constants for torch autograd; the
    translation's gradient is the registry's CISPO gradient: -A w (e_k - pi)."""
    _, value, grad = _call(func, adv=1.0, behavior_logp=_mu())
    z = np.array([0.3, -0.2, 0.1, 0.5])
    pi = np.exp(z - np.log(np.sum(np.exp(z))))
    w = np.clip(pi[0] / 0.3, 0.5, 5.0)
    assert value == pytest.approx(-w * np.log(pi[0]), rel=1e-12)
    np.testing.assert_allclose(grad, -w * (np.eye(V)[0] - pi), rtol=1e-12)


@pytest.mark.parametrize(
    "func,construct",
    [
        ("cispo_verl[verl]", "torch.no_grad()"),
        ("cispo_detach_verl[verl]", "detach"),
        ("item_weight_verl[verl]", ".item()"),
    ],
)
def test_gate_catches_a_translation_that_ignores_them(func, construct):
    """A naive translation (detach = identity, no_grad not translated, as torchax
    does) computes a wrong gradient silently; the gate refuses it, naming the
    construct, before anything uses it."""
    with pytest.raises(BadInput, match="refused by the gate") as err:
        _call(func, naive=True, adv=1.0, behavior_logp=_mu())
    assert construct in str(err.value) and "\n" not in str(err.value)


def test_metrics_with_item_are_dropped():
    loss, value, _ = _call("ppo_verl[verl]", adv=1.0, behavior_logp=_mu())
    assert loss.form == "verl" and np.isfinite(value)
    assert "equal torch autograd" in torchfront.gate_summary()


@pytest.mark.parametrize(
    "func,needle",
    [
        ("random_weight", "randomness (aten.rand)"),
        ("python_random", "changes between two calls"),
        ("in_place", "in-place update (aten.mul_)"),
        ("branches", "data-dependent Python control flow"),
        ("branches", "corpus.py:"),
        ("vector", "shape (4,), not a scalar"),
        ("half", "torch.bfloat16"),
        ("float16", "torch.float16"),
        ("no_loss_tuple", "first element is dict"),
        ("on_meta", "device meta"),
    ],
)
def test_refusals_are_one_line_naming_the_construct(func, needle):
    with pytest.raises(BadInput) as err:
        _call(func, adv=1.0)
    text = str(err.value)
    assert needle in text and "\n" not in text, text


def test_the_gate_probes_both_sides_of_every_clip_boundary():
    """PPO's window [0.8, 1.2] and the +-20 guard: the gate's lines cross each
    boundary and test both sides (at least 2 per line for the window)."""
    _gate.clear_reports()
    _call("ppo_verl[verl]", adv=1.0, behavior_logp=_mu())
    (report,) = _gate.reports()
    assert report.boundaries >= 8 * 2 and report.points > 8 * len(_gate.SWEEP)


def test_signature_forms_are_checked():
    with pytest.raises(BadInput, match="neither|fn\\(logits, sampled"):
        torchfront.load(CORPUS, "neither")
    with pytest.raises(BadInput, match="pass --signature verl"):
        torchfront.load(CORPUS, "verl_named")
    with pytest.raises(BadInput, match="needs verl's policy-loss signature"):
        torchfront.load(CORPUS, "cross_entropy[verl]")
    with pytest.raises(BadInput, match="config.my_new_knob"):
        torchfront.load(CORPUS, "unknown_config[verl]")
    with pytest.raises(BadInput, match="unknown parameter 'bta'"):
        torchfront.load(CORPUS, "ppo_verl[verl;bta=2.0]")


def test_spec_suffix_round_trip():
    spec, rest = torchfront.command_spec(
        str(CORPUS) + ":ppo_verl", "verl", {"adv": -1.0, "clip_ratio_high": 0.28}
    )
    assert spec.endswith(":ppo_verl[verl;clip_ratio_high=0.28]") and rest == {
        "adv": -1.0
    }
    assert torchfront.split_function("ppo_verl[verl;clip_ratio_high=0.28]") == (
        "ppo_verl",
        "verl",
        {"clip_ratio_high": 0.28},
    )


def test_torch_ties_at_the_clip_boundary_give_the_strict_coefficient():
    """docs/losses.md reads PyTorch's source: at r = 1 + eps exactly, maximum splits
    the gradient 1/2 : 1/2 and clamp passes 1 at its bound, so dL/dr = -A (c = r A).
    Executed here with the CPU build."""
    for adv in (1.0, 2.5):
        r = torch.tensor(1.2, dtype=torch.float64, requires_grad=True)
        a = torch.tensor(adv, dtype=torch.float64)
        loss = torch.maximum(-a * r, -a * torch.clamp(r, 0.8, 1.2))
        (grad,) = torch.autograd.grad(loss, r)
        assert float(grad) == -adv


def test_a_default_dtype_constant_is_float64_everywhere():
    _, value, _ = _call("default_dtype_constant", adv=1.0)
    z = np.array([0.3, -0.2, 0.1, 0.5])
    logp = z[0] - np.log(np.sum(np.exp(z)))
    assert value == pytest.approx(-0.2 * logp, rel=1e-14)


def test_inputs_the_loss_ignores_keep_their_places_and_it_pickles():
    import pickle

    loss, value, grad = _call("unused_mask_verl[verl]", adv=2.0, behavior_logp=_mu())
    z = np.array([0.3, -0.2, 0.1, 0.5])
    pi = np.exp(z - np.log(np.sum(np.exp(z))))
    assert value == pytest.approx(-2.0 * np.log(pi[0]), rel=1e-13)
    program = pickle.loads(pickle.dumps(_gate.reports()[-1]))
    assert program.points > 0


def test_a_worker_process_runs_the_parents_program_without_torch():
    """The structure stage's worker resolves the SPEC again: it reads the program
    the parent translated and gated, and never imports torch."""
    import multiprocessing

    from tests.torchfront._worker import value_in_worker

    path = Path(__file__).parents[2] / "examples/losses/torch/verl_dual_clip.py"
    loss = torchfront.load(path, "loss[verl]")
    mu = np.log([0.5, 0.25, 0.25])
    with jax.enable_x64(True):
        here = float(loss.loss(np.zeros(3), 0, adv=-1.0, behavior_logp=mu))
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=value_in_worker, args=(str(path), "loss[verl]", queue))
    proc.start()
    imported, there = queue.get(timeout=300)
    proc.join()
    torchfront.clear_cache()
    assert not imported and there == here

"""Operations of trainers' losses that the translation covers (F.nll_loss,
torch.cumsum, F.logsigmoid, F.elu, label smoothing, ``&``/``|`` on masks and an
in-place write on a mask the code made): the translation's value and gradient equal
torch's own, and its gate passes; a write through a view stays refused."""

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from theorycheck._errors import BadInput

torch = pytest.importorskip("torch")

from theorycheck import torchfront  # noqa: E402
from theorycheck.torchfront import _gate  # noqa: E402

CORPUS = Path(__file__).with_name("ops_corpus.py")
Z = [0.3, -0.2, 0.1, 0.5]


def _torch(fn, adv):
    z = torch.tensor(Z, dtype=torch.float64, requires_grad=True)
    out = fn(z, 0, torch.tensor(adv, dtype=torch.float64))
    (grad,) = torch.autograd.grad(out, z)
    return float(out.detach()), grad.numpy()


@pytest.mark.parametrize(
    "func",
    ["nll", "cumsum", "logsigmoid", "elu", "smoothed_ce", "masked_in_place"],
)
@pytest.mark.parametrize("adv", [1.0, -0.5])
def test_translation_equals_torch(func, adv):
    loss = torchfront.load(CORPUS, func)
    before = len(_gate.reports())
    with jax.enable_x64(True):
        value, grad = jax.value_and_grad(lambda x: loss.loss(x, 0, adv=adv))(
            jnp.asarray(Z)
        )
    want_value, want_grad = _torch(loss.torch_fn, adv)
    assert float(value) == pytest.approx(want_value, rel=1e-12, abs=1e-14)
    np.testing.assert_allclose(np.asarray(grad), want_grad, rtol=1e-11, atol=1e-14)
    assert len(_gate.reports()) >= before  # the gate ran (or the program was cached)


def test_a_write_through_a_view_is_refused():
    loss = torchfront.load(CORPUS, "view_then_write")
    with pytest.raises(BadInput, match="in-place update"):
        with jax.enable_x64(True):
            loss.loss(jnp.asarray(Z), 0, adv=1.0)

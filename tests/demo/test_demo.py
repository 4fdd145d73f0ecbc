"""The demo end to end on a tiny random checkpoint (`make demo` runs the real one)."""

import json

import numpy as np
import pytest

from tests.models._checkpoints import write_hf
from theorycheck.demo.__main__ import main

pytestmark = pytest.mark.slow


def _tiny_llama(directory) -> str:
    """A tiny random Llama whose context fits the demo's byte-level prompts."""
    write_hf(str(directory), "llama")
    cfg_path = directory / "config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["max_position_embeddings"] = 256
    cfg_path.write_text(json.dumps(cfg))
    return str(directory)


@pytest.fixture(scope="module")
def demo_out(tmp_path_factory):
    model_dir = _tiny_llama(tmp_path_factory.mktemp("tiny_llama"))
    out = tmp_path_factory.mktemp("demo")
    rc = main(
        [
            "--model",
            model_dir,
            "--out",
            str(out),
            "--samples",
            "2",
            "--new-tokens",
            "4",
            "--topk",
            "5",
        ]
    )
    assert rc == 0
    return out


def test_demo_writes_report_files(demo_out):
    for name in ("report.md", "report.json", "ddot_estimators.png", "divergences.png"):
        assert (demo_out / name).stat().st_size > 0


def test_demo_report_counts_and_ranges(demo_out):
    result = json.loads((demo_out / "report.json").read_text())
    assert result["summary"]["tokens"] == 4 * 2 * 4  # tasks x samples x new tokens
    for rows in result["sign_agreement"].values():
        for row in rows.values():
            assert 0.0 <= row["agreement"] <= 1.0
    for row in result["divergences"].values():
        assert 0.0 <= row["mean"] <= row["max"]


def test_demo_token_statistics_match_numpy_kl(tmp_path):
    # Second route: forward KL recomputed in plain numpy from the same rollouts.
    from theorycheck.demo._analysis import token_statistics
    from theorycheck.demo._rollout import collect
    from theorycheck.models import load_model

    rollouts = collect(
        load_model(_tiny_llama(tmp_path)),
        samples=1,
        new_tokens=3,
        topk=4,
        temperature=1.0,
        seed=1,
    )
    adv = np.ones(rollouts.tokens.size)
    stats = token_statistics(rollouts, adv, topk=4)
    v = rollouts.logits.shape[-1]
    z = rollouts.logits.reshape(-1, v).astype(np.float64)
    logpi = z - np.logaddexp.reduce(z, axis=1, keepdims=True)
    logmu = rollouts.behavior_logp.reshape(-1, v).astype(np.float64)
    kl = np.sum(np.exp(logmu) * (logmu - logpi), axis=1)
    np.testing.assert_allclose(stats["kl"], kl, rtol=1e-6, atol=1e-9)


def test_demo_batch_is_readable_by_audit(demo_out, capsys):
    from theorycheck.cli import main as cli

    assert (
        cli(["audit", str(demo_out / "batch.npz"), "--rules", "ppo,glm5", "--json"])
        == 0
    )
    report = json.loads(capsys.readouterr().out)
    assert report["tokens"] == 4 * 2 * 4

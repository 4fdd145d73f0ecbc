"""The rollout analysis (the main job's rollout section) end to end on the tiny model:
files, ranges, the KL recomputed in numpy, the batch read by ``theorycheck audit``,
the replay from the recorded rollouts."""

import json

import numpy as np
import pytest

from experiments import rollout_analysis
from tests.experiments._results import read as _read

ARGV = ["--tiny"]


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("rollouts") / "run"
    assert rollout_analysis.main([*ARGV, "--out", str(out)]) == 0
    return out


def test_tiny_run_writes_results_report_batch_and_figure(tiny_run):
    for name in (
        "results.json",
        "rollouts.npz",
        "report.md",
        "sign_agreement.png",
        "batch_seed0.npz",
    ):
        assert (tiny_run / name).stat().st_size > 0
    unit = _read(tiny_run / "results.json")["units"]["seed0"]
    assert unit["regime"] == "bf16_engine" and unit["seed"] == 0
    assert unit["tokens"] == 4 * 2 * 4  # prompts x samples x new tokens
    for rows in unit["sign_agreement"].values():
        for row in rows.values():
            assert row["agreement"] is None or 0.0 <= row["agreement"] <= 1.0
    for row in unit["divergences"].values():
        assert 0.0 <= row["mean"] <= row["max"]
    assert "regime `bf16_engine`" in (tiny_run / "report.md").read_text()


def test_token_statistics_match_numpy_kl(tiny_run):
    # Second route: the forward KL recomputed in plain numpy from the same batch.
    from theorycheck.rl import tiny_model

    cfg = rollout_analysis.Config.tiny()
    model = tiny_model()
    rollouts, _ = rollout_analysis.generate(
        type("Ctx", (), {"model": model, "cfg": cfg})(), 0, "bfloat16"
    )
    from theorycheck.rl import from_record, record

    rollouts = from_record(
        model, record(rollouts), engine_dtype="bfloat16", temperature=1.0
    )
    logits = rollout_analysis._trainer_logits(model, rollouts)
    adv = np.ones(rollouts.tokens.size)
    stats = rollout_analysis._stats(
        rollouts.behavior_logp,
        logits,
        rollouts.tokens,
        adv,
        topk=4,
        delta_kl=0.05,
        delta_tv=0.15,
    )
    v = logits.shape[-1]
    z = logits.reshape(-1, v)
    logpi = z - np.logaddexp.reduce(z, axis=1, keepdims=True)
    logmu = rollouts.behavior_logp.reshape(-1, v).astype(np.float64)
    kl = np.sum(np.exp(logmu) * (logmu - logpi), axis=1)
    np.testing.assert_allclose(stats["kl"], kl, rtol=1e-6, atol=1e-9)
    unit = _read(tiny_run / "results.json")["units"]["seed0"]
    assert unit["divergences"]["kl"]["mean"] == pytest.approx(kl.mean(), rel=1e-6)


def test_batch_is_readable_by_audit(tiny_run, capsys):
    from theorycheck.cli import main as cli

    argv = ["audit", str(tiny_run / "batch_seed0.npz"), "--rules", "ppo,glm5"]
    assert cli([*argv, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["tokens"] == 4 * 2 * 4


def test_replay_reproduces_the_run(tiny_run, capsys):
    assert rollout_analysis.main(["--replay", str(tiny_run)]) == 0
    assert "0 with numbers over 1e-06" in capsys.readouterr().out


def test_bad_prompt_count_exits_2(tmp_path, capsys):
    argv = [*ARGV, "--prompts", "9", "--out", str(tmp_path)]
    assert rollout_analysis.main(argv) == 2
    assert "prompts = 9" in capsys.readouterr().err

"""Writes the conventions tables of docs/losses.md from the presets in the code, and
the answers to the users' questions (each the real output of one command).

The block is the output of ``theorycheck conventions --batch-shape 2,2,8 --lengths
2,8,4,0 --micro-batch-size 2`` (the command's own renderer), headings moved two levels
down to sit inside the page.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import docgen  # noqa: E402

COMMAND = (
    "theorycheck conventions --batch-shape 2,2,8 --lengths 2,8,4,0 --micro-batch-size 2"
)


_B = "--batch-shape 2,2,8 --lengths 2,8,4,0"
_SYN = "examples/batches/synthetic.json"
_LONG = "examples/batches/long_mismatch.npz"
#: (question, command, (first line, last line) of the output kept; None = all).
#: a real batch: SmolLM2-135M capitals rollouts, bfloat16 engine vs float32 trainer
#: (experiments/rollout_analysis.py, provenance in its results.json).
_REAL = "experiments/results/rollout_analysis/batch_seed0.npz"
QUESTIONS = (
    (
        "verl #3741: does Dr. GRPO's scale depend on the micro-batch size?",
        f"conventions {_B} --micro-batch-size 1",
        ("### seq-mean-token-sum-norm", "| TRL dr_grpo"),
    ),
    (
        "verl #3741 (continued), micro-batches of 2 rows",
        f"conventions {_B} --micro-batch-size 2",
        ("### seq-mean-token-sum-norm", "| TRL dr_grpo"),
    ),
    (
        "verl #2776: token-mean vs seq-mean-token-mean",
        f"conventions {_B}",
        ("| prompt | response", "| 1 | 1 | 0"),
    ),
    (
        "verl #4852: a rejection mask and the denominator",
        "conventions --config examples/configs/verl_dr_grpo.yaml",
        ("## Traps", "- rollout_rs multiplies"),
    ),
    (
        "TRL #5619: DAPO and gradient accumulation",
        "conventions --config examples/configs/trl_cispo.yaml loss_type=dapo",
        ("## Traps", "- steps_per_generation"),
    ),
    (
        "TRL #3823: is GSPO's sequence loss weighted by length? (gspo, one position "
        "of a 8-token response)",
        "coefficient gspo --p 0.5 --q 0.5 --adv 1 --set length=8",
        None,
    ),
    (
        "TRL #3823 (continued): luspo multiplies by the length",
        "coefficient luspo --p 0.5 --q 0.5 --adv 1 --set length=8",
        None,
    ),
    (
        "TRL #4493 / #4530: token vs sequence TIS and MIS",
        f"audit {_LONG} --rules ppo --corrections "
        "tis_token,tis_sequence,mis_token,mis_sequence,icepop",
        ("Sequence ratios", "| icepop"),
    ),
    (
        "SkyRL #1665: geometric sequence masking",
        f"audit {_LONG} --rules ppo --corrections geo_mask_sequence,"
        "product_mask_sequence",
        ("Sequence ratios", "| product_mask_sequence"),
    ),
    (
        "Users (2026): sequence TIS on a real batch (SmolLM2-135M, bfloat16 engine vs "
        "float32 trainer, experiments/results/rollout_analysis seed 0)",
        f"audit {_REAL} --rules ppo --corrections '' --apply tis_sequence:cap=2 "
        "--reduction seq_mean_token_mean",
        ("Applied", None),
    ),
    (
        "Users (2026, continued): a geometric mask [0.99, 1.01] on the same batch",
        f"audit {_REAL} --rules ppo --corrections '' --apply "
        "geo_mask_sequence:low=0.99,high=1.01 --reduction seq_mean_token_mean",
        ("Applied", None),
    ),
    (
        "verl docs: IcePop with two rejection options, applied to the same batch",
        f"audit {_REAL} --rules ppo --corrections '' --config "
        "examples/configs/verl_icepop_multi_rs.yaml",
        ("Applied", None),
    ),
    (
        "TRL #6078: is GMPO's one-sided clip inverted? (log r = 0.59 > 0.4)",
        "coefficient gmpo --p 0.9 --q 0.5 --adv 1",
        None,
    ),
    (
        "TRL #6078 (continued): the same ratio with A < 0",
        "coefficient gmpo --p 0.9 --q 0.5 --adv -1",
        None,
    ),
)


def _run(command: str) -> str:
    import contextlib
    import io
    import shlex

    from theorycheck.cli import main

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = main(shlex.split(command))
    if rc != 0:
        raise SystemExit(f"{command}: exit {rc}")
    return buf.getvalue()


def _excerpt(text: str, span) -> str:
    lines = text.rstrip("\n").splitlines()
    if span is None:
        return "\n".join(lines)
    start = next(i for i, x in enumerate(lines) if x.startswith(span[0]))
    if span[1] is None:  # to the end of the output
        return "\n".join(lines[start:])
    end = next(i for i, x in enumerate(lines) if i >= start and x.startswith(span[1]))
    return "\n".join(lines[start : end + 1])


def questions_block() -> str:
    parts = []
    for question, command, span in QUESTIONS:
        out = _excerpt(_run(command), span)
        parts.append(f"**{question}**\n\n```\n$ theorycheck {command}\n{out}\n```")
    return "\n\n".join(parts)


def blocks() -> dict[tuple[str, str], str]:
    import jax

    from theorycheck.commands.conventions import render_markdown
    from theorycheck.losses import conventions_report

    jax.config.update("jax_enable_x64", True)
    report = conventions_report((2, 2, 8), [2, 8, 4, 0], micro_batch_size=2)
    text = re.sub(r"(?m)^#", "###", render_markdown(report))
    body = f"Generated from `{COMMAND}`:\n\n{text}"
    return {
        ("docs/losses.md", "conventions"): body,
        ("docs/losses.md", "questions"): questions_block(),
    }


if __name__ == "__main__":
    raise SystemExit(docgen.main(blocks))

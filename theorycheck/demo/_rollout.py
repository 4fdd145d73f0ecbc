"""The demo's rollouts: the capitals task through :func:`theorycheck.rl.collect`.

The rollout machinery lives in :mod:`theorycheck.rl`; this module keeps the demo's
fixed four prompts and its ``collect(model, tasks=..., ...)`` call.
"""

from __future__ import annotations

from theorycheck.rl import Problem, Rollouts
from theorycheck.rl import collect as _collect

__all__ = ["TASKS", "Rollouts", "collect"]

#: a small verifiable task: the continuation must name the capital.
TASKS = (
    (
        "The capital of France is Paris. The capital of Germany is Berlin. "
        "The capital of Italy is",
        "Rome",
    ),
    (
        "The capital of Spain is Madrid. The capital of Portugal is Lisbon. "
        "The capital of Japan is",
        "Tokyo",
    ),
    (
        "The capital of Egypt is Cairo. The capital of Kenya is Nairobi. "
        "The capital of Russia is",
        "Moscow",
    ),
    (
        "The capital of Canada is Ottawa. The capital of Brazil is Brasilia. "
        "The capital of Greece is",
        "Athens",
    ),
)


def collect(
    model,
    *,
    tasks=TASKS,
    samples: int,
    new_tokens: int,
    topk: int,
    temperature: float,
    seed: int,
) -> Rollouts:
    """Samples the demo's prompts in bfloat16 and recomputes them in float32.

    Args:
        model: a loaded :class:`theorycheck.models.Model` (float32 parameters).
        tasks: ``(prompt, answer)`` pairs; reward 1 iff the answer is in the response.
        samples: responses per prompt (the GRPO group size).
        new_tokens: tokens generated per response.
        topk: K, the number of top log-probs the rollout engine reports.
        temperature: sampling temperature.
        seed: PRNG seed.

    Returns:
        :class:`~theorycheck.rl.Rollouts` with the full vocabulary recorded.
    """
    problems = [
        Problem("capitals", p, a, lambda text, a=a: float(a in text)) for p, a in tasks
    ]
    return _collect(
        model,
        problems,
        samples=samples,
        new_tokens=new_tokens,
        topk=topk,
        temperature=temperature,
        seed=seed,
    )

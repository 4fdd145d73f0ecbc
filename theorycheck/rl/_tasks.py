r"""Verifiable tasks generated in code, with binary rewards.

* **countdown**: reach a target from a few numbers with ``+ - * /``, each number used
  at most once (the survey's arithmetic task). The response's first expression line is
  parsed (an AST whitelist: integers, ``+ - * /``, parentheses) and evaluated in exact
  rational arithmetic (:class:`fractions.Fraction`), so ``6/4*2 = 3`` exactly and no
  float rounding decides a reward.
* **addition**: ``a + b`` for small integers; the first integer in the response must be
  the sum.
* **capitals**: name a capital after two worked examples (the demo's task); reward 1
  iff the answer appears in the response.

Every task is a :class:`Problem` ``(prompt, reward_fn)``; prompts are few-shot so that
a small model solves some of them and GRPO groups carry a relative signal.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from collections import Counter
from collections.abc import Callable
from fractions import Fraction

import numpy as np

from theorycheck._errors import BadInput

#: the verifiable tasks of :func:`make_problems`.
TASKS = ("countdown", "addition", "capitals")


@dataclasses.dataclass(frozen=True)
class Problem:
    """One prompt and its verifier.

    Attributes:
        task: the task name (one of :data:`TASKS`).
        prompt: the text given to the model.
        answer: a reference answer (for reports; the verifier decides the reward).
        reward_fn: response text -> reward in {0.0, 1.0}.
    """

    task: str
    prompt: str
    answer: str
    reward_fn: Callable[[str], float] = dataclasses.field(repr=False)

    def reward(self, response: str) -> float:
        """The binary reward of ``response``."""
        return float(self.reward_fn(response))


_OPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/"}


def evaluate_expression(text: str) -> tuple[Fraction, list[int]] | None:
    """Exact value and the integer literals of an arithmetic expression, or None.

    Only integer literals, ``+ - * /``, unary minus and parentheses are accepted;
    anything else (names, calls, powers, floats) gives None, and so does a division by
    zero.

    Args:
        text: the expression.

    Returns:
        ``(value, literals)`` or None.

    Examples:
        >>> evaluate_expression("6 / 4 * 2")
        (Fraction(3, 1), [6, 4, 2])
        >>> evaluate_expression("2 ** 10") is None
        True
    """
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except (SyntaxError, ValueError):
        return None
    literals: list[int] = []

    def walk(node) -> Fraction:
        if isinstance(node, ast.Constant) and type(node.value) is int:
            literals.append(node.value)
            return Fraction(node.value)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -walk(node.operand)
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            left, right = walk(node.left), walk(node.right)
            if isinstance(node.op, ast.Add):
                return left + right
            if isinstance(node.op, ast.Sub):
                return left - right
            if isinstance(node.op, ast.Mult):
                return left * right
            if right == 0:
                raise ZeroDivisionError
            return left / right
        raise ValueError(f"unsupported node {type(node).__name__}")

    try:
        return walk(tree.body), literals
    except (ValueError, ZeroDivisionError, RecursionError):
        return None


def countdown_reward(response: str, numbers: tuple[int, ...], target: int) -> float:
    """1.0 iff the response's first line is an expression equal to ``target`` using
    each of ``numbers`` at most once (exact rational arithmetic).

    Examples:
        >>> countdown_reward(" 3 + 5\\nmore", (3, 5, 7), 8)
        1.0
        >>> countdown_reward("5 + 5", (3, 5, 7), 10)
        0.0
    """
    line = response.strip().split("\n", 1)[0] if response.strip() else ""
    line = line.split("=", 1)[0]
    parsed = evaluate_expression(line)
    if parsed is None:
        return 0.0
    value, literals = parsed
    if Counter(literals) - Counter(numbers):
        return 0.0
    return float(value == target)


def addition_reward(response: str, total: int) -> float:
    """1.0 iff the first integer in the response equals ``total``.

    Examples:
        >>> addition_reward(" 12. Next", 12), addition_reward("13", 12)
        (1.0, 0.0)
    """
    found = re.search(r"-?\d+", response)
    return float(found is not None and int(found.group()) == total)


_COUNTDOWN_SHOTS = (
    "Use the numbers to make the target.\n"
    "Numbers: 2 7 4. Target: 9. Answer: 2 + 7\n"
    "Numbers: 6 3 5. Target: 18. Answer: 6 * 3\n"
    "Numbers: 8 2 9. Target: 6. Answer: 8 - 2\n"
)
_ADDITION_SHOTS = "2 + 3 = 5\n7 + 1 = 8\n4 + 4 = 8\n"
_CAPITALS = (
    ("France", "Paris"),
    ("Germany", "Berlin"),
    ("Italy", "Rome"),
    ("Spain", "Madrid"),
    ("Japan", "Tokyo"),
    ("Russia", "Moscow"),
    ("Greece", "Athens"),
    ("Egypt", "Cairo"),
    ("Portugal", "Lisbon"),
    ("Kenya", "Nairobi"),
)


def _countdown(rng: np.random.Generator) -> Problem:
    numbers = tuple(int(x) for x in rng.integers(1, 10, size=3))
    a, b = numbers[0], numbers[1]
    target = a + b if rng.random() < 0.5 else a * b
    op = "+" if target == a + b else "*"
    prompt = (
        f"{_COUNTDOWN_SHOTS}Numbers: {' '.join(map(str, numbers))}. "
        f"Target: {target}. Answer:"
    )
    return Problem(
        "countdown",
        prompt,
        f"{a} {op} {b}",
        lambda text, n=numbers, t=target: countdown_reward(text, n, t),
    )


def _addition(rng: np.random.Generator) -> Problem:
    a, b = (int(x) for x in rng.integers(1, 10, size=2))
    return Problem(
        "addition",
        f"{_ADDITION_SHOTS}{a} + {b} =",
        str(a + b),
        lambda text, t=a + b: addition_reward(text, t),
    )


def _capitals(rng: np.random.Generator) -> Problem:
    pick = rng.choice(len(_CAPITALS), size=3, replace=False)
    (c1, k1), (c2, k2), (c3, k3) = (_CAPITALS[i] for i in pick)
    prompt = (
        f"The capital of {c1} is {k1}. The capital of {c2} is {k2}. "
        f"The capital of {c3} is"
    )
    return Problem("capitals", prompt, k3, lambda text, k=k3: float(k in text))


_MAKERS = {"countdown": _countdown, "addition": _addition, "capitals": _capitals}


def make_problems(task: str, count: int, *, seed: int) -> list[Problem]:
    """``count`` problems of ``task``, drawn reproducibly from ``seed``.

    Args:
        task: one of :data:`TASKS`.
        count: number of prompts (GRPO groups).
        seed: the generator's seed.

    Returns:
        A list of :class:`Problem`.

    Examples:
        >>> p = make_problems("addition", 2, seed=0)
        >>> [q.reward(q.answer) for q in p]
        [1.0, 1.0]
    """
    if task not in _MAKERS:
        raise BadInput(f"unknown task {task!r}; valid: {', '.join(TASKS)}")
    if count < 1:
        raise BadInput(f"count = {count} must be >= 1")
    rng = np.random.default_rng(seed)
    return [_MAKERS[task](rng) for _ in range(count)]

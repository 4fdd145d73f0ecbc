"""Verifiable tasks: exact rational Countdown checks, addition, reproducible prompts."""

from fractions import Fraction

import pytest

from theorycheck._errors import BadInput
from theorycheck.rl import (
    TASKS,
    addition_reward,
    countdown_reward,
    evaluate_expression,
    make_problems,
)


def test_evaluate_expression_is_exact_rational():
    assert evaluate_expression("1/3 + 1/3 + 1/3") == (Fraction(1), [1, 3, 1, 3, 1, 3])
    # 0.1 + 0.2 != 0.3 in floats; literals here are integers only, so floats are refused
    assert evaluate_expression("0.1 + 0.2") is None


@pytest.mark.parametrize("text", ["2 ** 3", "abs(2)", "x + 1", "1 / 0", "", "3 +"])
def test_evaluate_expression_refuses_anything_else(text):
    assert evaluate_expression(text) is None


def test_countdown_reward_uses_exact_division():
    assert countdown_reward("7 / 2 * 2", (7, 2, 2), 7) == 1.0
    assert countdown_reward("(9 - 3) / 4 * 2", (9, 3, 4, 2), 3) == 1.0
    assert countdown_reward("7 / 2", (7, 2, 5), 3) == 0.0  # 3.5, not 3


def test_countdown_reward_refuses_reused_or_foreign_numbers():
    assert countdown_reward("5 + 5", (5, 3, 1), 10) == 0.0
    assert countdown_reward("4 + 6", (5, 3, 1), 10) == 0.0
    assert countdown_reward("5 + 5", (5, 5, 1), 10) == 1.0


def test_countdown_reward_reads_only_the_first_line():
    assert countdown_reward(" 2 + 3\n9 * 9", (2, 3, 9), 5) == 1.0
    assert countdown_reward(" 2 + 3 = 5", (2, 3, 9), 5) == 1.0
    assert countdown_reward("\n2 + 3", (2, 3, 9), 5) == 1.0  # leading blank stripped


def test_addition_reward_takes_the_first_integer():
    assert addition_reward(" 12\n3 + 4 = 7", 12) == 1.0
    assert addition_reward(" 7 is not 12", 12) == 0.0
    assert addition_reward("none", 12) == 0.0


@pytest.mark.parametrize("task", TASKS)
def test_make_problems_reference_answer_earns_the_reward(task):
    problems = make_problems(task, 6, seed=3)
    assert all(p.task == task for p in problems)
    assert [p.reward(" " + p.answer) for p in problems] == [1.0] * 6
    assert all(p.reward(" ???") == 0.0 for p in problems)


def test_make_problems_is_reproducible_per_seed():
    a = [p.prompt for p in make_problems("countdown", 5, seed=1)]
    b = [p.prompt for p in make_problems("countdown", 5, seed=1)]
    c = [p.prompt for p in make_problems("countdown", 5, seed=2)]
    assert a == b and a != c


def test_make_problems_refuses_unknown_task():
    with pytest.raises(BadInput, match="sudoku"):
        make_problems("sudoku", 2, seed=0)

"""Reuse the tiny model and rollouts of tests/rl."""

from tests.rl.conftest import rollouts_bf16, rollouts_f32, tiny  # noqa: F401

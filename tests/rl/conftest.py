"""A tiny random model and its rollouts, shared by the rl and probes tests."""

import pytest

from theorycheck.rl import collect, make_problems, tiny_model


@pytest.fixture(scope="session")
def tiny():
    return tiny_model(seed=0)


def _rollouts(model, engine, seed=0):
    # seed 1 gives groups with mixed rewards on the tiny model (checked in a test)
    return collect(
        model,
        make_problems("addition", 4, seed=seed),
        samples=4,
        new_tokens=5,
        topk=5,
        seed=seed,
        engine_dtype=engine,
    )


@pytest.fixture(scope="session")
def rollouts_bf16(tiny):
    return _rollouts(tiny, "bfloat16")


@pytest.fixture(scope="session")
def rollouts_f32(tiny):
    return _rollouts(tiny, "float32")

"""Suite-wide settings: float64, strict rank promotion, hypothesis profiles, and a
bound on the compiled programs one test process keeps alive."""

import gc
import os
from pathlib import Path

import jax
import pytest
from hypothesis import HealthCheck, settings

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_numpy_rank_promotion", "raise")

settings.register_profile(
    "dev",
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "ci",
    max_examples=200,
    deadline=None,
    derandomize=True,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))


def _map_limit() -> int | None:
    """Half the kernel's per-process limit on memory mappings (Linux), else None."""
    try:
        return int(Path("/proc/sys/vm/max_map_count").read_text()) // 2
    except (OSError, ValueError):
        return None


def _mappings() -> int:
    with open("/proc/self/maps", "rb") as maps:
        return sum(1 for _ in maps)


_LIMIT = _map_limit()


@pytest.fixture(autouse=True)
def _bounded_executables():
    """Drop JAX's compiled programs when the process nears its mapping limit.

    Each XLA:CPU executable maps its code and data sections separately (several
    mappings per program), and every ``jax.jit`` keeps its executables alive
    for the life of the process. An xdist worker runs a thousand tests and compiles
    a few thousand programs, which reaches Linux's ``vm.max_map_count`` (65,530 by
    default): LLVM's JIT linker then cannot map a section and aborts the worker
    (``RuntimeDyldImpl::emitSection``), in whatever test compiles next. After any
    test that leaves more than half the limit in use, the caches are cleared; later
    tests compile again (from the on-disk cache when it holds the program).
    """
    yield
    if _LIMIT is not None and _mappings() > _LIMIT:
        jax.clear_caches()
        gc.collect()

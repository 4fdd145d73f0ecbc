"""The worker side of test_gate's cache test (imports no torch itself)."""

import sys
from pathlib import Path


def value_in_worker(path: str, func: str, queue) -> None:
    import jax
    import numpy as np

    jax.config.update("jax_enable_x64", True)
    from theorycheck.torchfront import load

    loss = load(Path(path), func)
    mu = np.log([0.5, 0.25, 0.25])
    value = float(loss.loss(np.zeros(3), 0, adv=-1.0, behavior_logp=mu))
    queue.put(("torch" in sys.modules, value))

"""Trainer dumps turned into an audit BATCH (``p``, ``q``, ``adv``, ``mask``,
``group_id``).

A dump is an ``.npz`` of the tensors the trainer's loss sees, under the trainer's own
names (the arrays as ``tensor.float().cpu().numpy()``, string ids as ``str``):

- **verl** (``DataProto.batch`` before ``update_actor``, verl-project/verl 1dda039):
  ``old_log_probs`` (trainer), ``rollout_log_probs`` (inference engine; needs
  ``actor_rollout_ref.rollout.calculate_log_probs=True``), ``advantages``
  (``[S, T]``), ``response_mask`` and ``uid`` (``non_tensor_batch``: one id per
  prompt). In bypass mode ``old_log_probs`` *is* the rollout log-prob; dump before
  it is overwritten.
- **TRL** (the dict ``_generate_and_score_completions`` returns, huggingface/trl
  f2cd577): ``old_per_token_logps`` (or ``per_token_logps``),
  ``sampling_per_token_logps`` (vLLM; needs ``use_vllm`` with the IS correction
  on), ``advantages`` (``[S]``) and ``completion_mask``; the groups are consecutive
  runs of ``num_generations``.

``p = exp(trainer log-prob)``, ``q = exp(rollout log-prob)``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from theorycheck._errors import BadInput
from theorycheck.losses._audit import validate_batch

#: trainer -> (trainer log-prob names, rollout log-prob, advantages, mask).
NAMES = {
    "verl": (
        ("old_log_probs",),
        "rollout_log_probs",
        "advantages",
        "response_mask",
    ),
    "trl": (
        ("old_per_token_logps", "per_token_logps"),
        "sampling_per_token_logps",
        "advantages",
        "completion_mask",
    ),
}


def _field(arrays, names, path):
    for n in names:
        if n in arrays:
            return np.asarray(arrays[n])
    raise BadInput(
        f"dump {path!r}: no {' or '.join(names)}; fields: {', '.join(sorted(arrays))}"
    )


def _groups(trainer, arrays, rows, num_generations, path):
    if trainer == "verl":
        uid = _field(arrays, ("uid", "index"), path)
        _, ids = np.unique(uid.astype(str), return_inverse=True)
        return ids
    if num_generations is None or num_generations < 1 or rows % num_generations:
        raise BadInput(
            f"dump {path!r}: TRL groups need num_generations dividing the {rows} "
            f"rows (got {num_generations})"
        )
    return np.arange(rows) // num_generations


def batch_from_dump(arrays, trainer, *, num_generations=None, name="dump"):
    """A trainer's tensors (module doc) as a validated audit BATCH.

    Raises:
        BadInput: a trainer other than verl / trl, a missing field, a log-prob above 0
            or not finite on a valid token, shapes that do not match.
    """
    if trainer not in NAMES:
        raise BadInput(f"dump trainer {trainer!r}: expected verl or trl")
    train_names, roll, adv, mask = NAMES[trainer]
    m = _field(arrays, (mask,), name).astype(np.float64)
    logp = {
        "p": _field(arrays, train_names, name).astype(np.float64),
        "q": _field(arrays, (roll,), name).astype(np.float64),
    }
    for key, lp in logp.items():
        if lp.shape != m.shape:
            raise BadInput(f"dump {name!r}: {key} log-probs {lp.shape}, mask {m.shape}")
        bad = (m > 0) & ~(np.isfinite(lp) & (lp <= 0))
        if bad.any():
            s, t = np.argwhere(bad)[0]
            raise BadInput(f"dump {name!r}: log-prob [{s}, {t}] = {lp[s, t]!r}")
    rows = m.shape[0] if m.ndim == 2 else 0
    batch = {
        "p": np.exp(np.where(m > 0, logp["p"], 0.0)),
        "q": np.exp(np.where(m > 0, logp["q"], 0.0)),
        "adv": _field(arrays, (adv,), name),
        "mask": m,
        "group_id": _groups(trainer, arrays, rows, num_generations, name),
    }
    return validate_batch(batch, name=name)


def load_dump(path, trainer, *, num_generations=None):
    """:func:`batch_from_dump` of an ``.npz`` file."""
    p = Path(path)
    try:
        with open(p, "rb") as fh, np.load(fh, allow_pickle=False) as data:
            arrays = {k: np.asarray(data[k]) for k in data.files}
    except (OSError, ValueError, AttributeError) as err:
        raise BadInput(f"dump {str(path)!r}: not a readable .npz ({err})") from None
    return batch_from_dump(
        arrays, trainer, num_generations=num_generations, name=str(path)
    )

r"""The survey's audit of a batch: how much sequence-normalised weight each rule gates.

For response s with :math:`L_s` valid tokens, the sequence-normalised weight of a valid
token is :math:`w_{st} = 1/L_s`. For a rule R with gate :math:`g^R_{st}` (its
analytic coefficient is forced to 0 by a clip, mask or rejection; the log-ratio guard's
derivative saturation is *not* a gate and is counted separately):

.. math::
    \text{gated share}(R) = \frac{\sum_{st} w_{st}\,[\hat A_{st}\ne 0]\,g^R_{st}}
                                 {\sum_{st} w_{st}\,[\hat A_{st}\ne 0]}.

These are counting weights, not fractions of gradient norm (survey). A group whose
advantages are all zero gives no fresh gradient; its share among groups is reported, as
is the share of valid tokens where :math:`|\log r| > C` (the guard activates).

BATCH fields (``.npz`` or JSON): ``p``, ``q`` ``[S, T]`` current and rollout probability
of the sampled token, ``adv`` ``[S]`` or ``[S, T]``, ``mask`` ``[S, T]`` (1 = valid) and
``group_id`` ``[S]`` (``prompt_id`` is accepted as its name too).
"""

from __future__ import annotations

from pathlib import Path

import jax.numpy as jnp
import numpy as np

from theorycheck._bounded import MAX_BATCH_BYTES, check_npz_size, load_json
from theorycheck._errors import BadInput
from theorycheck.losses._corrections import CORRECTIONS, sequence_ratio_stats
from theorycheck.losses._params import get_rule
from theorycheck.losses._registry import LOSSES

FIELDS = ("p", "q", "adv", "mask", "group_id")
#: token rules the audit can evaluate from (p, q, adv) and the response alone.
AUDITABLE = tuple(
    n
    for n, s in LOSSES.items()
    if s.coefficient is not None
    and not {"divergence", "ddot"} & set(s.coefficient_inputs)
)


def _read(path: Path) -> dict:
    """The raw fields of a BATCH file (numpy arrays, not yet validated)."""
    what = f"BATCH {str(path)!r}"
    if path.suffix == ".npz":
        check_npz_size(path, what, MAX_BATCH_BYTES)  # bounded: theorycheck._bounded
        with open(path, "rb") as fh:  # ours to close, whatever np.load raises
            data = np.load(fh, allow_pickle=False)
            if not isinstance(data, np.lib.npyio.NpzFile):
                raise BadInput(
                    f"BATCH {str(path)!r} holds a single array (a .npy file), "
                    f"not an .npz archive of the fields {', '.join(FIELDS)}"
                )
            with data:
                return {k: np.asarray(data[k]) for k in data.files}
    if path.suffix == ".json":
        raw = load_json(path, what, MAX_BATCH_BYTES)
        if not isinstance(raw, dict):
            raise BadInput(
                f"BATCH {str(path)!r} holds a JSON {type(raw).__name__}; expected "
                f"an object with the fields {', '.join(FIELDS)}"
            )
        out = {}
        for key, value in raw.items():
            try:
                out[key] = np.asarray(value)
            except ValueError as err:  # ragged lists
                raise BadInput(f"BATCH {str(path)!r}: {key} is {err}") from None
        return out
    raise BadInput(f"BATCH {str(path)!r}: expected a .npz or .json file")


def load_batch(path: str | Path) -> dict[str, np.ndarray]:
    """Reads and validates a BATCH file (see module doc); raises BadInput naming the
    problem (unreadable file, missing or unknown field, wrong dtype or shape,
    probability outside (0, 1], ...)."""
    path = Path(path)
    if not path.is_file():
        raise BadInput(f"BATCH {str(path)!r} does not exist")
    try:
        raw = _read(path)
    except BadInput:
        raise
    except Exception as err:  # any parse failure of the file means unreadable
        first = (str(err).strip().splitlines() or [""])[0]
        raise BadInput(
            f"BATCH {str(path)!r} cannot be read: {type(err).__name__}: {first}"
        ) from None
    if "prompt_id" in raw:
        pid = raw.pop("prompt_id")
        if "group_id" not in raw:
            raw["group_id"] = pid
        elif raw["group_id"].shape != pid.shape or not np.array_equal(
            raw["group_id"], pid
        ):
            raise BadInput(
                f"BATCH {str(path)!r} gives both group_id and prompt_id and they "
                "differ; give one of them"
            )
    unknown = sorted(set(raw) - set(FIELDS))
    if unknown:
        raise BadInput(
            f"BATCH {str(path)!r} has unknown field(s) {', '.join(unknown)}; "
            f"fields: {', '.join(FIELDS)} (prompt_id for group_id)"
        )
    missing = [f for f in FIELDS if f not in raw]
    if missing:
        raise BadInput(
            f"BATCH {str(path)!r} is missing field(s) "
            f"{', '.join(missing)}; needs {', '.join(FIELDS)}"
        )
    return validate_batch({f: raw[f] for f in FIELDS}, name=str(path))


def _real(name: str, field: str, value) -> np.ndarray:
    """``value`` as float64, refusing complex, string, object and empty fields."""
    a = np.asarray(value)
    if a.dtype.kind == "c":
        raise BadInput(f"{name}: {field} is complex ({a.dtype}); expected real numbers")
    if a.dtype.kind not in "biuf":
        raise BadInput(
            f"{name}: {field} has dtype {a.dtype} ({a.dtype.kind!r}); expected numbers"
        )
    return a.astype(np.float64)


def validate_batch(batch: dict, *, name: str = "batch") -> dict[str, np.ndarray]:
    """Checks shapes and values; returns float64 arrays (adv broadcast to [S, T])."""
    mask = _real(name, "mask", batch["mask"])
    if mask.ndim != 2 or mask.size == 0:
        raise BadInput(
            f"{name}: mask has shape {mask.shape}; expected a non-empty [S, T]"
        )
    shape = mask.shape
    if not np.all((mask == 0) | (mask == 1)):
        odd = float(mask[(mask != 0) & (mask != 1)][0])
        raise BadInput(f"{name}: mask holds {odd!r}; expected 0 or 1")
    out = {"mask": mask}
    for f in ("p", "q"):
        out[f] = _probabilities(name, f, batch[f], mask)
    adv = _real(name, "adv", batch["adv"])
    if adv.shape == shape[:1]:
        adv = np.repeat(adv[:, None], shape[1], axis=1)
    if adv.shape != shape:
        raise BadInput(
            f"{name}: adv has shape {adv.shape}; expected [S] = "
            f"({shape[0]},) or [S, T] = {shape}"
        )
    if not np.all(np.isfinite(adv[mask == 1])):
        raise BadInput(f"{name}: adv holds a non-finite value on a valid token")
    out["adv"] = np.where(mask == 1, adv, 0.0)
    out["group_id"] = _group_ids(name, batch["group_id"], shape)
    return out


def _probabilities(name, field, value, mask):
    """A probability field: [S, T] like the mask, in (0, 1] on valid tokens."""
    a = _real(name, field, value)
    if a.shape != mask.shape:
        raise BadInput(f"{name}: {field} has shape {a.shape}, mask has {mask.shape}")
    bad = (mask == 1) & ~((a > 0) & (a <= 1))
    if bad.any():
        s, t = np.argwhere(bad)[0]
        raise BadInput(
            f"{name}: {field}[{s}, {t}] = {float(a[s, t])!r} is outside (0, 1]"
        )
    return np.where(mask == 1, a, 1.0)


def _group_ids(name, value, shape):
    """``group_id``: [S] whole numbers."""
    gid = _real(name, "group_id", value)
    if gid.shape != shape[:1]:
        raise BadInput(
            f"{name}: group_id has shape {gid.shape}; expected ({shape[0]},)"
        )
    whole = np.isfinite(gid) & (np.mod(gid, 1) == 0) & (np.abs(gid) < 2.0**53)
    if not whole.all():
        bad = float(gid[~whole][0])
        raise BadInput(f"{name}: group_id holds {bad!r}; expected integers")
    return gid.astype(np.int64)


def _rule_inputs(name, batch, params=None):
    if name not in ("gspo", "gspo_token", "luspo", "gmpo", "vespo"):
        return {}
    m = batch["mask"]
    log_r = np.log(batch["p"]) - np.log(batch["q"])
    if name == "vespo":  # TRL: the sum of the +-20-clamped token log ratios
        total = np.sum(m * np.clip(log_r, -20.0, 20.0), axis=1, keepdims=True)
        return {"seq_log_ratio": np.broadcast_to(total, m.shape)}
    if name == "gmpo":  # the other positions' one-sidedly clipped log ratios
        p = {**LOSSES[name].defaults, **(params or {})}
        adv = np.broadcast_to(batch["adv"], m.shape)
        log_r = np.where(
            adv > 0,
            np.minimum(log_r, p["eps_high"]),
            np.where(adv < 0, np.maximum(log_r, -p["eps_low"]), 0.0),
        )
    total = np.sum(m * log_r, axis=1, keepdims=True)
    lengths = np.maximum(m.sum(axis=1, keepdims=True), 1.0)
    if name == "gspo_token":
        return {"seq_log_ratio": np.broadcast_to(total / lengths, m.shape)}
    return {
        "other_log_ratio": total - log_r,
        "length": np.broadcast_to(lengths, m.shape),
    }


def audit_batch(batch: dict, rules, params=None) -> dict:
    """The audit table of a validated batch (JSON-ready).

    Args:
        batch: output of :func:`validate_batch` / :func:`load_batch`.
        rules: rule names (each in :data:`AUDITABLE`).
        params: optional ``{rule: {key: value}}`` overrides (already validated).

    Returns:
        ``{"responses", "groups", "tokens", "nonzero_adv_tokens", "empty_groups",
        "zero_adv_group_share", "rules": [...]}``: ``zero_adv_group_share`` is the
        share of groups with valid tokens whose advantages are all zero (``None``
        when no group has a valid token; groups without any are ``empty_groups``).
    """
    params = params or {}
    m = batch["mask"]
    lengths = m.sum(axis=1)
    weight = np.where(lengths[:, None] > 0, m / np.maximum(lengths[:, None], 1), 0.0)
    nonzero = (batch["adv"] != 0) & (m == 1)
    denom = float(np.sum(weight * nonzero))
    groups = np.unique(batch["group_id"])
    # a group with no valid token is empty, not "zero-advantage"
    valid = [g for g in groups if m[batch["group_id"] == g].any()]
    zero_groups = sum(1 for g in valid if not nonzero[batch["group_id"] == g].any())
    log_r = np.log(batch["p"]) - np.log(batch["q"])
    rows = []
    for name in rules:
        spec = LOSSES[name]
        kw = {**spec.defaults, **params.get(name, {})}
        _, gated = spec.coefficient(
            jnp.asarray(batch["p"]),
            jnp.asarray(batch["q"]),
            jnp.asarray(batch["adv"]),
            **{
                k: jnp.asarray(v)
                for k, v in _rule_inputs(name, batch, params.get(name)).items()
            },
            **kw,
        )
        gated = np.asarray(gated) & (m == 1)
        clamp = kw.get("log_ratio_clamp")
        clamped = (np.abs(log_r) > clamp) & (m == 1) if clamp is not None else None
        if name == "gspo_token":  # an upper clamp on the sequence's log s
            seq = _rule_inputs(name, batch)["seq_log_ratio"]
            clamped = (seq > clamp) & (m == 1)
        rows.append(
            {
                "rule": name,
                "params": kw,
                "gated_share": float(np.sum(weight * (gated & nonzero)) / denom)
                if denom > 0
                else None,
                "gated_tokens": int(np.sum(gated & nonzero)),
                "clamp_share": None
                if clamped is None
                else float(clamped.sum() / max(m.sum(), 1)),
                "clamp_tokens": None if clamped is None else int(clamped.sum()),
            }
        )
    return {
        "responses": int(m.shape[0]),
        "groups": int(groups.size),
        "tokens": int(m.sum()),
        "nonzero_adv_tokens": int(nonzero.sum()),
        "empty_groups": int(groups.size - len(valid)),
        "zero_adv_group_share": zero_groups / len(valid) if valid else None,
        "rules": rows,
    }


# --- off-policy corrections ---------------------------------------------------------


def check_corrections(names) -> list[str]:
    """Validates ``--corrections``: each a name in :data:`CORRECTIONS`."""
    out = [n for n in names if n]
    for name in out:
        if name not in CORRECTIONS:
            raise BadInput(
                f"unknown correction {name!r}; valid: {', '.join(CORRECTIONS)}"
            )
    return out


def audit_corrections(batch: dict, names) -> dict:
    """Per correction (defaults), the share of valid tokens and of non-empty responses
    it truncates or rejects, with x = log p - log q (trainer vs rollout), and the
    batch's sequence-ratio statistics (JSON-ready).

    Args:
        batch: output of :func:`validate_batch`.
        names: correction names (:data:`CORRECTIONS`).

    Returns:
        ``{"sequence_ratio": {...}, "corrections": [{"correction", "truncated_tokens",
        "rejected_tokens", "truncated_token_share", "rejected_token_share",
        "truncated_sequence_share", "rejected_sequence_share"}, ...]}``.
    """
    m = batch["mask"]
    x = np.log(batch["p"]) - np.log(batch["q"])
    tokens = max(float(m.sum()), 1.0)
    rows_ok = m.sum(axis=1) > 0
    seqs = max(int(rows_ok.sum()), 1)
    out = []
    for name in names:
        c = CORRECTIONS[name](x, m)
        out.append(
            {
                "correction": c.name,
                "truncated_tokens": int(c.truncated.sum()),
                "rejected_tokens": int(c.rejected.sum()),
                "truncated_token_share": float(c.truncated.sum() / tokens),
                "rejected_token_share": float(c.rejected.sum() / tokens),
                "truncated_sequence_share": float(
                    c.truncated.any(axis=1)[rows_ok].sum() / seqs
                ),
                "rejected_sequence_share": float(
                    c.rejected.any(axis=1)[rows_ok].sum() / seqs
                ),
            }
        )
    return {"sequence_ratio": sequence_ratio_stats(x, m), "corrections": out}


# --- rules ----------------------------------------------------------------------------


def check_rules(names) -> list[str]:
    """Validates ``--rules``: each must be auditable from (p, q, adv) alone."""
    out = []
    for name in names:
        get_rule(name)
        if name not in AUDITABLE:
            raise BadInput(
                f"rule {name!r} cannot be audited from per-token p and q "
                f"(it needs whole distributions or has no coefficient); "
                f"auditable: {', '.join(AUDITABLE)}"
            )
        out.append(name)
    if not out:
        raise BadInput("rules is empty: name at least one rule")
    return out


def synthetic_batch(
    seed: int = 0,
    *,
    prompts: int = 8,
    responses: int = 4,
    length: int = 32,
    mismatch: float = 0.3,
    solve_rate: float = 0.4,
) -> dict[str, np.ndarray]:
    """A synthetic BATCH: binary rewards, GRPO (sample-std) advantages, and trainer /
    rollout probabilities with a log-normal mismatch of scale ``mismatch``.

    Not data from a real run: a stand-in for demonstrations and tests.
    """
    rng = np.random.default_rng(seed)
    s = prompts * responses
    lengths = rng.integers(max(1, length // 4), length + 1, size=s)
    mask = (np.arange(length)[None] < lengths[:, None]).astype(np.float64)
    q = np.clip(rng.beta(2.0, 1.0, size=(s, length)), 1e-6, 1.0)
    p = np.clip(q * np.exp(rng.normal(0.0, mismatch, size=q.shape)), 1e-8, 1.0)
    difficulty = rng.uniform(0.0, 1.0, size=prompts) * 2 * solve_rate
    rewards = rng.uniform(size=s) < np.repeat(np.minimum(difficulty, 1), responses)
    rewards = rewards.astype(np.float64)
    gid = np.repeat(np.arange(prompts), responses)
    adv = np.zeros(s)
    for g in range(prompts):
        r = rewards[gid == g]
        if np.ptp(r) > 0:
            adv[gid == g] = (r - r.mean()) / (r.std(ddof=1) + 1e-6)
    return {"p": p, "q": q, "adv": adv, "mask": mask, "group_id": gid}

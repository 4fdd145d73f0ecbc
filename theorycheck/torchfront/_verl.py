"""The ``config`` a verl policy-loss function receives, with verl's documented
defaults.

verl's loss functions (``verl/trainer/ppo/core_algos.py``, ``compute_policy_loss_*``)
read their settings from an ``ActorConfig``: by attribute (``config.clip_ratio``), by
``config.get(key, default)``, from the nested ``config.policy_loss`` (a
``PolicyLossConfig``), and ``**config.global_batch_info`` into ``agg_loss``. The
defaults below are the documented ones of ``verl/trainer/config/actor/actor.yaml`` and
``verl/workers/config/actor.py`` (written here from their documentation, not copied):
note that ``clip_ratio_low`` and ``clip_ratio_high`` default to 0.2 themselves, so
``--set clip_ratio=0.3`` alone changes only code that reads ``clip_ratio``, as in verl.

:class:`VerlConfig` records every key the loss reads and the value it got, so the
result names exactly the settings that were used.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

#: ``ActorConfig`` fields a policy loss reads, with verl's documented defaults.
ACTOR_DEFAULTS: dict[str, Any] = {
    "clip_ratio": 0.2,
    "clip_ratio_low": 0.2,
    "clip_ratio_high": 0.2,
    "clip_ratio_c": 3.0,
    "tau_pos": 1.0,
    "tau_neg": 1.05,
    "loss_agg_mode": "token-mean",
}
#: ``PolicyLossConfig`` fields (``config.policy_loss.X``), documented defaults.
POLICY_LOSS_DEFAULTS: dict[str, Any] = {
    "loss_mode": "vanilla",
    "clip_cov_ratio": 0.0002,
    "clip_cov_lb": 1.0,
    "clip_cov_ub": 5.0,
    "kl_cov_ratio": 0.0002,
    "ppo_kl_coef": 0.1,
    "dro_beta": None,
}

_MISSING = object()


class MissingKey(AttributeError):
    """The loss read a config key verl does not define and the user did not set."""


class VerlConfig(Mapping):
    """A trainer config: attribute and item access, ``get``, and nested sections
    from dotted keys (verl's ``config.policy_loss.X``, SkyRL's
    ``config.cispo.X``).

    Args:
        values: documented defaults overridden by ``--set`` values.
        reads: where every read is recorded (``{key: value}``); shared with
            the ``policy_loss`` child, whose keys are recorded as
            ``policy_loss.KEY``.
        prefix: ``""`` or ``"policy_loss."``.
    """

    def __init__(self, values: Mapping[str, Any], reads: dict, prefix: str = ""):
        object.__setattr__(self, "_values", dict(values))
        object.__setattr__(self, "_reads", reads)
        object.__setattr__(self, "_prefix", prefix)

    def _read(self, key: str, default: Any = _MISSING) -> Any:
        if key == "global_batch_info":
            return {}
        dotted = f"{key}."
        if key not in self._values and any(k.startswith(dotted) for k in self._values):
            sub = {
                k[len(dotted) :]: v
                for k, v in self._values.items()
                if k.startswith(dotted)
            }
            return VerlConfig(sub, self._reads, f"{self._prefix}{dotted}")
        if key in self._values:
            value = self._values[key]
        elif default is not _MISSING:
            value = default
        else:
            raise MissingKey(
                f"the loss reads config.{self._prefix}{key}, which the trainer's "
                f"config does not define; give it a value (--set "
                f"{self._prefix}{key}=...)"
            )
        self._reads[self._prefix + key] = value
        return value

    def __getattr__(self, key: str) -> Any:
        if key.startswith("__"):
            raise AttributeError(key)
        return self._read(key)

    def __setattr__(self, key: str, value: Any) -> None:
        raise AttributeError(f"config.{key} is read-only in a loss function")

    def __getitem__(self, key: str) -> Any:
        try:
            return self._read(key)
        except MissingKey as err:
            raise KeyError(str(err)) from None

    def get(self, key: str, default: Any = None) -> Any:
        return self._read(key, default)

    def __contains__(self, key: object) -> bool:
        heads = {k.split(".")[0] for k in self._values}
        return key in self._values or key in heads or key == "global_batch_info"

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)


def config_values(settings: Mapping[str, float]) -> dict[str, Any]:
    """verl's documented defaults with ``settings`` (``--set``) on top; a
    ``PolicyLossConfig`` field may be named bare (``ppo_kl_coef``) or dotted
    (``policy_loss.ppo_kl_coef``)."""
    values: dict[str, Any] = dict(ACTOR_DEFAULTS)
    values.update({f"policy_loss.{k}": v for k, v in POLICY_LOSS_DEFAULTS.items()})
    for key, value in settings.items():
        if key in POLICY_LOSS_DEFAULTS:
            key = f"policy_loss.{key}"
        values[key] = value
    return values

"""What the units of one run share: the model, loaded once, and each seed's rollouts
(generated once, in the background while the previous unit computes, and recorded);
a unit's identity (:class:`Unit`)."""

from __future__ import annotations

import dataclasses
import json
import os
import threading
from typing import Any

import numpy as np

from experiments.runner.bank import RolloutBank
from experiments.runner.store import _write_bytes
from theorycheck._errors import BadInput


def log(message: str) -> None:
    """One progress line on stderr (see ``theorycheck._progress``)."""
    from theorycheck._progress import stage

    stage(message)


@dataclasses.dataclass(frozen=True)
class Unit:
    """One unit of an experiment: its id in ``results.json``, its seed, the rollout
    engine whose batch it uses (``"bfloat16"``/``"float32"``) and the experiment's own
    settings (``spec``, e.g. a variant's overrides)."""

    id: str
    seed: int
    engine: str = "bfloat16"
    spec: Any = None


class Context:
    """What the units of one run share: the lazily loaded model and each seed's
    rollouts (generated once and recorded, or read back from the record on
    ``--replay``).

    Args:
        cfg: the run's config (``model``, the rollout settings).
        bank: the :class:`RolloutBank` to write (a run) or read (a replay).
        generate: ``generate(ctx, seed, engine) -> (Rollouts, meta)``, the
            experiment's sampler (dynamic sampling and the like).
        replay: read every batch from ``bank``; generating one is an error.

    In a single-process run the next unit's batch is generated in a background
    thread while the current unit computes (:meth:`prefetch`, started by
    :meth:`rollouts` once the current unit's own batch is held; ``upcoming`` names
    it): generation runs the model token by token and leaves part of the machine's
    cores idle, which the unit's own work then uses. Each batch is still generated
    once, by the same function of its seed, so the recorded rollouts are the same.
    """

    def __init__(self, cfg, bank: RolloutBank, generate, *, replay: bool = False):
        self.cfg, self.bank, self._generate, self.replay = cfg, bank, generate, replay
        self._model = None
        self._cache: dict = {}
        self._scratch: tuple = (None, {})  # batch_cache's one batch
        #: held while a batch is generated (by :meth:`ensure`, in either thread)
        self._generating = threading.RLock()
        self._ahead: threading.Thread | None = None
        self._closed = False  # set by close(): a background batch is not recorded
        #: None, or ``(seed, engine)`` of the batch the next unit reads: generated
        #: in the background by :meth:`rollouts` (set by :func:`run`)
        self.upcoming: tuple[int, str] | None = None
        #: None, or the message of the error raised where a batch would be
        #: generated (set for the units of a ``--distributed`` run, whose batches
        #: are all generated and shared before they start)
        self.no_generation: str | None = None
        #: None (:meth:`savez` writes at once), or ``{name: bytes}``: the files of
        #: the unit being computed, written by the run loop on process 0
        self.outbox: dict[str, bytes] | None = None

    def savez(self, name: str, **arrays) -> None:
        """``np.savez`` of a unit's own output file ``name`` in ``cfg.out``, written
        by process 0 alone (under ``--distributed`` it travels with the unit's
        result)."""
        import io

        buf = io.BytesIO()
        np.savez(buf, **arrays)
        if self.outbox is None:
            os.makedirs(self.cfg.out, exist_ok=True)
            _write_bytes(os.path.join(self.cfg.out, name), buf.getvalue())
        else:
            self.outbox[name] = buf.getvalue()

    @property
    def model(self):
        if self._model is None:
            from theorycheck.models import load_model
            from theorycheck.rl import tiny_model

            log(f"loading {self.cfg.model}")
            self._model = (
                tiny_model() if self.cfg.model == "tiny" else load_model(self.cfg.model)
            )
        return self._model

    def rollouts(self, seed: int, engine: str, *, anchor: bool = True):
        """``(Rollouts, meta)`` of one seed and engine, rebuilt from the record (the
        anchor recomputed by ``theorycheck.rl.rescore``) in a run and its replay."""
        from theorycheck.rl import from_record

        key = (seed, engine, anchor)
        self.ensure(seed, engine)
        if self.upcoming is not None and self.upcoming != (seed, engine):
            self.prefetch(*self.upcoming)
        if key in self._cache:
            return self._cache[key]
        rec = self.bank.get(seed, engine)
        meta = json.loads(str(rec.pop("meta")))
        out = from_record(
            self.model,
            rec,
            engine_dtype=engine,
            temperature=self.cfg.temperature,
            anchor=anchor,
            tokenizer=self.model.tokenizer,
            arithmetic=self.cfg.anchor_arithmetic,
        )
        self._cache = {key: (out, meta)}  # one batch at a time (memory)
        return out, meta

    def batch_cache(self, seed: int, engine: str, anchor: bool = True) -> dict:
        """A dict for an experiment's own values computed from one rollout batch
        (e.g. a frozen trunk, ``Trainer(trunk=...)``): the same dict for the units
        that read the same batch, kept for one batch at a time, as
        :meth:`rollouts` keeps one."""
        key = (seed, engine, anchor)
        if self._scratch[0] != key:
            self._scratch = (key, {})
        return self._scratch[1]

    def ensure(self, seed: int, engine: str) -> None:
        """Generates and records the batch of one seed and engine unless the bank
        holds it."""
        from theorycheck.rl import record

        if self.bank.get(seed, engine) is not None:
            return
        if self.replay:
            raise BadInput(
                f"{self.bank.path} holds no rollouts of seed {seed} ({engine})"
            )
        if self.no_generation:
            raise RuntimeError(f"seed {seed} ({engine}): {self.no_generation}")
        with self._generating:  # waits for a background generation of it
            if self.bank.get(seed, engine) is not None:
                return
            log(f"seed {seed}: rollouts ({engine} engine)")
            rollouts, meta = self._generate(self, seed, engine)
            if self._closed:  # the run stopped (an error, an interrupt) meanwhile
                return
            self.bank.put(seed, engine, record(rollouts), meta)

    def close(self) -> None:
        """Ends the run's use of this context: a batch still being generated in the
        background is dropped when it finishes, not recorded (a run interrupted and
        restarted in the same process never has a stale bank rewrite its file)."""
        self._closed = True

    def prefetch(self, seed: int, engine: str) -> None:
        """Starts generating the batch of ``seed`` and ``engine`` in a background
        thread unless it is held, cannot be generated here (a replay, a
        ``--distributed`` unit) or a background generation is running. An error
        there is dropped: the unit that reads the batch generates it again through
        :meth:`ensure` and raises it itself."""
        if self.replay or self.no_generation or self.bank.get(seed, engine) is not None:
            return
        if self._ahead is not None and self._ahead.is_alive():
            return
        _ = self.model  # loaded by the caller's thread, once

        def work():
            try:
                self.ensure(seed, engine)
            except Exception:  # noqa: BLE001 - raised again by the unit that reads it
                pass

        self._ahead = threading.Thread(target=work, name="rollouts-ahead", daemon=True)
        self._ahead.start()


def setup_jax() -> None:
    """float64 on (the trainer computes in it)."""
    import jax

    jax.config.update("jax_enable_x64", True)

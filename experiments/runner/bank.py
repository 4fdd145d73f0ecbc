"""The rollout bank: each seed's recorded rollout batch, ``rollouts.npz`` beside
``results.json`` (``theorycheck.rl.record``), read back by a resumed run and by
``--replay`` (which never regenerates one)."""

from __future__ import annotations

import json
import os
import threading
import zipfile
import zlib

import numpy as np

from experiments.runner.store import jsonable
from theorycheck._errors import BadInput

#: what reading a damaged ``.npz`` raises (a truncated zip, a bad CRC, a short read)
NPZ_ERRORS = (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile, zlib.error)


class RolloutBank:
    """Each seed's recorded rollout batch, ``rollouts.npz`` beside ``results.json``.

    Keys ``<batch>.<field>`` with ``batch = seed<s>.<engine>`` and the fields of
    ``theorycheck.rl.record``; the file is rewritten atomically when a batch is added
    (a few hundred kB per batch: no vocabulary-sized array). ``write=False``: held in
    memory only (the processes other than process 0 of a ``--distributed`` run, which
    neither read nor write the file). Thread-safe: a batch may be generated and
    added by a background thread (:meth:`Context.prefetch`) while a unit reads
    another.
    """

    def __init__(
        self,
        out_dir: str,
        *,
        fresh: bool = False,
        path: str | None = None,
        write: bool = True,
    ):
        self.path = path or os.path.join(out_dir, "rollouts.npz")
        self.write = write
        self.arrays: dict[str, np.ndarray] = {}
        self._lock = threading.RLock()
        if write and not fresh and os.path.exists(self.path):
            try:
                with open(self.path, "rb") as fh, np.load(fh) as z:
                    self.arrays = {k: z[k] for k in z.files}
            except NPZ_ERRORS as err:
                why = " ".join(str(err).split())[:120] or type(err).__name__
                raise BadInput(
                    f"{self.path}: not a readable rollouts file ({why})"
                ) from None

    @staticmethod
    def key(seed: int, engine: str) -> str:
        return f"seed{seed}.{engine}"

    def batches(self) -> set[tuple[int, str]]:
        """The ``(seed, engine)`` pairs held."""
        out = set()
        with self._lock:
            keys = list(self.arrays)
        for k in keys:
            seed, engine, _ = k.split(".", 2)
            out.add((int(seed[len("seed") :]), engine))
        return out

    def get(self, seed: int, engine: str) -> dict | None:
        """The recorded arrays of one batch (None when absent)."""
        prefix = self.key(seed, engine) + "."
        with self._lock:
            items = list(self.arrays.items())
        rec = {k[len(prefix) :]: v for k, v in items if k.startswith(prefix)}
        return rec or None

    def put(self, seed: int, engine: str, rec: dict, meta: dict) -> None:
        """Adds a batch (``meta``: small JSON-ready facts, e.g. the prompt draw)."""
        prefix = self.key(seed, engine) + "."
        with self._lock:
            for k, v in rec.items():
                self.arrays[prefix + k] = np.asarray(v)
            self.arrays[prefix + "meta"] = np.asarray(json.dumps(jsonable(meta)))
            self._save()

    def _save(self) -> None:
        if not self.write:
            return
        with self._lock:
            tmp = self.path + ".tmp.npz"
            np.savez_compressed(tmp, **self.arrays)
            os.replace(tmp, self.path)

    def pack(self, batches) -> bytes:
        """The recorded arrays of ``batches`` (``(seed, engine)`` pairs) as the bytes
        of an ``.npz`` (exact: dtypes and values as recorded)."""
        import io

        keys = {self.key(s, e) + "." for s, e in batches}
        with self._lock:
            items = list(self.arrays.items())
        chosen = {k: v for k, v in items if k[: k.rindex(".") + 1] in keys}
        buf = io.BytesIO()
        np.savez(buf, **chosen)
        return buf.getvalue()

    def merge(self, packed: list[bytes]) -> None:
        """Adds the batches of :meth:`pack`'s bytes (one file write for all)."""
        import io

        added = False
        with self._lock:
            for raw in packed:
                with np.load(io.BytesIO(raw)) as z:
                    for k in z.files:
                        self.arrays[k] = z[k]
                        added = True
            if added:
                self._save()

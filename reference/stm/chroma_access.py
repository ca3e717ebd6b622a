"""Access statistics of `ChromaShortTermStore` written behind the request (a mixin):
the buffer (`reference.stm.access`) is flushed in one batch of metadata updates, on a
background thread when it is full, and waited for before a sweep and on `dispose`."""

from __future__ import annotations

import contextlib
import logging
import threading
from typing import Any

from chromadb.errors import NotFoundError

from reference.errors import BackendUnavailable
from reference.stm.access import AccessBuffer, AccessWrite
from reference.stm.chroma_collection import unavailable
from reference.stm.chroma_generations import Generations, shared
from reference.stm.chroma_rows import NO_EXPIRY

_log = logging.getLogger(__name__)


class ChromaAccessWriter:
    """Flushing of the store's `AccessBuffer`; the store sets the attributes below."""

    _access: AccessBuffer
    _flusher: threading.Thread | None
    _flusher_lock: threading.Lock
    _collection: Any
    _batch: int
    generations: Generations
    server: str

    def flush_access(self) -> int:
        return self._access.flush(self._store_access)

    def _flush_behind(self) -> None:
        """Flush on a background thread (one at a time), so no request waits for it."""
        with self._flusher_lock:
            if self._flusher is not None and self._flusher.is_alive():
                return
            self._flusher = threading.Thread(
                target=self._flush_quietly, name="stm-access-flush", daemon=True
            )
            self._flusher.start()

    def _flush_quietly(self) -> None:
        try:
            self.flush_access()
        except BackendUnavailable as exc:  # kept: the next flush (a sweep's) raises it
            _log.warning("short-term access statistics not written yet: %s", exc)

    def wait_for_flush(self) -> None:
        """Return once no background flush of access statistics is running."""
        with self._flusher_lock:
            flusher = self._flusher
        if flusher is not None:
            flusher.join()

    @shared
    def _store_access(self, writes: list[AccessWrite]) -> None:
        # update, never upsert: a record deleted by another process stays deleted (Chroma
        # skips ids it does not have); a collection deleted by another (a namespace
        # dropped under this store) holds no record to write to.
        with unavailable(self.server), contextlib.suppress(NotFoundError):
            for start in range(0, len(writes), self._batch):
                batch = writes[start : start + self._batch]
                self._collection.update(
                    ids=[w.record_id for w in batch],
                    metadatas=[
                        {
                            "last_accessed_at": float(w.last_accessed_at),
                            "access_count": int(w.access_count),
                            "expires_at": NO_EXPIRY
                            if w.expires_at is None
                            else float(w.expires_at),
                            "importance": float(w.importance),
                        }
                        for w in batch
                    ],
                )

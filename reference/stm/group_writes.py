"""`GroupWrites`: records that concurrent callers write at the same moment go in one call.

A service runs many turns at once, and each stores one short-term record: one Chroma
upsert each. The embedded Chroma applies one write at a time, and much of a write's cost
is per call, not per record (its log, its SQLite transaction, its index update), so
writes that meet are cheaper together:

- a caller that finds no write in flight writes its record at once: alone, nothing
  waits and nothing changes;
- callers that arrive while a write is in flight queue; when it ends, the first of them
  writes the whole queue (up to `max_batch`) in one call, for all of them, then hands on
  to the first of any that queued meanwhile. No caller writes more than one batch;
- each caller returns once its own record is written; if the call raises, every caller
  of that batch gets the exception.

So a record is stored when `put` returns, as with a direct write.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

__all__ = ["GroupWrites"]

T = TypeVar("T")


@dataclass(eq=False)
class _Queued(Generic[T]):
    item: T
    done: threading.Event = field(default_factory=threading.Event)
    leads: bool = False  # woken to write the queue, not because its item is written
    error: BaseException | None = None


class GroupWrites(Generic[T]):
    """Calls `write(items)` with the items of callers that met (see the module docstring).
    Thread-safe. `batches` counts the calls and `items` the items written."""

    def __init__(self, write: Callable[[list[T]], None], *, max_batch: int = 64) -> None:
        self._write = write
        self.max_batch = max_batch
        self.batches = 0
        self.items = 0
        self._lock = threading.Lock()
        self._queue: list[_Queued[T]] = []
        self._busy = False

    def put(self, item: T) -> None:
        """Write `item` (with whatever else is queued), or wait for a batch that holds it."""
        mine = _Queued(item)
        with self._lock:
            self._queue.append(mine)
            leads = not self._busy
            self._busy = True
        if not leads:
            mine.done.wait()
            # Woken to write the queue (our item is still in it), or with our item written.
            leads = mine.leads
            mine.done.clear()
        if leads:
            self._write_queue()  # our item is at the head of the queue
        if mine.error is not None:
            raise mine.error

    def _write_queue(self) -> None:
        """Write one batch from the head of the queue, then hand on to the next caller."""
        with self._lock:
            batch = self._queue[: self.max_batch]
            del self._queue[: self.max_batch]
        try:
            self._write([queued.item for queued in batch])
            with self._lock:
                self.batches += 1
                self.items += len(batch)
        # Whatever the write raises belongs to every caller of the batch, who re-raises it.
        except BaseException as exc:
            for queued in batch:
                queued.error = exc
        finally:
            with self._lock:
                if self._queue:
                    self._queue[0].leads = True
                    self._queue[0].done.set()
                else:
                    self._busy = False
            for queued in batch:
                queued.leads = False
                queued.done.set()

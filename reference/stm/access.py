"""Access statistics written behind the request, for a short-term backend whose writes
are slow.

A turn's retrieval counts an access to what it returns: `last_accessed_at`,
`access_count`, and under a sliding-window or importance strategy a new `expires_at` and
`importance`. On Chroma that is a metadata update of 7-16 ms, more than the query itself,
so the store does not wait for it: `AccessBuffer` keeps each accessed record's statistics
after its latest access, and the store writes them in one batch later (`flush`: when the
buffer is full, before a sweep, on `dispose`).

No reader can tell. Every read of the store lays the buffered statistics over the rows it
fetched (`overlaid`) before it decides liveness, ranks, counts or pages, so a record
whose window an access extended is live to every read before the write lands, and a
sweep sees every access. The buffer holds absolute values (the count after the access,
not "+1"), so laying them over a row is right whether or not the row already has them;
a flush that lands while a read is fetching makes that read fetch again.

What the buffer does not give: durability and cross-process visibility before a flush. A
process that dies loses the access statistics since its last flush (at most `limit`
records), and another process reading the same collection sees them only after the
flush; run the sweeper in the process that serves the users, as for user activity
(`ForgettingEngine.note_activity`). Two threads accessing one record at once may count
one access, as two processes always could.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import TypeVar

from reference.models import MemoryRecord, RetentionUpdate

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class AccessWrite:
    """A record's access statistics after an access, as they are to be stored."""

    record_id: str
    user_id: str
    last_accessed_at: float
    access_count: int
    expires_at: float | None
    importance: float

    @classmethod
    def after(
        cls, record: MemoryRecord, now: float, retention: RetentionUpdate | None = None
    ) -> AccessWrite:
        """The statistics of `record` (as just read) after one access at `now`, with the
        expiry and importance of `retention` if given, else its own."""
        return cls(
            record_id=record.record_id,
            user_id=record.user_id,
            last_accessed_at=now,
            access_count=record.access_count + 1,
            expires_at=record.expires_at if retention is None else retention.expires_at,
            importance=record.importance if retention is None else retention.importance,
        )

    def apply(self, record: MemoryRecord) -> MemoryRecord:
        """`record` with these statistics."""
        return replace(
            record,
            last_accessed_at=self.last_accessed_at,
            access_count=self.access_count,
            expires_at=self.expires_at,
            importance=self.importance,
        )


class AccessBuffer:
    """The access statistics not yet written, by record id. Thread-safe."""

    def __init__(self, *, limit: int) -> None:
        """`limit`: how many records the buffer holds before `put` asks for a flush
        (0: every put asks, i.e. write-through)."""
        self.limit = limit
        self._lock = threading.Lock()
        self._pending: dict[str, AccessWrite] = {}
        self._by_user: dict[str, set[str]] = {}
        # Bumped by every flush: a read that saw it change fetches again.
        self._generation = 0

    def __len__(self) -> int:
        return len(self._pending)

    def put(self, writes: Iterable[AccessWrite]) -> bool:
        """Buffer these (a later write of a record replaces an earlier one); whether the
        buffer is now over its limit and should be flushed."""
        with self._lock:
            for write in writes:
                self._pending[write.record_id] = write
                self._by_user.setdefault(write.user_id, set()).add(write.record_id)
            return len(self._pending) > self.limit

    def has_user(self, user_id: str) -> bool:
        """Whether any buffered write belongs to this user."""
        return user_id in self._by_user

    def ids(self) -> list[str]:
        """The buffered record ids."""
        with self._lock:
            return list(self._pending)

    def discard(self, record_ids: Collection[str]) -> None:
        """Forget the writes of these records (deleted or replaced: nothing to write)."""
        with self._lock:
            for record_id in record_ids:
                write = self._pending.pop(record_id, None)
                if write is not None:
                    owned = self._by_user[write.user_id]
                    owned.discard(record_id)
                    if not owned:
                        del self._by_user[write.user_id]

    def overlaid(
        self, read: Callable[[], T], lay: Callable[[T, Mapping[str, AccessWrite]], T]
    ) -> T:
        """`read()`'s result with the buffered writes laid over it by `lay`. If a flush
        lands while `read` runs, its rows may be from before or after it: read again."""
        while True:
            generation = self._generation
            result = read()
            with self._lock:
                if self._generation == generation:
                    return lay(result, self._pending) if self._pending else result

    def flush(self, write: Callable[[list[AccessWrite]], None]) -> int:
        """Store every buffered write with `write` (one batch); how many. If `write`
        raises, the buffer keeps them for the next flush. Reads wait while it runs."""
        with self._lock:
            batch = list(self._pending.values())
            if not batch:
                return 0
            self._generation += 1  # before the write: a read overlapping it reads again
            write(batch)
            self._pending.clear()
            self._by_user.clear()
            self._generation += 1
            return len(batch)


def lay_records(
    records: list[MemoryRecord], pending: Mapping[str, AccessWrite]
) -> list[MemoryRecord]:
    """`records` with the buffered statistics of each (a `lay` for `overlaid`)."""
    return [pending[r.record_id].apply(r) if r.record_id in pending else r for r in records]

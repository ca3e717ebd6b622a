"""Access statistics written behind the request, for a short-term backend whose writes
are slow.

A turn's retrieval counts an access to what it returns: `last_accessed_at`,
`access_count`, and under a sliding-window or importance strategy a new `expires_at` and
`importance`. On Chroma that is a metadata update of 7-16 ms, more than the query itself,
so the store does not wait for it: `AccessBuffer` keeps each accessed record's statistics
after its latest access, and the store writes them in one batch later (`flush`: on a
background thread when the buffer is full; before a sweep and on `dispose`, waited for).

No reader can tell. Every read of the store lays the buffered statistics over the rows it
fetched (`overlaid`) before it decides liveness, ranks, counts or pages, so a record
whose window an access extended is live to every read before the write lands, and a
sweep sees every access. The buffer holds absolute values (the count after the access,
not "+1"), so laying them over a row is right whether or not the row already has them.

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
    """The access statistics not yet written, by record id. Thread-safe.

    A flush takes the pending writes as one in-flight batch and writes it without holding
    the buffer's lock, so reads and new accesses never wait for it; readers lay the
    in-flight batch too (its values are absolute: right whether or not it has landed). A
    read that overlaps the moment a batch lands and leaves the buffer cannot tell whether
    its rows have it, so it reads again (at most once per flush).
    """

    def __init__(self, *, limit: int) -> None:
        """`limit`: how many records the buffer holds before `put` asks for a flush
        (0: every put asks)."""
        self.limit = limit
        self._lock = threading.Lock()
        self._flushing = threading.Lock()  # one flush at a time
        self._pending: dict[str, AccessWrite] = {}
        self._in_flight: dict[str, AccessWrite] = {}
        self._by_user: dict[str, set[str]] = {}  # over both
        # Bumped when a batch leaves the buffer: a read that saw it change reads again.
        self._generation = 0

    def __len__(self) -> int:
        with self._lock:
            return len(self._in_flight.keys() | self._pending.keys())

    def put(self, writes: Iterable[AccessWrite]) -> bool:
        """Buffer these (a later write of a record replaces an earlier one); whether the
        pending writes are now over the limit and should be flushed."""
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
            return list(self._in_flight.keys() | self._pending.keys())

    def discard(self, record_ids: Collection[str]) -> bool:
        """Forget the writes of these records (deleted or replaced: nothing to write);
        whether one of them was in a batch being written (which may still land)."""
        in_flight = False
        with self._lock:
            for record_id in record_ids:
                in_flight |= self._in_flight.pop(record_id, None) is not None
                self._pending.pop(record_id, None)
            self._index()
        return in_flight

    def overlaid(
        self, read: Callable[[], T], lay: Callable[[T, Mapping[str, AccessWrite]], T]
    ) -> T:
        """`read()`'s result with the buffered writes laid over it by `lay`."""
        while True:
            generation = self._generation
            result = read()
            with self._lock:
                if self._generation == generation:
                    if not self._pending and not self._in_flight:
                        return result
                    return lay(result, {**self._in_flight, **self._pending})

    def flush(self, write: Callable[[list[AccessWrite]], None]) -> int:
        """Store the pending writes with `write` (one batch), after any flush in flight;
        how many. If `write` raises, the buffer keeps them for the next flush."""
        with self._flushing:
            with self._lock:
                batch, self._pending = self._pending, {}
                self._in_flight = batch
            if not batch:
                return 0
            try:
                write(list(batch.values()))
            except BaseException:
                with self._lock:  # back, under any newer write of the same record
                    self._pending = {**self._in_flight, **self._pending}
                    self._in_flight = {}
                raise
            with self._lock:
                self._in_flight = {}
                self._generation += 1
                self._index()
            return len(batch)

    def wait(self) -> None:
        """Return once no flush is in flight."""
        with self._flushing:
            pass

    def _index(self) -> None:
        """Rebuild the by-user index (under the lock) after writes left the buffer."""
        self._by_user = {}
        for write in (*self._in_flight.values(), *self._pending.values()):
            self._by_user.setdefault(write.user_id, set()).add(write.record_id)


def lay_records(
    records: list[MemoryRecord], pending: Mapping[str, AccessWrite]
) -> list[MemoryRecord]:
    """`records` with the buffered statistics of each (a `lay` for `overlaid`)."""
    return [pending[r.record_id].apply(r) if r.record_id in pending else r for r in records]

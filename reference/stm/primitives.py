"""What a short-term backend writes: five primitives (`StmPrimitives`) and the typed
writes `_apply` executes.

Each operation is a checked request built by `ShortTermStore`'s public API: a backend
never validates input or reads the clock, it executes.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, NamedTuple

from reference.footprint import Usage, scanned_usage
from reference.models import Hit, MemoryRecord
from reference.stm.access import AccessWrite

if TYPE_CHECKING:  # base.py builds these operations and imports this module
    from reference.stm.filters import StmFilter
    from reference.text_interfaces import Embedder


class PutRecord(NamedTuple):
    """Insert or replace the record with this record_id. Returns None."""

    record: MemoryRecord
    #: A 1-D float32 or float64 array (`ShortTermStore._vector`), which a backend may
    #: not keep without copying; refused if zero.
    embedding: Any


class WriteAccess(NamedTuple):
    """Store these access statistics (absolute values, of records that were live and
    owned when read), now or behind the request (`reference.stm.access`); every read
    after this call must return them. Returns None."""

    writes: list[AccessWrite]


class DeleteRecords(NamedTuple):
    """Remove the records matching `filter`. Returns how many."""

    filter: StmFilter
    now: float


class PurgeRecords(NamedTuple):
    """Remove these records whatever their user or state. Returns how many existed."""

    record_ids: list[str]


StmWrite = PutRecord | WriteAccess | DeleteRecords | PurgeRecords


class StmPrimitives(ABC):
    """The primitives of a short-term backend; `ShortTermStore` builds its public API on
    them. Optional overrides: `_usage` (default: pages through `_scan`), `earliest_due`
    (default: cannot tell) and `flush_access` (a backend that buffers access writes)."""

    embedder: Embedder

    def _usage(self, now: float) -> Usage:
        """Pages through every record (`_scan`); a backend that keeps counters overrides."""
        return scanned_usage(
            lambda after, limit: self._scan(after, limit, None), self.embedder.dim, now
        )

    @abstractmethod
    def _apply(self, op: StmWrite) -> Any:
        """Execute one write (above); return what the operation's docstring says."""

    @abstractmethod
    def _fetch(self, flt: StmFilter, now: float) -> list[MemoryRecord]:
        """The records matching `flt` (`StmFilter.matches`), by (created_at, record_id)."""

    @abstractmethod
    def _search(
        self, embedding: Any, flt: StmFilter, k: int, now: float
    ) -> list[Hit[MemoryRecord]]:
        """Top-k matching records by cosine similarity (score = 1 - cosine distance),
        ties by record_id; `embedding` as in `PutRecord`, refused if zero."""

    @abstractmethod
    def _count(self, flt: StmFilter | None, now: float) -> int:
        """How many records match `flt`; None: the live records of the whole namespace."""

    @abstractmethod
    def _scan(self, after: str | None, limit: int, due_at: float | None) -> list[MemoryRecord]:
        """Up to `limit` records of the namespace (every user, any state) with record_id >
        `after`, in record_id order; with `due_at`, only candidates among which every
        record past `expires_at` or not active at that time (`scan_due` keeps those)."""

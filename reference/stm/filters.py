"""Which STM records of one user an operation applies to: shared by the store's public API
and its primitives."""

from __future__ import annotations

from dataclasses import dataclass

from reference.models import MemoryRecord, MemoryType
from reference.records import fast_init
from reference.validation import check_id


@fast_init
@dataclass(frozen=True, slots=True)
class StmFilter:
    """Which records of one user an operation applies to. Unset fields match everything."""

    user_id: str
    session_id: str | None = None
    record_ids: frozenset[str] | None = None
    types: frozenset[MemoryType] | None = None
    #: Include records past expires_at or not active (sweeps and forgetting only).
    include_dead: bool = False

    def __post_init__(self) -> None:
        check_id("user_id", self.user_id)
        if self.session_id is not None:
            check_id("session_id", self.session_id)
        for record_id in self.record_ids or ():
            check_id("record_ids", record_id)

    def matches(self, record: MemoryRecord, now: float) -> bool:
        """The in-memory meaning of the filter; real backends translate it to queries."""
        return (
            record.user_id == self.user_id
            and (self.session_id is None or record.session_id == self.session_id)
            and (self.record_ids is None or record.record_id in self.record_ids)
            and (self.types is None or record.type in self.types)
            and (self.include_dead or record.is_live(now))
        )

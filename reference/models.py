"""Records that every layer stores, with the metadata the forgetting strategies need.

Plain frozen dataclasses: they cross process boundaries (Ray) and sit on the hot path
of a turn, so they stay cheap. Validation of caller input lives in `validation.py`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Generic, TypeVar

from reference.records import fast_init

T = TypeVar("T")


class MemoryType(StrEnum):
    """What a memory is; typed TTLs and event rules key on it."""

    SESSION = "session"
    CONVERSATION = "conversation"  # an intentful utterance cached in STM
    INSTRUCTION = "instruction"
    PREFERENCE = "preference"
    PROFILE = "profile"
    FACT = "fact"
    ENTITY = "entity"
    KNOWLEDGE = "knowledge"
    SENSITIVE = "sensitive"
    #: An utterance consolidated from STM into LTM when its session ended (the LTM
    #: category of the same name; `reference.forgetting.consolidation`).
    EPISODE = "episode"


class Status(StrEnum):
    ACTIVE = "active"
    ARCHIVED = "archived"
    DELETED = "deleted"


class SessionStatus(StrEnum):
    ACTIVE = "active"
    CLOSED = "closed"


class Category(StrEnum):
    """Long-term memory categories: the `category` of `(user_id, category, key)`."""

    PREFERENCE = "preference"
    PROFILE = "profile"
    ENTITY = "entity"
    FACT = "fact"
    KNOWLEDGE = "knowledge"
    #: One utterance of an ended session, under a key of its own (`episode:<STM record
    #: id>`), so episodes never supersede each other or a fact.
    EPISODE = "episode"


@fast_init
@dataclass(frozen=True, slots=True)
class SessionState:
    """One conversation's gateway record (session layer)."""

    session_id: str
    user_id: str
    channel: str
    started_at: float
    last_active_at: float
    expires_at: float
    status: SessionStatus = SessionStatus.ACTIVE
    task_state: dict[str, Any] = field(default_factory=dict)


@fast_init
@dataclass(frozen=True, slots=True)
class MemoryRecord:
    """An utterance kept in short-term memory."""

    record_id: str
    user_id: str
    session_id: str
    text: str
    type: MemoryType
    created_at: float
    last_accessed_at: float
    access_count: int = 0
    importance: float = 5.0
    expires_at: float | None = None
    status: Status = Status.ACTIVE
    metadata: dict[str, str | int | float | bool] = field(default_factory=dict)

    def is_live(self, now: float) -> bool:
        return self.status is Status.ACTIVE and (self.expires_at is None or now < self.expires_at)


@fast_init
@dataclass(frozen=True, slots=True)
class Fact:
    """A structured long-term record, unique by `(user_id, category, key)`."""

    fact_id: str
    user_id: str
    category: Category
    key: str
    value: dict[str, Any]
    text: str
    version: int
    created_at: float
    updated_at: float
    last_accessed_at: float
    access_count: int = 0
    importance: float = 5.0
    expires_at: float | None = None
    status: Status = Status.ACTIVE
    #: Why an archived fact was archived (the audit's cause); None while it is active.
    archive_reason: str | None = None

    def is_live(self, now: float) -> bool:
        return self.status is Status.ACTIVE and (self.expires_at is None or now < self.expires_at)


@fast_init
@dataclass(frozen=True, slots=True)
class DuePage(Generic[T]):
    """One page of `scan_due`: the records due, and the cursor of the next page (None:
    this was the last page). A page may hold fewer records than asked and still not be
    the last one: the backend pages over candidates, the store keeps the due ones."""

    records: list[T]
    after: str | None


@dataclass(frozen=True, slots=True)
class RetentionUpdate:
    """What one access stores with a record or fact besides `last_accessed_at=now` and
    `access_count + 1`: its new expiry and importance (the forgetting policy decides them).

    `record_id` is an STM record id or an LTM fact id, depending on the layer it goes to.
    """

    record_id: str
    expires_at: float | None
    importance: float


@fast_init
@dataclass(frozen=True, slots=True)
class Hit(Generic[T]):
    """A retrieved record with its similarity score (cosine similarity, higher is closer)."""

    record: T
    score: float


@fast_init
@dataclass(frozen=True, slots=True)
class AuditEntry:
    """One change to long-term memory: who did what to which fact, and when."""

    audit_id: int
    fact_id: str
    user_id: str
    category: Category
    key: str
    action: str  # insert | update | archive | delete | erase | anonymise
    actor: str
    at: float
    version: int
    old_value: dict[str, Any] | None
    new_value: dict[str, Any] | None
    #: What caused the change: the rule, event, command or sweep that decided it
    #: ("" when the caller named none). Never a value: erasure leaves it as it is.
    cause: str


@dataclass(frozen=True, slots=True)
class Event:
    """A business event that may invalidate memories (consumed by the forgetting engine)."""

    name: str
    user_id: str
    at: float
    payload: dict[str, Any] = field(default_factory=dict)

"""A memory system under test: what the harness asks of it, and what it does natively.

The simulator replays a scenario against any system through this interface
(`memharness run --system NAME`). The reference goes through its own, richer path
(`memharness.sim.replay`); every other system (LangGraph's stores, mem0) is an adapter.

An adapter stores each `say` as one memory and answers probes by search. Expiry is
either **native** (the system's own TTL: the harness hands it the time to live the
strategy gives, and `capabilities.native_expiry` says its granularity, whether an
expired memory is hidden or deleted, and whether reads refresh it) or **managed by the
harness** (no native TTL: the harness applies the strategy's decisions through sweeps,
calling `delete`). Whatever the system does, `holds` says whether a memory is still
kept in any form, hidden included: that is what leakage and PII residency count.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal

if TYPE_CHECKING:
    from reference.embedding import Embedder
    from reference.settings import Settings


class Unsupported(Exception):
    """The system cannot do this (a report row says so; it is never dropped)."""

    def __init__(self, system: str, capability: str) -> None:
        super().__init__(f"{system} cannot {capability}")
        self.system = system
        self.capability = capability


@dataclass(frozen=True)
class NativeExpiry:
    """A system's own expiry."""

    #: The smallest step of a time to live it honours, in seconds (LangGraph: 60, mem0:
    #: 86,400): the adapter rounds the strategy's TTL to it as its system does.
    granularity_s: float
    #: What an expired memory is before (or without) a sweep: `readable` still (search
    #: and get return it until a sweep deletes it: LangGraph's stores by default),
    #: `hidden` from search but kept (mem0), or `deleted` at once.
    expired: Literal["readable", "hidden", "deleted"]
    #: Whether a read (search, get) restarts the time to live.
    refresh_on_read: bool
    #: Whose clock expiry reads: the harness's virtual clock (`set_clock`) or the
    #: server's wall clock (then virtual-time figures of expiry are not measurable).
    clock: Literal["virtual", "server"]


@dataclass(frozen=True)
class Capabilities:
    native_expiry: NativeExpiry | None  # None: the harness applies the strategy by sweeps
    delete: bool = True  # delete one memory by id
    delete_user: bool = True  # delete every memory of one user
    #: A deleted memory's text stays in the system (mem0's history table): `holds` stays
    #: true after `delete` and `delete_user`, and a forgotten fact counts as a leak.
    deletes_keep_text: bool = False
    notes: tuple[str, ...] = ()  # anything else a reader of the report should know


@dataclass(frozen=True)
class Hit:
    memory_id: str
    text: str
    score: float


@dataclass(frozen=True)
class Footprint:
    memories: int  # memories held (hidden ones included)
    bytes: int  # text and vectors held, as the system reports or as the adapter counts


@dataclass
class Written:
    """What `add` stored: the ids of the memories (usually one)."""

    memory_ids: list[str] = field(default_factory=list)


class MemoryAdapter(ABC):
    """One memory system, one namespace of its own (dropped by `close`)."""

    #: The name `--system` takes.
    name: ClassVar[str]
    #: The optional extra that installs it (`pip install -e '.[EXTRA]'`), or None.
    extra: ClassVar[str | None] = None
    capabilities: Capabilities

    @classmethod
    @abstractmethod
    def open(cls, *, namespace: str, embedder: Embedder, settings: Settings) -> MemoryAdapter:
        """A new, empty instance in its own `namespace` (a name no other replay uses),
        embedding with `embedder` (the harness's MiniLM, shared and cached), its servers
        where `settings` says (embedded by default, as for the reference)."""

    @abstractmethod
    def set_clock(self, at: float) -> None:
        """The harness's virtual time is now `at` (called before every step and sweep)."""

    @abstractmethod
    def add(
        self,
        *,
        user_id: str,
        session_id: str,
        text: str,
        at: float,
        metadata: dict[str, Any],
        ttl_s: float | None,
    ) -> Written:
        """Store what the user said at `at`; `ttl_s` is the strategy's time to live for
        it, unrounded (None: keep), used only by systems with native expiry: the adapter
        rounds it the way its system does (`NativeExpiry.granularity_s`)."""

    @abstractmethod
    def search(
        self, *, user_id: str, query: str, k: int, at: float, read_only: bool = False
    ) -> list[Hit]:
        """The user's `k` best memories for `query`, best first (only this user's).
        `read_only`: a probe's search, which must change nothing (no time to live
        refreshed on read); a turn's search reads as the system's app would."""

    @abstractmethod
    def holds(self, *, user_id: str, memory_id: str) -> bool:
        """Whether the memory is still kept in any form (hidden included). Read-only:
        it must not refresh a time to live or change anything else."""

    @abstractmethod
    def delete(self, *, user_id: str, memory_id: str) -> None:
        """Delete one memory for good (raise `Unsupported` if the system cannot)."""

    @abstractmethod
    def delete_user(self, *, user_id: str) -> None:
        """Delete every memory of the user (raise `Unsupported` if the system cannot)."""

    def sweep(self, at: float) -> int:
        """Run the system's own expiry sweep, if it has one; how many memories it removed."""
        return 0

    @abstractmethod
    def footprint(self) -> Footprint:
        """What the system holds now (read-only)."""

    @abstractmethod
    def close(self) -> None:
        """Drop everything this adapter stored and release its connections."""

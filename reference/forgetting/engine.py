"""`ForgettingEngine`: a strategy applied to the three layers; orchestration only.

Decisions are made by pure policy (`policy.py`) and by planners that turn records, a
strategy and a time into `ChangeBatch`es (`sweeper.py`, `consolidation.py`,
`forgetter.py`); one `Executor` applies them (`executor.py`). The engine holds what lives
between calls and runs planner + executor: expiry on write (`expires_at_on_write`) and
retention on access (a turn's retrieval over-fetches when the strategy decays,
re-ranks, and stores `on_access` for what it returns, one write per layer; a probe,
`touch=False`, changes nothing); users' activity (`activity.ActivityLog`, flushed by
sweeps); the open sessions to consolidate (`note_session`); the oracle's advice; forget
commands, events (`consume_events`: at-least-once delivery, one effect) and sweeps.

Lifecycle: built by `reference.factory` with the stores of one `MemorySystem`; it owns no
connections (the stores do). Not thread-safe across concurrent sweeps of one namespace:
run one sweeper per shard, as the simulator does, or per namespace under a lease
(`reference.maintenance` runs planner + executor, its lease checked before each batch).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from reference import chinese_words
from reference.clock import Clock
from reference.crypto import FieldCipher, seal_value, unseal_value
from reference.errors import ConfigurationError, InvalidInput
from reference.forgetting.activity import ActivityLog
from reference.forgetting.consolidation import SessionTracker, plan_session
from reference.forgetting.events import EventBus, IdempotentHandler
from reference.forgetting.executor import Executor
from reference.forgetting.forgetter import TopicSearch, plan_event, plan_forget
from reference.forgetting.plans import Consolidation, EventOutcome, ForgetReport, SweepStats
from reference.forgetting.sweeper import SweepInputs, plan_sweep, quiet_until
from reference.ltm.base import LongTermStore
from reference.ltm.common import as_real
from reference.models import Category, Event, Fact, Hit, MemoryRecord, MemoryType, RetentionUpdate
from reference.monitoring import MemoryCounters
from reference.policy.expiry import expires_at_on_write, on_access
from reference.policy.forget_commands import ForgetCommand
from reference.policy.oracle import OracleAdvice
from reference.policy.ranking import rerank
from reference.policy.strategy import Strategy
from reference.policy.sweep import due_rule
from reference.session.base import SessionStore
from reference.stm.base import ShortTermStore
from reference.text_interfaces import Embedder, PiiMasker
from reference.validation import check_id

#: Under a decay rule, retrieval scores this many times k candidates by similarity and
#: keeps the k best after decay: an old close match can lose to a fresh near one.
DEFAULT_OVERFETCH = 3
#: A forget topic removes records at least this similar to it (cosine, all-MiniLM-L6-v2:
#: "address" vs "My address is 12 Oak Street" is 0.54; vs unrelated requests < 0.35).
#: Key and wording matches apply whatever the score.
DEFAULT_FORGET_MIN_SIMILARITY = 0.5


class ForgettingEngine:
    """Applies one `Strategy` to a session, an STM and an LTM store (see module docstring)."""

    def __init__(
        self,
        *,
        strategy: Strategy,
        clock: Clock,
        session: SessionStore,
        stm: ShortTermStore,
        ltm: LongTermStore,
        embedder: Embedder,
        pii: PiiMasker,
        cipher: FieldCipher | None = None,
        oracle: OracleAdvice | None = None,
        forget_min_similarity: float = DEFAULT_FORGET_MIN_SIMILARITY,
        overfetch: int = DEFAULT_OVERFETCH,
    ) -> None:
        """`cipher` seals PII in LTM values; a strategy that encrypts needs one."""
        if not isinstance(strategy, Strategy):
            raise InvalidInput("strategy", f"must be a Strategy, got {type(strategy).__name__}")
        if strategy.pii is not None and strategy.pii.encrypt_ltm and cipher is None:
            raise ConfigurationError(
                f"strategy {strategy.name!r} encrypts PII in long-term memory and no "
                "encryption key is configured (MEMH_ENCRYPTION_KEY)"
            )
        if not 0.0 < forget_min_similarity <= 1.0:
            raise InvalidInput("forget_min_similarity", "must be in (0, 1]")
        if not 1 <= overfetch <= 20:
            raise InvalidInput("overfetch", f"must be 1 to 20, got {overfetch}")
        # jieba, once per process (PII detection, lexical retrieval): not on the first
        # Chinese turn.
        chinese_words.load()
        self.strategy = strategy
        self.due_rule = due_rule(strategy)  # what besides expiry makes a fact due
        self.clock = clock
        self.session = session
        self.stm = stm
        self.ltm = ltm
        self.embedder = embedder
        self.pii = pii
        self.cipher = cipher if strategy.pii is not None and strategy.pii.encrypt_ltm else None
        self.oracle = oracle
        self.forget_min_similarity = float(forget_min_similarity)
        self.overfetch = overfetch
        #: Whether retrieval re-ranks by recency (a decay rule), and whether an access
        #: changes expiry or importance (a sliding window or importance rule).
        self.reranks = strategy.decay is not None
        self.access_moves_expiry = strategy.sliding is not None or strategy.importance is not None
        #: Users' activity buffered between sweeps, and the archival mark.
        self.activity = ActivityLog()
        #: Sessions touched by turns and not yet consolidated (`consolidation.py`).
        self.sessions = SessionTracker()
        # Whether a sweep has shown the oracle every record (records written before the
        # advice came are not in its index): the first sweep after `advise` scans.
        self._oracle_scanned = False
        self._bus: tuple[EventBus, str, str] | None = None
        #: Growth, lifetimes, cleanups and retrieval hits (`reference.monitoring`).
        self.counters = MemoryCounters(clock)

    # ------------------------------------------------------------------ write
    def stm_expiry(self, kind: MemoryType, *, importance: float = 5.0) -> dict[str, Any]:
        """Keyword arguments for `ShortTermStore.add` that store the strategy's deadline."""
        now = self.clock.now()
        deadline = expires_at_on_write(self.strategy, kind=kind, importance=importance, now=now)
        if deadline is None:
            return {"never_expires": True}
        return {"ttl_s": deadline - now}

    def ltm_expires_at(self, category: Category, *, importance: float = 5.0) -> float | None:
        """The `expires_at` of a new LTM value of this category."""
        now = self.clock.now()
        return expires_at_on_write(self.strategy, kind=category, importance=importance, now=now)

    # ------------------------------------------------------------------ access
    def retrieve_stm(
        self, *, user_id: str, session_id: str, embedding: np.ndarray, k: int, touch: bool
    ) -> list[Hit[MemoryRecord]]:
        """The session's top-k under the strategy; with `touch`, the access is stored when
        a rule of the strategy reads it (sliding window, importance, decay)."""
        if not self.reranks and not self.access_moves_expiry:
            # No rule reads STM access statistics, so a read writes nothing: one Chroma
            # metadata update costs ~15 ms, most of the STM share of a turn's SLA.
            return self.stm.query(
                user_id=user_id, session_id=session_id, embedding=embedding, k=k, touch=False
            )
        hits = self.stm.query(
            user_id=user_id,
            session_id=session_id,
            embedding=embedding,
            k=self._fetch(k),
            touch=False,
        )
        now = self.clock.now()
        hits = rerank(hits, strategy=self.strategy, now=now, k=k)
        if not touch or not hits:
            return hits
        updates = self._updates([h.record for h in hits], now)
        self.stm.touch(
            user_id=user_id, updates=list(updates.values()), seen=[h.record for h in hits]
        )
        return [Hit(record=_accessed(h.record, updates, now), score=h.score) for h in hits]

    def retrieve_ltm(
        self, *, user_id: str, embedding: np.ndarray, k: int, touch: bool, text: str = ""
    ) -> list[Hit[Fact]]:
        """The user's top-k facts under the strategy (`text`, the query, is what lexical
        retrieval searches); with `touch`, the access is stored."""
        rule = self.strategy.lexical_retrieval
        how: dict[str, Any] = {}
        if rule is not None and text:
            how = {"text": text, "lexical": True, "rrf_k": rule.rrf_k}
        if touch and not self.reranks and not self.access_moves_expiry:
            return self.ltm.query(user_id=user_id, embedding=embedding, k=k, **how)
        hits = self.ltm.query(
            user_id=user_id, embedding=embedding, k=self._fetch(k), touch=False, **how
        )
        now = self.clock.now()
        hits = rerank(hits, strategy=self.strategy, now=now, k=k)
        if not touch or not hits:
            return hits
        updates = self._updates([h.record for h in hits], now)
        self.ltm.touch(user_id=user_id, updates=list(updates.values()))
        return [Hit(record=_accessed(h.record, updates, now), score=h.score) for h in hits]

    def _fetch(self, k: int) -> int:
        return min(1000, k * self.overfetch) if self.reranks else k

    def _updates(self, records: list[Any], now: float) -> dict[str, RetentionUpdate]:
        out = {}
        for record in records:
            ident = record.fact_id if isinstance(record, Fact) else record.record_id
            change = on_access(self.strategy, record, now=now)
            out[ident] = RetentionUpdate(ident, change.expires_at, change.importance)
        return out

    # ------------------------------------------------------------------ activity
    def note_activity(self, user_id: str, at: float | None = None) -> None:
        """Remember that the user was active (a turn); written out by the next sweep."""
        self.activity.note(user_id, self.clock.now() if at is None else at)

    def flush_activity(self) -> int:
        """Write the buffered activity to the LTM store; returns how many users."""
        return self.activity.flush(self.ltm)

    def quiet_until(self) -> float:
        """A moment before which a sweep has nothing to do (`sweeper.quiet_until`)."""
        return quiet_until(self.sweep_inputs(), self.strategy)

    # ------------------------------------------------------------------ consolidation
    def note_session(self, user_id: str, session_id: str) -> None:
        """A turn of this session (called by the facade): under `promotion: consolidate`
        it is consolidated once it ends (`consolidation.py`)."""
        if self.strategy.consolidates:
            self.sessions.note(user_id, session_id, self.clock.now() + self.session.ttl_s)

    def consolidate_session(
        self, *, user_id: str, session_id: str, dry_run: bool = False
    ) -> Consolidation:
        """Consolidate a session that ended now (it was closed), whatever the sweeps do
        next; nothing under `promotion: rules`."""
        check_id("user_id", user_id)
        check_id("session_id", session_id)
        if not self.strategy.consolidates:
            return Consolidation()
        now = self.clock.now()
        batch = plan_session(self.stm, self.ltm, self.strategy, user_id, session_id, now)
        return self.executor().consolidation(batch, dry_run=dry_run)

    # ------------------------------------------------------------------ PII in LTM
    def seal(
        self,
        *,
        user_id: str,
        category: Category,
        key: str,
        value: dict[str, Any],
        visible: dict[str, Any] | None = None,
    ) -> dict:
        """The value as LTM stores it: PII masked, the original sealed (when encrypting);
        `visible`: the value as extracted from the masked text (`crypto.seal_value`)."""
        if self.cipher is None:
            return value if visible is None else visible
        return seal_value(
            value,
            cipher=self.cipher,
            aad=_owner(user_id, category, key),
            pii=self.pii,
            now=self.clock.now(),
            visible=visible,
        )

    def reveal(self, fact: Fact) -> dict[str, Any]:
        """The original value of a fact (unsealed), or its stored value if not sealed."""
        if self.cipher is None:
            return fact.value
        aad = _owner(fact.user_id, fact.category, fact.key)
        return unseal_value(fact.value, cipher=self.cipher, aad=aad)

    # ------------------------------------------------------------------ oracle
    def advise(self, oracle: OracleAdvice | None) -> None:
        """The harness's knowledge of future probes, for a strategy with `oracle: true`."""
        if oracle is not None and not isinstance(oracle, OracleAdvice):
            raise InvalidInput("oracle", f"must be OracleAdvice, got {type(oracle).__name__}")
        self.oracle = oracle

    def note_written(self, memory: MemoryRecord | Fact) -> None:
        """A turn wrote `memory` (a record, or a fact's new version): under an oracle
        strategy, the advice learns until when it is needed."""
        self.counters.note_written(memory)
        if self.strategy.oracle and self.oracle is not None:
            self.oracle.written(memory)

    # ------------------------------------------------------------------ forget commands
    def forget(self, command: ForgetCommand, *, user_id: str, session_id: str) -> ForgetReport:
        """Carry out a forget command (every strategy): see `forgetter.plan_forget`."""
        check_id("user_id", user_id)
        check_id("session_id", session_id)
        started = time.perf_counter()
        search = TopicSearch(self.embedder, self.pii, self.forget_min_similarity)
        with self.counters.timed("forget"):
            plan = plan_forget(
                command,
                stm=self.stm,
                ltm=self.ltm,
                search=search,
                user_id=user_id,
                session_id=session_id,
            )
            report = plan.report(command, self.executor().apply(plan.batch), started)
        self.counters.removed("forget", stm=len(report.stm_removed), ltm=len(report.ltm_erased))
        return report

    # ------------------------------------------------------------------ events
    def handle_event(self, event: Event, *, event_id: str | None = None) -> EventOutcome:
        """Apply the strategy's invalidations for one business event (`event_id`: its id
        on the bus, kept in the audit's cause). Idempotent: a redelivered event finds its
        memories already archived or gone."""
        if not isinstance(event, Event):
            raise InvalidInput("event", f"must be an Event, got {type(event).__name__}")
        user_id = check_id("event.user_id", event.user_id)
        with self.counters.timed("event"):
            batch = plan_event(
                event, stm=self.stm, ltm=self.ltm, strategy=self.strategy, event_id=event_id
            )
            done = self.executor().apply(batch)
        self.counters.removed(
            "event", stm=done.stm_removed, ltm=done.ltm.archived + done.ltm.deleted
        )
        return EventOutcome(
            event.name, user_id, done.stm_removed, done.ltm.archived, done.ltm.deleted
        )

    def attach_bus(
        self, bus: EventBus, *, group: str = "forgetting", consumer: str = "engine"
    ) -> None:
        """Consume `bus` at the start of every sweep (the group is created if missing)."""
        check_id("group", group)
        check_id("consumer", consumer)
        bus.ensure_group(group)
        self._bus = (bus, group, consumer)

    def consume_attached(self) -> int:
        """Apply every event waiting on the attached bus for this engine's consumer (its
        own pending ones first, after a restart), exactly once in effect; returns how
        many were settled (what `sweep` does first)."""
        if self._bus is None:
            return 0
        bus, group, consumer = self._bus
        handler = IdempotentHandler(bus, group, self._apply)
        total = 0
        while settled := bus.consume(group=group, consumer=consumer, handler=handler):
            total += settled
        return total

    def _apply(self, event_id: str, event: Event) -> None:
        self.handle_event(event, event_id=event_id)

    # ------------------------------------------------------------------ sweeps
    def sweep(self, *, dry_run: bool = False, full_scan: bool = False) -> SweepStats:
        """One sweep of every layer in batches of `strategy.sweep_batch_size`, visiting
        what is due (`full_scan`: every record; the same decisions); a dry run counts the
        decisions and changes nothing. See `sweeper.plan_sweep`."""
        strategy = self.strategy
        if strategy.oracle and not self._oracle_scanned:
            full_scan = True  # the advice learns every record it was not told about
        if not dry_run:
            self.stm.flush_access()  # the store holds what was accessed, as it stands
        if strategy.oracle and self.oracle is None:
            raise ConfigurationError(
                f"strategy {strategy.name!r} sweeps on the harness's advice: pass OracleAdvice"
                " to ForgettingEngine.advise (or build_memory_system(oracle=...)) first"
            )
        started = time.perf_counter()
        events = 0
        if not dry_run:
            events = self.consume_attached()
            self.flush_activity()
        batches = plan_sweep(self.sweep_inputs(), strategy, self.clock.now(), full_scan=full_scan)
        stats = self.executor().sweep(batches, dry_run=dry_run, events=events, started=started)
        if full_scan and not dry_run:
            self._oracle_scanned = True
        return stats

    def sweep_inputs(self, *, sessions: SessionTracker | None = None) -> SweepInputs:
        """What the sweep planner reads: the stores and this engine's state (`sessions`:
        another tracker of open sessions, as the maintenance process pulls them)."""
        return SweepInputs(
            session=self.session,
            stm=self.stm,
            ltm=self.ltm,
            activity=self.activity,
            sessions=self.sessions if sessions is None else sessions,
            oracle=self.oracle,
            rule=self.due_rule,
        )

    def executor(
        self,
        *,
        sessions: SessionTracker | None = None,
        before_batch: Callable[[], None] | None = None,
    ) -> Executor:
        """An executor over this engine's stores and state; `before_batch` runs before
        each batch that writes (the maintenance process's lease check)."""
        return Executor(
            session=self.session,
            stm=self.stm,
            ltm=self.ltm,
            embedder=self.embedder,
            activity=self.activity,
            sessions=self.sessions if sessions is None else sessions,
            oracle=self.oracle,
            seal=self.seal,
            expires_at=self.ltm_expires_at,
            written=self.note_written,
            before_batch=before_batch,
            counters=self.counters,
        )


def _owner(user_id: str, category: Category, key: str) -> str:
    # The AAD binds a sealed value to its row: copied elsewhere, it does not decrypt.
    return f"{user_id}/{category.value}/{key}"


def _accessed(record: Any, updates: Mapping[str, RetentionUpdate], now: float) -> Any:
    """The record as the touch stored it."""
    ident = record.fact_id if isinstance(record, Fact) else record.record_id
    update = updates[ident]
    importance = as_real(update.importance) if isinstance(record, Fact) else update.importance
    return dataclasses.replace(
        record,
        last_accessed_at=now,
        access_count=record.access_count + 1,
        expires_at=update.expires_at,
        importance=importance,
    )


__all__ = ["DEFAULT_FORGET_MIN_SIMILARITY", "DEFAULT_OVERFETCH", "ForgettingEngine"]

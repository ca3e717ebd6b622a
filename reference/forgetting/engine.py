"""`ForgettingEngine`: a strategy's pure decisions (`policy.py`) applied to the three layers.

What it does, and when (the facade calls the first three inside a turn):

- **write**: every new STM record and LTM value gets `expires_at_on_write` (None: never);
- **access**: a turn's retrieval over-fetches when the strategy decays, re-ranks, and
  stores `on_access` (sliding windows, importance) for what it returns, in one write per
  layer; a probe (`touch=False`) changes nothing;
- **forget commands**: `forget` (see `forgetter.py`), under every strategy;
- **events**: `handle_event` applies `invalidations_for`; `consume_events` reads them
  from an `EventBus` through `IdempotentHandler` (at-least-once delivery, one effect);
- **sweeps**: `sweep` (see `sweeper.py`), in batches, with a dry run;
- **consolidation** (`promotion: consolidate`): each turn notes its session
  (`note_session`); a sweep consolidates the sessions that have ended into LTM episodes,
  and `consolidate_session` one that was closed (see `consolidation.py`).

Activity for archival: every turn notes the user's time in a buffer that `sweep` (and
`flush_activity`) writes to the LTM store's per-user activity table, so a turn pays no
extra write. A process that dies loses at most the activity since its last sweep, which
can only make a user look idle for that long: archival is 90 days out by default.

Lifecycle: built by `reference.factory` with the stores of one `MemorySystem`; it owns no
connections (the stores do). Not thread-safe across concurrent sweeps of one namespace:
run one sweeper per shard, as the simulator does, or per namespace under a lease
(`reference.maintenance`: the maintenance process, `before_batch` checks the lease).
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Collection, Mapping
from typing import Any

import numpy as np

from reference.clock import Clock
from reference.crypto import FieldCipher, seal_value, unseal_value
from reference.errors import ConfigurationError, InvalidInput
from reference.forgetting.commands import ForgetCommand
from reference.forgetting.consolidation import Consolidation, SessionTracker, consolidate_session
from reference.forgetting.events import EventBus, IdempotentHandler
from reference.forgetting.forgetter import ForgetReport, apply_forget
from reference.forgetting.policy import (
    Action,
    OracleAdvice,
    due_rule,
    expires_at_on_write,
    invalidations_for,
    on_access,
    rerank,
)
from reference.forgetting.strategy import Strategy
from reference.forgetting.sweeper import SweepStats, run_sweep
from reference.ltm.base import FactChanges, LongTermStore, LtmFilter, due_margin
from reference.ltm.common import as_real
from reference.models import (
    Category,
    Event,
    Fact,
    Hit,
    MemoryRecord,
    MemoryType,
    RetentionUpdate,
)
from reference.session.base import SessionStore
from reference.stm.base import ShortTermStore, StmFilter
from reference.text import Embedder, PiiMasker
from reference.validation import check_id

#: Under a decay rule, retrieval scores this many times k candidates by similarity and
#: keeps the k best after decay: an old close match can lose to a fresh near one.
DEFAULT_OVERFETCH = 3
#: A forget topic removes records at least this similar to it (cosine, all-MiniLM-L6-v2:
#: "address" vs "My address is 12 Oak Street" is 0.54; vs unrelated requests < 0.35).
#: Key and wording matches apply whatever the score.
DEFAULT_FORGET_MIN_SIMILARITY = 0.5
EVENTS_ACTOR = "events"


@dataclasses.dataclass(frozen=True, slots=True)
class EventOutcome:
    """What one event invalidated."""

    event: str
    user_id: str
    stm_removed: int
    ltm_archived: int
    ltm_deleted: int


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
        self.last_sweep_at: float | None = None
        self._activity: dict[str, float] = {}
        # Users whose last activity is at or before this were archived by an earlier
        # sweep of this engine (the archival pass visits the users after it).
        self._inactive_through = float("-inf")
        # Whether a sweep has shown the oracle every record (records written before the
        # advice came are not in its index): the first sweep after `advise` scans.
        self._oracle_scanned = False
        self._activity_lock = threading.Lock()
        #: Sessions touched by turns and not yet consolidated (`consolidation.py`).
        self.sessions = SessionTracker()
        #: Called before each batch of changes a sweep applies; raising stops the sweep
        #: with nothing of that batch applied (the maintenance process's lease check).
        self.before_batch: Callable[[], None] | None = None
        self._bus: tuple[EventBus, str, str] | None = None

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
    @property
    def reranks(self) -> bool:
        """Whether retrieval re-ranks by recency (the strategy has a decay rule)."""
        return self.strategy.decay is not None

    @property
    def access_moves_expiry(self) -> bool:
        """Whether an access changes expiry or importance (sliding or importance rule)."""
        return self.strategy.sliding is not None or self.strategy.importance is not None

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
        self, *, user_id: str, embedding: np.ndarray, k: int, touch: bool
    ) -> list[Hit[Fact]]:
        """The user's top-k facts under the strategy; with `touch`, the access is stored."""
        if touch and not self.reranks and not self.access_moves_expiry:
            return self.ltm.query(user_id=user_id, embedding=embedding, k=k)
        hits = self.ltm.query(user_id=user_id, embedding=embedding, k=self._fetch(k), touch=False)
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
        at = self.clock.now() if at is None else at
        with self._activity_lock:
            if at > self._activity.get(user_id, float("-inf")):
                self._activity[user_id] = at

    def flush_activity(self) -> int:
        """Write the buffered activity to the LTM store; returns how many users."""
        with self._activity_lock:
            pending, self._activity = self._activity, {}
        if pending:
            try:
                self.ltm.mark_active(activity=pending)
            except BaseException:
                with self._activity_lock:  # keep it for the next attempt
                    for user, at in pending.items():
                        self._activity[user] = max(at, self._activity.get(user, at))
                raise
        return len(pending)

    def last_active(self, user_ids: Collection[str]) -> dict[str, float]:
        """Stored activity, overlaid with what is buffered and not yet written."""
        seen = self.ltm.last_active(user_ids=user_ids)
        with self._activity_lock:
            for user in user_ids:
                if user in self._activity:
                    seen[user] = max(self._activity[user], seen.get(user, float("-inf")))
        return seen

    def quiet_until(self) -> float:
        """A moment before which a sweep (of the due index) has nothing to do: no
        session to remove or consolidate, no record or fact due, no user's inactivity
        period over (buffered activity included), nothing the oracle lets go. -inf when
        a store cannot tell without a query (Redis, Chroma and PostgreSQL: their sweeps
        look). A read: it changes nothing."""
        strategy = self.strategy
        moments = [
            self.session.earliest_expiry(),
            self.stm.earliest_due(),
            self.ltm.earliest_due(self.due_rule),
        ]
        if strategy.consolidates:
            moments.append(self.sessions.earliest())
        if strategy.archival is not None:
            after = self._inactive_through
            with self._activity_lock:
                buffered = [at for at in self._activity.values() if at > after]
            first = min([self.ltm.earliest_activity_after(after), *buffered])
            moments.append(first + strategy.archival.inactive_s)
        if strategy.oracle:
            moments.append(float("-inf") if self.oracle is None else self.oracle.earliest())
        return min(moments)

    def newly_inactive(self, now: float, *, advance: bool) -> list[str]:
        """The users who became inactive (`archival.inactive_s` since their last
        activity, buffered activity included) since the previous sweep that advanced the
        mark; `advance` moves it to them (a real sweep does, a dry run does not)."""
        archival = self.strategy.archival
        if archival is None:
            return []
        until = now - archival.inactive_s
        stored = self.ltm.inactive_users(
            after=self._inactive_through, until=until + due_margin(now)
        )
        with self._activity_lock:
            buffered = dict(self._activity)
        seen = {
            u: max(at, buffered.get(u, at))
            for u, at in self.ltm.last_active(user_ids=stored).items()
        }
        seen.update((u, at) for u, at in buffered.items() if u not in seen)
        idle = {
            u: at
            for u, at in seen.items()
            if at > self._inactive_through and now >= at + archival.inactive_s
        }
        if advance and idle:
            self._inactive_through = max(idle.values())
        return sorted(idle)

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
        return consolidate_session(self, user_id, session_id, self.clock.now(), dry_run=dry_run)

    def drop_activity(self, user_id: str) -> None:
        """Forget the user's activity everywhere (erasure of everything about them)."""
        with self._activity_lock:
            self._activity.pop(user_id, None)
        self.ltm.forget_activity(user_id=user_id)

    # ------------------------------------------------------------------ PII in LTM
    def seal(self, *, user_id: str, category: Category, key: str, value: dict[str, Any]) -> dict:
        """The value as LTM stores it: PII masked, the original sealed (when encrypting)."""
        if self.cipher is None:
            return value
        return seal_value(
            value,
            cipher=self.cipher,
            aad=_owner(user_id, category, key),
            pii=self.pii,
            now=self.clock.now(),
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
        if self.strategy.oracle and self.oracle is not None:
            self.oracle.written(memory)

    # ------------------------------------------------------------------ forget commands
    def forget(self, command: ForgetCommand, *, user_id: str, session_id: str) -> ForgetReport:
        """Carry out a forget command (every strategy): see `forgetter.apply_forget`."""
        check_id("user_id", user_id)
        check_id("session_id", session_id)
        return apply_forget(self, command, user_id=user_id, session_id=session_id)

    # ------------------------------------------------------------------ events
    def handle_event(self, event: Event) -> EventOutcome:
        """Apply the strategy's invalidations for one business event. Idempotent: a
        redelivered event finds its memories already archived or gone."""
        if not isinstance(event, Event):
            raise InvalidInput("event", f"must be an Event, got {type(event).__name__}")
        user_id = check_id("event.user_id", event.user_id)
        if not any(rule.event == event.name for rule in self.strategy.events):
            return EventOutcome(event.name, user_id, 0, 0, 0)
        records = self.stm.records(filter=StmFilter(user_id=user_id, include_dead=True))
        facts = self.ltm.facts(filter=LtmFilter(user_id=user_id, include_dead=True))
        decisions = invalidations_for(event, records, facts, strategy=self.strategy)
        # STM has no archived state: invalidating a short-lived record removes it.
        stm_ids = {d.record_id for d in decisions if d.layer == "stm"}
        archive = {
            d.record_id for d in decisions if d.layer == "ltm" and d.action is Action.ARCHIVE
        }
        delete = {d.record_id for d in decisions if d.layer == "ltm" and d.action is Action.DELETE}
        removed = self.stm.purge(record_ids=stm_ids) if stm_ids else 0
        counts = self.ltm.apply_changes(
            FactChanges(delete=frozenset(delete), archive=frozenset(archive)), actor=EVENTS_ACTOR
        )
        return EventOutcome(event.name, user_id, removed, counts.archived, counts.deleted)

    def attach_bus(
        self, bus: EventBus, *, group: str = "forgetting", consumer: str = "engine"
    ) -> None:
        """Consume `bus` at the start of every sweep (the group is created if missing)."""
        check_id("group", group)
        check_id("consumer", consumer)
        bus.ensure_group(group)
        self._bus = (bus, group, consumer)

    def consume_events(
        self, bus: EventBus, *, group: str, consumer: str, max_events: int = 100
    ) -> int:
        """Apply every event waiting for `consumer` of `group` (its own pending ones first,
        after a restart), exactly once in effect; returns how many were settled."""
        handler = IdempotentHandler(bus, group, lambda _id, event: self._apply(event))
        total = 0
        while settled := bus.consume(
            group=group, consumer=consumer, handler=handler, max_events=max_events
        ):
            total += settled
        return total

    def consume_attached(self) -> int:
        """Consume the attached bus, if any (what `sweep` does first)."""
        if self._bus is None:
            return 0
        bus, group, consumer = self._bus
        return self.consume_events(bus, group=group, consumer=consumer)

    def _apply(self, event: Event) -> None:
        self.handle_event(event)

    # ------------------------------------------------------------------ sweeps
    def sweep(self, *, dry_run: bool = False, full_scan: bool = False) -> SweepStats:
        """One sweep of every layer in batches of `strategy.sweep_batch_size`, visiting
        what is due (`full_scan`: every record; the same decisions); a dry run counts the
        decisions and changes nothing. See `sweeper.run_sweep`."""
        if self.strategy.oracle and not self._oracle_scanned:
            full_scan = True  # the advice learns every record it was not told about
        if not dry_run:
            self.stm.flush_access()  # the store holds what was accessed, as it stands
        stats = run_sweep(self, dry_run=dry_run, full_scan=full_scan)
        if full_scan and not dry_run:
            self._oracle_scanned = True
        if not dry_run:
            self.last_sweep_at = self.clock.now()
        return stats

    def sweep_due(self) -> bool:
        """Whether `strategy.sweep_interval_s` has passed since the last sweep."""
        last = self.last_sweep_at
        return last is None or self.clock.now() >= last + self.strategy.sweep_interval_s

    def maybe_sweep(self) -> SweepStats | None:
        """Sweep if one is due (a simulator calls this between turns, never in a turn)."""
        return self.sweep() if self.sweep_due() else None


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


__all__ = ["EventOutcome", "ForgetReport", "ForgettingEngine", "SweepStats"]

"""The executor: applies `ChangeBatch`es through the stores' write methods, and counts.

One executor serves sweeps, consolidation, forget commands and events: `sweep` runs a
planner's stream of batches (applying each before the next is planned) and returns
`SweepStats`; `apply` applies one batch and returns what the stores reported.

Within a batch the order is fixed: LTM (changes by id, erasures by filter in order, new
episodes), then STM, then sessions, then in-process bookkeeping (the open-session
tracker, the oracle's advice, the archival mark). Writing LTM first means a failure
leaves the source records in STM for the next attempt.

Before a batch that writes (`ChangeBatch.writes`; each page of expired sessions counts
as one) the executor calls `before_batch` when one is given: the maintenance process
checks its lease there (`reference.maintenance.lease`), and a hook that raises stops the
run with nothing of that batch applied.

A dry run applies nothing and counts what the batches would do: no session is examined
(the session store has no read-only way to list expired sessions), no episode written.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from reference.forgetting.activity import ActivityLog
from reference.forgetting.consolidation import SessionTracker, episode_key, episode_value
from reference.forgetting.erasure import erase_user
from reference.forgetting.plans import Applied, ChangeBatch, Consolidation, LayerStats, SweepStats
from reference.ltm.base import LongTermStore
from reference.models import Category, Fact
from reference.monitoring import MemoryCounters
from reference.policy.oracle import OracleAdvice
from reference.session.base import SessionStore
from reference.stm.base import ShortTermStore
from reference.text_interfaces import Embedder

#: The LTM value of a new episode (`ForgettingEngine.seal`: PII sealed) and its expiry
#: (`ForgettingEngine.ltm_expires_at`), both called with keyword arguments.
Sealer = Callable[..., dict[str, Any]]
Expiry = Callable[..., float | None]


@dataclass(slots=True)
class Executor:
    """Applies batches to one namespace's stores (module docstring). Built by the engine
    (`ForgettingEngine.executor`) for each run; it owns nothing."""

    session: SessionStore
    stm: ShortTermStore
    ltm: LongTermStore
    embedder: Embedder
    activity: ActivityLog
    sessions: SessionTracker
    oracle: OracleAdvice | None
    seal: Sealer
    expires_at: Expiry
    written: Callable[[Fact], None]
    before_batch: Callable[[], None] | None = None
    #: Where a sweep counts itself (`reference.monitoring`): completed or raised, its
    #: duration, the memories it ended.
    counters: MemoryCounters | None = None

    def apply(self, batch: ChangeBatch) -> Applied:
        """Apply one batch, after the `before_batch` hook (a sweep's pages of expired
        sessions go through `sweep`)."""
        if batch.writes:
            self._check()
        return self._apply(batch)

    def sweep(
        self, batches: Iterable[ChangeBatch], *, dry_run: bool, events: int, started: float
    ) -> SweepStats:
        """Apply (or, in a dry run, count) a sweep planner's batches; `started` is the
        `time.perf_counter()` the sweep began at, `events` how many it consumed first."""
        try:
            stats = self._sweep(batches, dry_run=dry_run, events=events, started=started)
        except Exception:  # counted as a failed sweep whatever it was, then re-raised
            if self.counters is not None and not dry_run:
                self.counters.cleanup("sweep", ok=False, seconds=time.perf_counter() - started)
            raise
        if self.counters is not None and not dry_run:
            self.counters.swept(stats.by_layer, stats.duration_s)
        return stats

    def _sweep(
        self, batches: Iterable[ChangeBatch], *, dry_run: bool, events: int, started: float
    ) -> SweepStats:
        layers = {"session": LayerStats(), "stm": LayerStats(), "ltm": LayerStats()}
        sessions = consolidated = 0
        episodes: list[Fact] = []
        dropped: list[tuple[str, str, str]] = []
        for batch in batches:
            if batch.expire_sessions:
                if not dry_run:
                    stats = layers["session"]
                    for removed in self._expire_sessions(batch.expire_sessions):
                        stats.batches += 1
                        stats.examined += removed
                        stats.expired += removed
                continue
            if batch.layer:
                stats = layers[batch.layer]
                stats.batches += 1
                stats.examined += batch.examined
                stats.count(batch.decisions)
            if batch.consolidated is not None:
                sessions += 1
                consolidated += len(batch.episodes)
                dropped.extend(batch.dropped)
            if dry_run:
                continue
            if batch.writes:
                self._check()
            episodes.extend(self._apply(batch).episodes)
        session, stm, ltm = layers["session"], layers["stm"], layers["ltm"]
        return SweepStats(
            examined=session.examined + stm.examined + ltm.examined,
            expired=session.expired + stm.expired + ltm.expired,
            archived=session.archived + stm.archived + ltm.archived,
            anonymised=session.anonymised + stm.anonymised + ltm.anonymised,
            deleted=session.deleted + stm.deleted + ltm.deleted,
            duration_s=time.perf_counter() - started,
            dry_run=dry_run,
            events=events,
            by_layer=layers,
            sessions_consolidated=sessions,
            consolidated=consolidated,
            episodes=tuple(episodes),
            consolidation_dropped=tuple(dropped),
        )

    def consolidation(self, batch: ChangeBatch, *, dry_run: bool) -> Consolidation:
        """Apply one session's consolidation batch (`consolidation.plan_session`)."""
        written = () if dry_run else tuple(self.apply(batch).episodes)
        return Consolidation(1, batch.session_records, written, len(batch.episodes), batch.dropped)

    def _check(self) -> None:
        if self.before_batch is not None:
            self.before_batch()

    def _expire_sessions(self, page: int) -> Iterable[int]:
        """Remove expired sessions a page at a time until a page comes back short."""
        while True:
            self._check()
            removed = self.session.sweep_expired(batch_size=page)
            yield removed
            if removed < page:
                return

    def _apply(self, batch: ChangeBatch) -> Applied:
        out = Applied()
        if batch.ltm:
            out.ltm = self.ltm.apply_changes(batch.ltm, actor=batch.actor)
        for flt in batch.ltm_erase:
            self.ltm.erase(filter=flt, actor=batch.actor, cause=batch.cause)
        if batch.episodes:
            out.episodes = self._write_episodes(batch)
        if batch.stm_delete is not None:
            out.stm_removed += self.stm.delete(filter=batch.stm_delete)
        if batch.stm_remove:
            out.stm_removed += self.stm.purge(record_ids=batch.stm_remove)
        if batch.reset_session is not None:
            user_id, session_id = batch.reset_session
            out.context_cleared = self.session.reset(user_id=user_id, session_id=session_id)
        if batch.delete_user is not None:
            erased = erase_user(
                session=self.session,
                stm=self.stm,
                ltm=self.ltm,
                user_id=batch.delete_user,
                actor=batch.actor,
                cause=batch.cause,
            )
            out.stm_removed += erased.stm
            out.sessions_removed = erased.sessions
            out.context_cleared = True  # every session of the user is gone
            self.activity.drop(batch.delete_user)
        if batch.consolidated is not None:
            self.sessions.done(*batch.consolidated)
        for user_id, session_id, ends_at in batch.track:
            self.sessions.note(user_id, session_id, ends_at)
        if self.oracle is not None:
            for layer, ident in batch.oracle_drops:
                self.oracle.drop(layer, ident)
        if batch.inactive_through is not None:
            self.activity.inactive_through = batch.inactive_through
        return out

    def _write_episodes(self, batch: ChangeBatch) -> list[Fact]:
        vectors = self.embedder.embed([e.record.text for e in batch.episodes])
        written = []
        for episode, vector in zip(batch.episodes, vectors, strict=True):
            record, score = episode.record, episode.importance
            key = episode_key(record.record_id)
            fact = self.ltm.upsert(
                user_id=record.user_id,
                category=Category.EPISODE,
                key=key,
                value=self.seal(
                    user_id=record.user_id,
                    category=Category.EPISODE,
                    key=key,
                    value=episode_value(record),
                ),
                text=record.text,
                importance=score,
                actor=batch.actor,
                cause=batch.cause,
                embedding=vector,
                expires_at=_earliest(
                    self.expires_at(Category.EPISODE, importance=score), episode.not_after
                ),
            )
            self.written(fact)
            written.append(fact)
        return written


def _earliest(a: float | None, b: float | None) -> float | None:
    """The earlier of two deadlines (None: never)."""
    return b if a is None else a if b is None else min(a, b)


__all__ = ["Executor"]

"""TTL of `reference.langgraph_store`: refresh on read, what a sweep finds expired, and
the background sweeper, a thread that sweeps every interval of the store's clock.

A wall clock is waited on for the interval itself; a virtual clock moves only when told
to, so the thread looks at it every `VIRTUAL_POLL_S` wall seconds and sweeps once the
interval has passed on it: TTL tests advance the clock instead of sleeping.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import threading
from collections.abc import Callable

from reference.clock import Clock
from reference.langgraph_mapping import is_item, vector_key
from reference.ltm.base import LongTermStore
from reference.ltm.filters import LtmFilter
from reference.models import Fact, RetentionUpdate
from reference.policy.sweep import DueRule

#: How often (wall seconds) the sweeper looks at a virtual clock.
VIRTUAL_POLL_S = 0.01


class TtlSweeper:
    """Calls `sweep` every `interval_s` seconds of `clock` in a daemon thread, until
    `stop`. One sweep at a time: the thread runs them one after another."""

    def __init__(self, sweep: Callable[[], object], clock: Clock, interval_s: float) -> None:
        if not interval_s > 0:
            raise ValueError(f"sweep_interval_minutes: must be > 0, got {interval_s / 60}")
        self._sweep = sweep
        self._clock = clock
        self._interval_s = interval_s
        self._stop = threading.Event()
        self.future: concurrent.futures.Future[None] = concurrent.futures.Future()
        self.sweeps = 0
        self._thread = threading.Thread(target=self._loop, name="reference-store-ttl", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        poll = self._interval_s if self._clock.is_wall_clock else VIRTUAL_POLL_S
        next_at = self._clock.now() + self._interval_s
        try:
            while not self._stop.wait(poll):
                if self._clock.now() >= next_at:
                    self._sweep()
                    self.sweeps += 1
                    next_at = self._clock.now() + self._interval_s
        finally:
            self.future.set_result(None)

    def stop(self, timeout: float | None = None) -> bool:
        """Ask the thread to stop; whether it stopped within `timeout` seconds."""
        self._stop.set()
        self._thread.join(timeout)
        return not self._thread.is_alive()


def refresh_facts(ltm: LongTermStore, facts: list[Fact], now: float) -> list[Fact]:
    """Extend each item fact's expiry (and its vector facts') by its TTL from `now` (an
    access: `LongTermStore.touch`); returns the facts as they now are. A fact without a
    TTL is left as it is."""
    by_user: dict[str, list[RetentionUpdate]] = {}
    fresh: list[Fact] = []
    for fact in facts:
        minutes = fact.value["ttl_minutes"]
        if minutes is None:
            fresh.append(fact)
            continue
        expires = now + float(minutes) * 60.0
        updates = by_user.setdefault(fact.user_id, [])
        updates.append(RetentionUpdate(fact.fact_id, expires, fact.importance))
        keys = frozenset(vector_key(fact.key, i) for i in range(fact.value["vectors"]))
        if keys:
            flt = LtmFilter(user_id=fact.user_id, keys=keys)
            updates.extend(
                RetentionUpdate(v.fact_id, expires, v.importance) for v in ltm.facts(filter=flt)
            )
        fresh.append(dataclasses.replace(fact, expires_at=expires))
    for user, updates in by_user.items():
        ltm.touch(user_id=user, updates=updates)
    return fresh


def expired_items(ltm: LongTermStore, now: float) -> list[Fact]:
    """The item facts past their expiry at `now` (the LTM's due index, paged)."""
    found: list[Fact] = []
    after: str | None = None
    while True:
        page = ltm.scan_due(now=now, rule=DueRule(), after=after)
        found.extend(
            f
            for f in page.records
            if is_item(f) and f.expires_at is not None and f.expires_at <= now
        )
        if page.after is None:
            return found
        after = page.after


def fact_gone(ltm: LongTermStore, fact: Fact) -> bool:
    """Whether the fact is no longer stored at all (a sweep removed it)."""
    flt = LtmFilter(user_id=fact.user_id, fact_ids=frozenset({fact.fact_id}), include_dead=True)
    return not ltm.facts(filter=flt)

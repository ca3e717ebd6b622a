"""The deadlines a store keeps as its namespace's only writer (`deadlines.py` of each layer).

A store on a server asks it nothing before the earliest deadline it wrote, and a wrong
deadline loses a sweep, so: on the in-memory stores, whose own indexes are exact, the
deadlines the same writes leave behind are never later than theirs, over random
timelines under every built-in strategy; on the embedded servers, each layer asks
nothing just before a deadline and finds what is due at it. `tests/test_due_index.py`
runs its sweeps-against-full-scans timelines on a sole writer's embedded stores too.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reference.clock import VirtualClock
from reference.errors import BackendUnavailable, InvalidInput
from reference.factory import build_memory_system
from reference.keys import Namespace
from reference.ltm.deadlines import LtmDeadlines
from reference.ltm.filters import LtmFilter
from reference.ltm.memory_store import InMemoryLongTermStore
from reference.models import Category
from reference.policy.loading import BUILTINS
from reference.policy.sweep import DueRule, next_due_at
from reference.session.deadlines import SessionDeadlines
from reference.session.memory_store import InMemorySessionStore
from reference.settings import Settings
from reference.stm.deadlines import StmDeadlines, due_at
from reference.stm.memory_store import InMemoryShortTermStore
from reference.system import MemorySystem
from reference.text_interfaces import Embedder
from tests.conftest import T0
from tests.test_due_index import oracle
from tests.test_engine import drop_embedded_namespace
from tests.test_forgetting_properties import KEY, Model, run, step

_count = iter(range(10**9))


@contextlib.contextmanager
def built(
    embedder: Embedder, data_dir: Path, name: str, *, sole_writer: bool = False
) -> Iterator[tuple[MemorySystem, VirtualClock]]:
    namespace = Namespace(f"sole{next(_count)}")
    clock = VirtualClock(T0)
    backend = "embedded" if sole_writer else "memory"
    system = build_memory_system(
        Settings(backend=backend, data_dir=data_dir, prefix=namespace.prefix, encryption_key=KEY),  # type: ignore[arg-type]
        clock=clock,
        embedder=embedder,
        namespace=namespace,
        strategy=name,
        oracle=oracle(),
        sole_writer=sole_writer,
    )
    try:
        yield system, clock
    finally:
        system.dispose()
        if sole_writer:
            drop_embedded_namespace(data_dir, namespace)


def check_bounds(system: MemorySystem, where: str) -> None:
    """The deadlines kept beside the in-memory stores are their own exact indexes' for
    every memory they hold (a memory a filter removed may stay listed: earlier only)."""
    engine = system._engine()
    session, stm, ltm = system.session, system.stm, system.ltm
    assert isinstance(session, InMemorySessionStore)
    assert isinstance(stm, InMemoryShortTermStore)
    assert isinstance(ltm, InMemoryLongTermStore)
    assert session.deadlines is not None and stm.deadlines is not None
    assert ltm.deadlines is not None
    for (user_id, session_id), entry in session._sessions.items():
        kept = session.deadlines._expiry.get(f"{user_id}\x00{session_id}")
        assert kept == entry.expires_at, f"{where}: session {session_id}"
    for record_id, record in stm._by_id.items():
        assert stm.deadlines._due.get(record_id) == due_at(record), f"{where}: {record_id}"
    rule = engine.due_rule
    for fact_id, fact in ltm._facts.items():
        due = next_due_at(fact, rule)
        kept_due = ltm.deadlines._due_at(fact_id, rule)
        assert kept_due == (math.inf if due is None else due), f"{where}: {fact_id}"
    expiries = [e.expires_at for e in session._sessions.values()]
    assert session.deadlines.earliest() <= min(expiries, default=math.inf), where
    assert stm.deadlines.earliest() <= stm.earliest_due(), where
    assert ltm.deadlines.earliest(rule) <= ltm.earliest_due(rule), where
    for after in (-math.inf, engine.activity.inactive_through, engine.clock.now() - 1):
        kept = ltm.deadlines.earliest_activity_after(after)
        assert kept == ltm.earliest_activity_after(after), where


@pytest.mark.parametrize("name", list(BUILTINS))
def test_the_deadlines_kept_are_never_later_than_the_in_memory_stores_own(
    name: str, embedder: Embedder, data_dir: Path
) -> None:
    @settings(
        max_examples=40,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(steps=st.lists(step, min_size=5, max_size=40))
    def replay(steps: list[tuple[Any, ...]]) -> None:
        with built(embedder, data_dir, name) as (system, clock):
            system.session.deadlines = SessionDeadlines()
            system.stm.deadlines = StmDeadlines()
            system.ltm.deadlines = LtmDeadlines()
            model = Model()
            for i, (action, *args) in enumerate(steps):
                run(system, model, clock, action, args)
                check_bounds(system, f"{name} step {i} ({action})")
            for _ in range(3):  # everything time-bound falls due, and is swept
                clock.advance(100 * 86400.0)
                system.sweep()
                check_bounds(system, f"{name} at the end")

    replay()


def counting(store: Any, name: str) -> list[int]:
    """Count the calls of one of `store`'s backend primitives."""
    calls: list[int] = []
    method: Callable[..., Any] = getattr(store, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return method(*args, **kwargs)

    setattr(store, name, counted)
    return calls


def test_a_sole_writers_session_store_asks_nothing_before_an_expiry_and_sweeps_at_it(
    embedder: Embedder, data_dir: Path
) -> None:
    with built(embedder, data_dir, "keep_all", sole_writer=True) as (system, clock):
        session = system.session
        calls = counting(session, "_sweep")
        session.create(user_id="u1", session_id="s1")
        expiry = T0 + session.ttl_s
        assert session.earliest_expiry() == expiry
        clock.set(expiry - 0.001)
        assert session.sweep_expired() == 0 and calls == []
        session.get(user_id="u1", session_id="s1")  # slides the TTL
        assert session.earliest_expiry() == expiry - 0.001 + session.ttl_s
        clock.set(session.earliest_expiry())
        assert session.sweep_expired() == 1 and len(calls) == 1
        assert session.earliest_expiry() == math.inf


def test_a_sole_writers_stm_asks_nothing_before_a_deadline_and_finds_it_at_it(
    embedder: Embedder, data_dir: Path
) -> None:
    with built(embedder, data_dir, "keep_all", sole_writer=True) as (system, clock):
        stm = system.stm
        calls = counting(stm, "_scan")
        added = stm.add(user_id="u1", session_id="s1", text="I like jazz.", ttl_s=100, force=True)
        assert added.record is not None
        clock.set(T0 + 99.999)
        assert stm.scan_due(now=clock.now()).records == [] and calls == []
        clock.set(T0 + 100)
        due = stm.scan_due(now=clock.now()).records
        assert [r.record_id for r in due] == [added.record.record_id] and len(calls) == 1
        stm.purge(record_ids=[added.record.record_id])
        assert stm.earliest_due() == math.inf


def test_a_sole_writers_ltm_asks_nothing_before_a_deadline_and_finds_it_at_it(
    embedder: Embedder, data_dir: Path
) -> None:
    with built(embedder, data_dir, "keep_all", sole_writer=True) as (system, clock):
        ltm = system.ltm
        rule = DueRule(archive_grace_s=50.0)
        scans, lookups = counting(ltm, "_scan"), counting(ltm, "_lookup")
        expiring = ltm.upsert(
            user_id="u1",
            category=Category.PREFERENCE,
            key="music",
            value={"value": "jazz"},
            text="likes jazz",
            expires_at=T0 + 100,
        )
        archived = ltm.upsert(
            user_id="u1",
            category=Category.PREFERENCE,
            key="food",
            value={"value": "soup"},
            text="likes soup",
        )
        clock.set(T0 + 10)
        ltm.archive(filter=LtmFilter(user_id="u1", keys=frozenset({"food"})))
        assert ltm.earliest_due(rule) == T0 + 60
        clock.set(T0 + 59.999)
        assert ltm.scan_due(now=clock.now(), rule=rule).records == [] and scans == []
        clock.set(T0 + 60)
        due = ltm.scan_due(now=clock.now(), rule=rule).records
        assert [f.fact_id for f in due] == [archived.fact_id] and len(scans) == 1
        clock.set(T0 + 100)
        due = ltm.scan_due(now=clock.now(), rule=DueRule()).records
        assert [f.fact_id for f in due] == [expiring.fact_id]
        ltm.mark_active(activity={"u1": T0 + 5})
        assert ltm.inactive_users(after=T0, until=T0 + 4.999) == [] and lookups == []
        assert ltm.inactive_users(after=T0, until=T0 + 5) == ["u1"] and len(lookups) == 1


def test_a_write_that_may_have_landed_leaves_a_store_blind() -> None:
    kept = StmDeadlines()
    kept.failed(InvalidInput("text", "refused before writing"))
    assert kept.earliest() == math.inf
    kept.failed(BackendUnavailable("lost the reply", in_doubt=True))
    assert kept.earliest() == -math.inf

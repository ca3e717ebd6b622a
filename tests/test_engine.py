"""The forgetting engine on every built-in strategy, on the in-memory and the embedded real
backends, built through the factory as a user would. Time only moves on the virtual clock.

What each strategy returns before and after its deadlines, with and without a sweep;
sweep statistics and dry runs; business events (in process and through the bus, with
redelivery); archival and its grace period; PII sealed in LTM and anonymised, with the
stores' raw contents scanned; the factory's choices.
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import chromadb.errors
import psycopg
import pytest
import redis

from reference.clock import VirtualClock
from reference.crypto import generate_key
from reference.errors import ConfigurationError, InvalidInput
from reference.factory import build_event_bus, build_memory_system, default_strategy
from reference.forgetting.plans import EventOutcome
from reference.keys import Namespace
from reference.ltm.embedded_pg import start_embedded_postgres
from reference.ltm.filters import REDACTED, LtmFilter
from reference.ltm.migrations import drop_schema
from reference.models import Event, Status
from reference.pii import RegexPiiMasker, contains_raw_pii
from reference.policy.importance import expiry_delay, score_after_access
from reference.policy.loading import BUILTINS, load_strategy
from reference.policy.oracle import OracleAdvice
from reference.policy.rules import DAY_S
from reference.policy.strategy import Strategy
from reference.session.base import SessionStore
from reference.session.embedded_redis import start_embedded_redis
from reference.settings import LongTermSettings, Settings, ShortTermSettings
from reference.stm.chroma_client import make_chroma_client
from reference.stm.chroma_store import ChromaShortTermStore
from reference.stm.filters import StmFilter
from reference.system import MemorySystem
from reference.text_interfaces import Embedder
from tests.conftest import T0
from tests.fixtures.readable import readable

HOUR = 3600.0
ALICE, BOB = "alice", "bob"
KEY = generate_key()
SAYS = {
    "book": "Please book a table for two at 7pm at Luigi's.",  # instruction: STM only
    "address": "My address is 12 Oak Street, Springfield.",  # profile: STM + LTM address
    "shipping": "I always want deliveries by SF Express.",  # preference: STM + LTM shipping
}
ALL_STM, ALL_LTM = frozenset(SAYS), frozenset({"address", "shipping"})
# STM holds the masked text (the address is personal data): names by what is stored.
NAMES = {RegexPiiMasker(cache_size=0).mask(text): name for name, text in SAYS.items()}

MakeSystem = Callable[..., MemorySystem]


@pytest.fixture(params=["memory", "embedded"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def make_system(
    backend: str, clock: VirtualClock, namespace: Namespace, data_dir: Path, embedder: Embedder
) -> Iterator[MakeSystem]:
    """`make(strategy, k=5, **build_kwargs)`: a system on this test's backend and namespace.
    Embedded tables, collection and keys are dropped afterwards. A built-in named here
    (or given) runs with inline promotion only (`promotion: rules`): these tests pin each layer's
    deadlines, and consolidation would move STM records to LTM as their session ends
    (tests/test_consolidation.py covers it)."""
    built: list[MemorySystem] = []

    def make(strategy: Any = "keep_all", *, k: int = 5, **kwargs: Any) -> MemorySystem:
        if isinstance(strategy, str) and strategy in BUILTINS:
            strategy = load_strategy(strategy)
        if isinstance(strategy, Strategy) and strategy.consolidates:
            strategy = strategy.with_params({"promotion": "rules", "consolidation": None})
        system = build_memory_system(
            settings(backend, namespace, data_dir, k=k),
            clock=clock,
            embedder=embedder,
            namespace=namespace,
            strategy=strategy,
            **kwargs,
        )
        built.append(system)
        return system

    yield make
    for system in built:
        system.dispose()
    if backend == "embedded":
        drop_embedded_namespace(data_dir, namespace)


def drop_embedded_namespace(data_dir: Path, namespace: Namespace) -> None:
    """Remove a test namespace from the embedded PostgreSQL, Chroma and Redis."""
    with psycopg.connect(start_embedded_postgres(data_dir / "pg").url) as conn:
        drop_schema(conn, namespace)
    # Chroma says a collection is missing with NotFoundError (or ValueError, older clients).
    with contextlib.suppress(chromadb.errors.NotFoundError, ValueError):
        make_chroma_client(None, data_dir).delete_collection(namespace.stm_collection)
    client = redis_client(data_dir)
    keys = list(client.scan_iter(namespace.key_pattern()))
    if keys:
        client.delete(*keys)


def settings(backend: str, namespace: Namespace, data_dir: Path, *, k: int = 5) -> Settings:
    return Settings(
        backend=backend,  # type: ignore[arg-type]
        data_dir=data_dir,
        prefix=namespace.prefix,
        encryption_key=KEY,  # type: ignore[arg-type]
        stm=ShortTermSettings(top_k=k),
        ltm=LongTermSettings(top_k=k),
    )


def redis_client(data_dir: Path) -> redis.Redis:
    return redis.Redis.from_url(start_embedded_redis(data_dir / "redis").url, decode_responses=True)


def seed(system: MemorySystem, user: str = ALICE, session: str = "s1") -> None:
    for text in SAYS.values():
        system.turn(user_id=user, session_id=session, text=text)


def visible(
    system: MemorySystem, user: str = ALICE, session: str = "s1"
) -> tuple[set[str], set[str]]:
    """What a probe retrieves: names of STM utterances, keys of LTM facts (known ones)."""
    recalled = system.recall(user_id=user, session_id=session, query="address deliveries table")
    stm = {NAMES[h.record.text] for h in recalled.stm_hits if h.record.text in NAMES}
    return stm, {h.record.key for h in recalled.ltm_hits if h.record.key in ALL_LTM}


def stored(system: MemorySystem, user: str = ALICE) -> tuple[set[str], set[str]]:
    """What the stores still hold, dead or alive."""
    records = system.stm.records(filter=StmFilter(user_id=user, include_dead=True))
    facts = system.ltm.facts(filter=LtmFilter(user_id=user, include_dead=True))
    return {NAMES.get(r.text, r.text) for r in records}, {f.key for f in facts}


def live(system: MemorySystem, user: str) -> tuple[set[str], set[str]]:
    """What the stores return to any live read (lazy expiry), whatever k is."""
    records = system.stm.records(filter=StmFilter(user_id=user))
    facts = system.ltm.facts(filter=LtmFilter(user_id=user))
    return {NAMES[r.text] for r in records if r.text in NAMES}, {
        f.key for f in facts if f.key in ALL_LTM
    }


# --------------------------------------------------------------------------- timelines

KEEP_EVERYTHING = OracleAdvice(needed_until=lambda memory: math.inf)
# Per strategy: (offset from T0, STM names, LTM keys) that a probe returns at that moment.
TIMELINES: dict[str, list[tuple[float, frozenset[str], frozenset[str]]]] = {
    "keep_all": [(400 * DAY_S, ALL_STM, ALL_LTM)],
    "fixed_ttl": [(7 * DAY_S - 1, ALL_STM, ALL_LTM), (7 * DAY_S, frozenset(), frozenset())],
    "typed_ttl": [
        (HOUR - 1, ALL_STM, ALL_LTM),
        (HOUR, frozenset({"address", "shipping"}), ALL_LTM),
        (30 * DAY_S - 1, frozenset({"address", "shipping"}), ALL_LTM),
        (30 * DAY_S, frozenset({"address"}), frozenset({"address"})),
        (400 * DAY_S, frozenset({"address"}), frozenset({"address"})),
    ],
    "recency_decay": [(400 * DAY_S, ALL_STM, ALL_LTM)],
    "event_driven": [(400 * DAY_S, ALL_STM, ALL_LTM)],
    "hybrid": [
        (HOUR - 1, ALL_STM, ALL_LTM),
        (HOUR, frozenset({"address", "shipping"}), ALL_LTM),
        (30 * DAY_S, frozenset({"address"}), frozenset({"address"})),
        (89 * DAY_S, frozenset({"address"}), frozenset({"address"})),  # archival is at 90 d
    ],
    "oracle": [(400 * DAY_S, ALL_STM, ALL_LTM)],
}


@pytest.mark.parametrize("sweeping", [False, True], ids=["lazy", "swept"])
@pytest.mark.parametrize("name", sorted(TIMELINES))
def test_what_each_strategy_returns_before_and_after_its_deadlines(
    make_system: MakeSystem, clock: VirtualClock, name: str, sweeping: bool
) -> None:
    system = make(make_system, name)
    seed(system)
    assert visible(system) == (ALL_STM, ALL_LTM)
    for offset, stm, ltm in TIMELINES[name]:
        clock.set(T0 + offset)
        assert visible(system) == (stm, ltm), f"{name} at T0+{offset}s"
        if sweeping:
            stats = system.sweep()
            assert visible(system) == (stm, ltm)
            # What a probe no longer sees is gone from the stores too.
            assert stored(system) == (stm, ltm), f"{name} swept at T0+{offset}s"
            # It visited what was due, and decided on each thing it visited at most once.
            decided = stats.expired + stats.archived + stats.anonymised + stats.deleted
            assert stats.examined - stats.by_layer["session"].examined <= decided + len(stm) + len(
                ltm
            )


def make(make_system: MakeSystem, name: str, **kwargs: Any) -> MemorySystem:
    if name == "oracle":
        kwargs.setdefault("oracle", KEEP_EVERYTHING)
    return make_system(name, **kwargs)


def test_sliding_window_lives_while_accessed(make_system: MakeSystem, clock: VirtualClock) -> None:
    system = make_system("sliding_window", k=1)
    for name, text in SAYS.items():  # one user each: no turn touches another's records
        system.turn(user_id=name, session_id=f"{name}-s", text=text)
    clock.set(T0 + 23 * HOUR)
    asked = system.turn(user_id="address", session_id="address-s", text="What is my address?")
    assert NAMES[asked.stm_hits[0].record.text] == "address"
    assert asked.ltm_hits[0].record.key == "address"
    assert asked.ltm_hits[0].record.expires_at == T0 + 47 * HOUR
    clock.set(T0 + 24 * HOUR)
    assert live(system, "book") == live(system, "shipping") == (set(), set())
    assert live(system, "address") == ({"address"}, {"address"})
    clock.set(T0 + 47 * HOUR)
    assert live(system, "address") == (set(), set())
    system.sweep()
    assert system.stm.scan(limit=100) == [] and system.ltm.scan(limit=100) == []


def test_a_sweep_sees_the_window_an_access_moved_before_it_is_written(
    make_system: MakeSystem, clock: VirtualClock
) -> None:
    system = make_system("sliding_window", k=1)
    system.turn(user_id=ALICE, session_id="s1", text="My address is 12 Oak Street, Springfield.")
    clock.set(T0 + 23 * HOUR)
    asked = system.turn(user_id=ALICE, session_id="s1", text="What is my address?")
    assert asked.stm_hits, "the turn retrieved the address"
    clock.set(T0 + 30 * HOUR)  # past the write's 24 h window, inside the access's
    system.sweep()
    kept = system.stm.records(filter=StmFilter(user_id=ALICE))
    assert asked.stm_hits[0].record.record_id in {r.record_id for r in kept}
    if isinstance(system.stm, ChromaShortTermStore):  # the sweep wrote the access first
        collection = system.stm.client.get_collection(system.stm.namespace.stm_collection)
        row = collection.get(ids=[asked.stm_hits[0].record.record_id], include=["metadatas"])
        assert row["metadatas"][0]["last_accessed_at"] == T0 + 23 * HOUR


def test_importance_ttl_grows_with_access_and_decays(
    make_system: MakeSystem, clock: VirtualClock
) -> None:
    rule = load_strategy("importance").importance
    assert rule is not None
    first = expiry_delay(rule, 5.0)
    system = make_system("importance", k=1)
    for name, text in SAYS.items():
        system.turn(user_id=name, session_id=f"{name}-s", text=text)
    clock.set(T0 + 6 * DAY_S)
    asked = system.turn(user_id="address", session_id="address-s", text="What is my address?")
    score = score_after_access(rule, 5.0, 6 * DAY_S)
    second = 6 * DAY_S + expiry_delay(rule, score)
    fact = asked.ltm_hits[0].record
    assert fact.importance == pytest.approx(score, abs=1e-6)
    assert fact.expires_at == pytest.approx(T0 + second)
    assert second > first
    clock.set(T0 + first - 1)
    assert live(system, "book") == ({"book"}, set())
    assert live(system, "shipping") == ({"shipping"}, {"shipping"})
    clock.set(T0 + first)
    assert live(system, "book") == live(system, "shipping") == (set(), set())
    assert live(system, "address") == ({"address"}, {"address"})
    clock.set(T0 + second + 1)
    assert live(system, "address") == (set(), set())


def test_recency_decay_ranks_fresh_over_stale_and_deletes_nothing(
    make_system: MakeSystem, clock: VirtualClock, embedder: Embedder
) -> None:
    def ranked(system: MemorySystem) -> list[str]:
        return [
            h.record.key for h in system.recall(user_id=ALICE, session_id="s1", query=TEA).ltm_hits
        ]

    systems = {name: make_system(name, k=1) for name in ("keep_all", "recency_decay")}
    for system in systems.values():
        system.ltm.upsert(user_id=ALICE, category="preference", key="old", value={}, text=TEA)
    clock.advance(60 * DAY_S)
    for system in systems.values():
        system.ltm.upsert(user_id=ALICE, category="preference", key="new", value={}, text=COFFEE)
    assert ranked(systems["keep_all"]) == ["old"]
    assert ranked(systems["recency_decay"]) == ["new"]
    decayed = systems["recency_decay"]
    clock.advance(365 * DAY_S)
    decayed.sweep()
    assert decayed.ltm.count(filter=LtmFilter(user_id=ALICE)) == 2


TEA, COFFEE = "I like green tea in the morning", "I like black coffee in the morning"


# --------------------------------------------------------------------------- sweeps


def test_dry_run_counts_what_a_sweep_does_and_changes_nothing(
    make_system: MakeSystem, clock: VirtualClock
) -> None:
    system = make_system(load_strategy("fixed_ttl").with_params({"sweep_batch_size": 2}))
    seed(system)
    clock.set(T0 + 7 * DAY_S)
    before = stored(system)
    dry = system.sweep(dry_run=True)
    assert (dry.dry_run, dry.examined, dry.expired, dry.deleted) == (True, 5, 5, 0)
    assert stored(system) == before
    real = system.sweep()
    assert (real.expired, real.by_layer["stm"].expired, real.by_layer["ltm"].expired) == (6, 3, 2)
    assert real.by_layer["session"].expired == 1
    assert (real.by_layer["stm"].batches, real.by_layer["ltm"].batches) == (2, 1)
    assert real.examined_per_s > 0 and real.duration_s > 0
    assert stored(system) == (set(), set())
    again = system.sweep()
    assert (again.examined, again.expired) == (0, 0)


def test_archival_of_inactive_users_then_deletion_after_grace(
    make_system: MakeSystem, clock: VirtualClock
) -> None:
    system = make_system("hybrid")
    seed(system, ALICE)
    seed(system, BOB, "b1")
    system.sweep()
    clock.set(T0 + 60 * DAY_S)
    system.turn(user_id=BOB, session_id="s2", text="Please book a taxi to the airport at 6am.")
    clock.set(T0 + 90 * DAY_S - 1)
    assert system.sweep().archived == 0
    clock.set(T0 + 90 * DAY_S)
    assert visible(system, ALICE) == ({"address"}, {"address"})  # archival needs a sweep
    stats = system.sweep()
    assert (stats.by_layer["ltm"].archived, stats.by_layer["stm"].archived) == (1, 1)
    assert visible(system, ALICE) == (set(), set())
    [archived] = system.ltm.facts(filter=LtmFilter(user_id=ALICE, include_dead=True))
    assert (archived.key, archived.status) == ("address", Status.ARCHIVED)
    assert visible(system, BOB, "b1") == ({"address"}, {"address"})  # active at 60 d
    clock.set(T0 + 120 * DAY_S - 1)
    assert system.sweep().deleted == 0
    clock.set(T0 + 120 * DAY_S)
    assert system.sweep().by_layer["ltm"].deleted == 1
    assert stored(system, ALICE) == (set(), set())
    entries = system.ltm.audit_log(user_id=ALICE, fact_id=archived.fact_id)
    # The address is personal data: hybrid seals it and anonymises it after 24 h.
    assert [e.action for e in entries] == ["insert", "anonymise", "archive", "erase"]
    assert all(v in (None, REDACTED) for e in entries for v in (e.old_value, e.new_value))
    clock.set(T0 + 150 * DAY_S)
    system.sweep()
    assert visible(system, BOB, "b1") == (set(), set())


def test_oracle_keeps_exactly_what_the_advice_needs(
    make_system: MakeSystem, clock: VirtualClock
) -> None:
    system = make_system("oracle")
    seed(system)
    with pytest.raises(ConfigurationError, match="OracleAdvice"):
        system.sweep()
    system.advise(
        OracleAdvice(needed_until=lambda memory: math.inf if "address" in memory.text else None)
    )
    stats = system.sweep()
    assert (stats.deleted, stats.expired) == (3, 0)
    assert stored(system) == ({"address"}, {"address"})
    clock.set(T0 + 400 * DAY_S)
    assert visible(system) == ({"address"}, {"address"})


# --------------------------------------------------------------------------- events


def profile_updated(at: float, *fields: str) -> Event:
    return Event(name="profile_updated", user_id=ALICE, at=at, payload={"fields": list(fields)})


@pytest.mark.parametrize("name", ["event_driven", "hybrid"])
def test_profile_update_invalidates_the_old_address_in_stm_and_ltm(
    make_system: MakeSystem, clock: VirtualClock, name: str
) -> None:
    system = make_system(name)
    seed(system)
    clock.advance(60)
    outcome = system.handle_event(profile_updated(clock.now(), "address"))
    assert outcome == EventOutcome("profile_updated", ALICE, 1, 1, 0)
    assert visible(system) == ({"book", "shipping"}, {"shipping"})
    again = system.handle_event(profile_updated(clock.now(), "address"))  # redelivered
    assert again == EventOutcome("profile_updated", ALICE, 0, 0, 0)
    clock.advance(60)
    new = system.turn(user_id=ALICE, session_id="s1", text="My address is 5 Elm Road, Shelbyville.")
    assert new.promoted is not None and new.promoted.version == 2
    assert visible(system)[1] == {"address", "shipping"}  # what came after the event stays


def test_keep_all_has_no_event_rules(make_system: MakeSystem, clock: VirtualClock) -> None:
    system = make_system("keep_all")
    seed(system)
    clock.advance(60)
    assert system.handle_event(profile_updated(clock.now(), "address")).ltm_archived == 0
    assert visible(system) == (ALL_STM, ALL_LTM)


def test_order_completed_and_ticket_closed_invalidate_their_memories(
    make_system: MakeSystem, clock: VirtualClock
) -> None:
    system = make_system("event_driven")
    wishes = {"O1": "gift wrapping", "O2": "a paper bag"}  # two facts, not two versions
    for order, wish in wishes.items():
        said = system.turn(
            user_id=ALICE,
            session_id=order,
            text=f"I always want {wish} for this order.",
            metadata={"order_id": order},
        )
        assert said.promoted is not None and said.promoted.value["order_id"] == order
    broken = "My laptop screen is broken, please fix it."
    system.turn(user_id=ALICE, session_id="t", text=broken, metadata={"ticket_id": "T1"})
    clock.advance(60)
    done = Event(name="order_completed", user_id=ALICE, at=clock.now(), payload={"order_id": "O1"})
    assert system.handle_event(done) == EventOutcome("order_completed", ALICE, 1, 0, 1)
    assert system.handle_event(done) == EventOutcome("order_completed", ALICE, 0, 0, 0)
    facts = system.ltm.facts(filter=LtmFilter(user_id=ALICE, include_dead=True))
    assert [f.value["order_id"] for f in facts] == ["O2"]
    orders = system.stm.records(filter=StmFilter(user_id=ALICE, include_dead=True))
    assert sorted(str(r.metadata.get("order_id", "-")) for r in orders) == ["-", "O2"]
    closed = Event(name="ticket_closed", user_id=ALICE, at=clock.now(), payload={"ticket_id": 0})
    assert system.handle_event(closed).stm_removed == 0  # another ticket
    closed = Event(name="ticket_closed", user_id=ALICE, at=clock.now(), payload={"ticket_id": "T1"})
    assert system.handle_event(closed).stm_removed == 1
    left = system.stm.records(filter=StmFilter(user_id=ALICE, include_dead=True))
    assert [r.metadata.get("order_id") for r in left] == ["O2"]


def test_events_published_while_the_consumer_is_down_apply_once_at_the_next_sweep(
    make_system: MakeSystem,
    clock: VirtualClock,
    backend: str,
    namespace: Namespace,
    data_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bus = build_event_bus(settings(backend, namespace, data_dir), namespace=namespace, clock=clock)
    try:
        system = make_system("event_driven", event_bus=bus)
        seed(system)
        clock.advance(60)
        bus.publish(profile_updated(clock.now(), "address"))
        assert visible(system) == (ALL_STM, ALL_LTM)  # nothing consumed yet
        assert system.sweep().events == 1
        assert visible(system) == ({"book", "shipping"}, {"shipping"})
        # A crash after the effect and before the acknowledgement: redelivered, no new effect.
        bus.publish(Event(name="ticket_closed", user_id=ALICE, at=clock.now(), payload={}))
        engine = system.engine
        assert engine is not None
        applied = engine.handle_event
        calls: list[EventOutcome] = []

        def crash_once(event: Event, **kwargs: Any) -> EventOutcome:
            calls.append(applied(event, **kwargs))
            if len(calls) == 1:
                raise RuntimeError("consumer died before acknowledging")
            return calls[-1]

        monkeypatch.setattr(engine, "handle_event", crash_once)
        with pytest.raises(RuntimeError):
            system.sweep()
        assert bus.pending(group="forgetting") == 1
        assert system.sweep().events == 1
        assert len(calls) == 2 and calls[1] == EventOutcome("ticket_closed", ALICE, 0, 0, 0)
        assert bus.pending(group="forgetting") == 0
        assert system.sweep().events == 0
        assert visible(system) == ({"book", "shipping"}, {"shipping"})
    finally:
        bus.dispose()


# --------------------------------------------------------------------------- PII


PHONE, EMAIL = "13812345678", "alice@example.com"


def raw_contents(
    system: MemorySystem, backend: str, namespace: Namespace, data_dir: Path
) -> list[str]:
    """Every string the three stores hold for this namespace, as stored."""
    if backend == "memory":
        out = list(system.session.raw_values())  # type: ignore[attr-defined]
        for record in system.stm.scan(limit=10_000):
            out += [record.text, json.dumps(record.metadata, ensure_ascii=False)]
        ltm: Any = system.ltm
        out += [json.dumps(f.value, ensure_ascii=False) + f.text for f in ltm._facts.values()]
        out += [json.dumps([e.old_value, e.new_value], ensure_ascii=False) for e in ltm._audit]
        return out
    client = redis_client(data_dir)
    out = []
    for key in client.scan_iter(namespace.key_pattern()):
        kind = client.type(key)
        if kind == "hash":
            out += [f"{k}={v}" for k, v in client.hgetall(key).items()]
        elif kind == "list":
            out += client.lrange(key, 0, -1)
        elif kind == "set":
            out += list(client.smembers(key))
        elif kind == "zset":
            out += client.zrange(key, 0, -1)
        elif kind == "stream":
            out += [json.dumps(fields) for _, fields in client.xrange(key)]
        else:
            out.append(str(client.get(key)))
    collection = make_chroma_client(None, data_dir).get_collection(namespace.stm_collection)
    got = collection.get(include=["documents", "metadatas"])
    out += [doc or "" for doc in got["documents"] or []]
    out += [json.dumps(md, ensure_ascii=False) for md in got["metadatas"] or []]
    with psycopg.connect(start_embedded_postgres(data_dir / "pg").url) as conn:
        for table in (namespace.facts_table, namespace.audit_table, namespace.users_table):
            rows = conn.execute(
                psycopg.sql.SQL("SELECT (to_jsonb(t) - 'embedding')::text FROM {} t").format(
                    psycopg.sql.Identifier(table)
                )
            ).fetchall()
            out += [row[0] for row in rows]
    return out


def test_pii_is_sealed_in_ltm_and_gone_from_every_store_after_the_deadline(
    make_system: MakeSystem, clock: VirtualClock, backend: str, namespace: Namespace, data_dir: Path
) -> None:
    system = make_system("hybrid")
    for text in (f"My phone is {PHONE}.", f"My email is {EMAIL}.", f"Send the bill to {EMAIL}."):
        system.turn(user_id=ALICE, session_id="s1", text=text)
    system.session.update_task_state(user_id=ALICE, session_id="s1", task_state={"callback": PHONE})
    facts = {f.key: f for f in system.ltm.facts(filter=LtmFilter(user_id=ALICE))}
    assert system.reveal(facts["phone"]) == {"value": PHONE}
    assert facts["phone"].value["value"] == "138****5678" and "_sealed" in facts["phone"].value
    contents = raw_contents(system, backend, namespace, data_dir)
    assert contents and not [c for c in contents if contains_raw_pii(readable(c))]
    assert not [c for c in contents if PHONE in c or EMAIL in c]
    clock.set(T0 + DAY_S - 1)
    assert system.sweep().anonymised == 0
    clock.set(T0 + DAY_S)
    assert system.sweep().anonymised == 2
    facts = {f.key: f for f in system.ltm.facts(filter=LtmFilter(user_id=ALICE))}
    assert system.reveal(facts["phone"]) == {"value": "138****5678", "_anonymised": True}
    contents = raw_contents(system, backend, namespace, data_dir)
    assert not [c for c in contents if contains_raw_pii(c)]
    assert not [c for c in contents if "_sealed" in c]  # no ciphertext left either
    actions = [e.action for e in system.ltm.audit_log(user_id=ALICE)]
    assert actions.count("anonymise") == 2


def test_a_strategy_that_encrypts_needs_a_key(
    clock: VirtualClock, namespace: Namespace, data_dir: Path, embedder: Embedder
) -> None:
    bare = Settings(backend="memory", data_dir=data_dir, prefix=namespace.prefix)
    with pytest.raises(ConfigurationError, match="MEMH_ENCRYPTION_KEY"):
        build_memory_system(bare, clock=clock, embedder=embedder, strategy="hybrid")
    plain = load_strategy("hybrid").with_params({"pii.encrypt_ltm": False})
    system = build_memory_system(bare, clock=clock, embedder=embedder, strategy=plain)
    said = system.turn(user_id=ALICE, session_id="s1", text=f"My phone is {PHONE}.")
    assert said.promoted is not None and said.promoted.value == {"value": "138****5678"}


# --------------------------------------------------------------------------- factory


def test_default_strategy_is_the_stores_defaults(
    clock: VirtualClock, namespace: Namespace, data_dir: Path, embedder: Embedder
) -> None:
    config = Settings(backend="memory", data_dir=data_dir, prefix=namespace.prefix)
    system = build_memory_system(config, clock=clock, embedder=embedder)
    assert system.engine is not None and system.engine.strategy == default_strategy(config)
    seed(system)
    said = system.stm.records(filter=StmFilter(user_id=ALICE))
    assert {r.expires_at for r in said} == {T0 + config.stm.ttl_s}
    assert {f.expires_at for f in system.ltm.facts(filter=LtmFilter(user_id=ALICE))} == {None}
    forgot = system.turn(user_id=ALICE, session_id="s1", text="forget my address")
    assert forgot.forgotten is not None  # forget commands work without a named strategy
    with pytest.raises(InvalidInput, match="no strategy named"):
        build_memory_system(config, clock=clock, embedder=embedder, strategy="nope")


def test_a_strategys_session_ttl_governs_the_session_layer(
    make_system: MakeSystem, clock: VirtualClock
) -> None:
    system = make_system(load_strategy("typed_ttl").with_params({"ttl.by_type.session": 600}))
    state = system.turn(user_id=ALICE, session_id="s1", text="hello").session
    assert state.expires_at == T0 + 600


def test_session_reset_empties_the_window_and_task_state(
    session_store: SessionStore, clock: VirtualClock
) -> None:
    session_store.create(user_id=ALICE, session_id="s1", task_state={"step": 2})
    session_store.create(user_id=ALICE, session_id="s2")
    for n in range(3):
        session_store.append_message(user_id=ALICE, session_id="s1", message_id=f"m{n}")
        session_store.append_message(user_id=ALICE, session_id="s2", message_id=f"m{n}")
    before = session_store.peek(user_id=ALICE, session_id="s1")
    assert session_store.reset(user_id=BOB, session_id="s1") is False
    assert session_store.reset(user_id=ALICE, session_id="s1") is True
    after = session_store.peek(user_id=ALICE, session_id="s1")
    assert after is not None and before is not None
    assert (after.task_state, after.expires_at, after.status) == (
        {},
        before.expires_at,
        before.status,
    )
    assert session_store.context(user_id=ALICE, session_id="s1") == []
    assert session_store.context(user_id=ALICE, session_id="s2") == ["m2", "m1", "m0"]
    assert session_store.append_message(user_id=ALICE, session_id="s1", message_id="m9") == ["m9"]
    assert session_store.reset(user_id=ALICE, session_id="nope") is False


# --------------------------------------------------------------------------- forget commands


def erased_cleanly(system: MemorySystem, key: str, user: str = ALICE) -> bool:
    """Every audit entry under `key` is redacted, and the last is the erasure."""
    entries = [e for e in system.ltm.audit_log(user_id=user) if e.key == key]
    redacted = all(v in (None, REDACTED) for e in entries for v in (e.old_value, e.new_value))
    return bool(entries) and redacted and entries[-1].action == "erase"


@pytest.mark.parametrize("name", sorted(BUILTINS))
def test_forgetting_a_topic_works_under_every_strategy(
    make_system: MakeSystem, clock: VirtualClock, name: str
) -> None:
    system = make(make_system, name)
    seed(system)
    system.turn(user_id=ALICE, session_id="s2", text=SAYS["address"])  # in another session too
    clock.advance(60)
    said = system.turn(user_id=ALICE, session_id="s1", text="Please forget my address.")
    report = said.forgotten
    assert report is not None and (report.scope, report.topic) == ("topic", "address")
    assert not said.stm.accepted and said.promoted is None
    assert (len(report.stm_removed), len(report.ltm_erased)) == (2, 1)
    assert not [h for h in said.ltm_hits if h.record.key == "address"]
    assert visible(system) == ({"book", "shipping"}, {"shipping"})
    assert visible(system, session="s2") == (set(), {"shipping"})
    assert stored(system) == ({"book", "shipping"}, {"shipping"})  # the command is not stored
    assert erased_cleanly(system, "address")
    clock.advance(DAY_S)
    if name == "oracle":
        system.advise(KEEP_EVERYTHING)
    system.sweep()
    assert "address" not in visible(system)[0] | visible(system)[1]


def test_forgetting_a_topic_in_chinese(make_system: MakeSystem, clock: VirtualClock) -> None:
    system = make_system("hybrid")
    system.turn(user_id=ALICE, session_id="s1", text="我的地址是北京市朝阳区建国路88号")
    system.turn(user_id=ALICE, session_id="s1", text=SAYS["shipping"])
    said = system.turn(user_id=ALICE, session_id="s1", text="忘记我的地址")
    assert said.forgotten is not None and said.forgotten.topic == "地址"
    records = system.stm.records(filter=StmFilter(user_id=ALICE, include_dead=True))
    assert [r.text for r in records] == [SAYS["shipping"]]
    assert stored(system)[1] == {"shipping"} and erased_cleanly(system, "address")


def test_forgetting_everything_erases_the_user_from_every_layer(
    make_system: MakeSystem, clock: VirtualClock
) -> None:
    system = make_system("hybrid")
    seed(system)
    seed(system, BOB, "b1")
    system.turn(user_id=ALICE, session_id="s2", text="Please book a taxi to the airport at 6am.")
    system.sweep()  # the activity is on record
    asked = system.turn(user_id=ALICE, session_id="s1", text="Forget everything about me.")
    assert asked.confirmation == "asked" and asked.forgotten is None  # hybrid asks first
    said = system.turn(user_id=ALICE, session_id="s1", text="Yes, delete everything.")
    report = said.forgotten
    assert said.confirmation == "confirmed" and said.reply
    assert report is not None and report.scope == "everything"
    assert (report.sessions_removed, len(report.stm_removed), len(report.ltm_erased)) == (2, 4, 2)
    assert said.context_ids == [] and said.stm_hits == [] and said.ltm_hits == []
    assert stored(system) == (set(), set())
    assert system.session.list_user_sessions(user_id=ALICE) == []
    audit = system.ltm.audit_log(user_id=ALICE)
    assert audit and all(v in (None, REDACTED) for e in audit for v in (e.old_value, e.new_value))
    assert system.engine is not None and system.engine.flush_activity() == 0
    assert system.ltm.last_active(user_ids=[ALICE]) == {}
    assert visible(system, BOB, "b1") == (ALL_STM, ALL_LTM)
    again = system.turn(user_id=ALICE, session_id="s1", text="What is my address?")
    assert again.stm_hits == [] and again.ltm_hits == [] and again.context_ids == [again.message_id]


def test_resetting_the_conversation_clears_this_session_only(
    make_system: MakeSystem, clock: VirtualClock
) -> None:
    system = make_system("typed_ttl")
    seed(system)
    system.turn(user_id=ALICE, session_id="s2", text=SAYS["book"])
    system.session.update_task_state(user_id=ALICE, session_id="s1", task_state={"step": 3})
    said = system.turn(user_id=ALICE, session_id="s1", text="重置对话")
    assert said.forgotten is not None and said.forgotten.scope == "session"
    assert said.forgotten.context_cleared and said.context_ids == []
    assert system.session.context(user_id=ALICE, session_id="s1") == []
    state = system.session.peek(user_id=ALICE, session_id="s1")
    assert state is not None and state.task_state == {}
    assert visible(system) == (set(), ALL_LTM)  # long-term facts are not the conversation
    assert visible(system, session="s2")[0] == {"book"}


def test_forget_that_removes_the_last_utterance_and_its_fact(
    make_system: MakeSystem, clock: VirtualClock
) -> None:
    system = make_system("keep_all")
    for name in ("address", "book", "shipping"):
        system.turn(user_id=ALICE, session_id="s1", text=SAYS[name])
        clock.advance(1)
    said = system.turn(user_id=ALICE, session_id="s1", text="Forget that.")
    assert said.forgotten is not None and said.forgotten.topic is None
    assert (len(said.forgotten.stm_removed), len(said.forgotten.ltm_erased)) == (1, 1)
    assert visible(system) == ({"address", "book"}, {"address"})
    assert erased_cleanly(system, "shipping")


def test_promotion_never_resurrects_a_forgotten_statement(
    make_system: MakeSystem, clock: VirtualClock
) -> None:
    system = make_system("keep_all")
    jazz = "I like jazz music."
    assert system.turn(user_id=ALICE, session_id="s1", text=jazz).promoted is None  # once
    forgot = system.turn(user_id=ALICE, session_id="s1", text="Forget jazz.")
    assert forgot.forgotten is not None and len(forgot.forgotten.stm_removed) == 1
    # Said again: the first mention is gone, so this is a first mention, not a repetition.
    again = system.turn(user_id=ALICE, session_id="s1", text=jazz)
    assert again.stm.accepted and again.promoted is None
    assert system.turn(user_id=ALICE, session_id="s1", text=jazz).promoted is not None

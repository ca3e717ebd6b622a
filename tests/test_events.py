"""Conformance suite of the event bus: every backend passes the same tests.

A consumer restart is a new bus (a new client) using a consumer name seen before. Nothing
sleeps: stale claims use `min_idle_ms=0`, idle time in memory moves with the virtual clock.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reference.clock import VirtualClock
from reference.errors import InvalidInput, NotFound
from reference.forgetting.events import EventBus, IdempotentHandler, MalformedEvent, parse_stream_id
from reference.forgetting.events_memory import InMemoryEventBus, InMemoryEventServer
from reference.forgetting.events_redis import RedisStreamEventBus
from reference.keys import Namespace
from reference.models import Event
from tests.conftest import T0
from tests.fixtures.event_backends import EVENT_BACKENDS, EventBusFactory, plant_raw_entry

G = "forgetting"


class Boom(Exception):
    """A handler failure."""


class Crash(BaseException):
    """The consumer process dying mid-handler (not a handler failure)."""


def ev(i: int, user: str = "u1", name: str = "profile_updated") -> Event:
    return Event(name=name, user_id=user, at=T0 + i, payload={"seq": i, "field": "地址"})


def publish(bus: EventBus, n: int, start: int = 0) -> list[str]:
    return [bus.publish(ev(i)) for i in range(start, start + n)]


class Recorder:
    """A handler that records what it was given; fails on chosen event ids."""

    def __init__(self, fail: set[str] | None = None, exc: type[BaseException] = Boom) -> None:
        self.seen: list[tuple[str, Event]] = []
        self.fail = fail or set()
        self.exc = exc

    def __call__(self, event_id: str, event: Event) -> None:
        self.seen.append((event_id, event))
        if event_id in self.fail:
            raise self.exc(event_id)

    @property
    def ids(self) -> list[str]:
        return [i for i, _ in self.seen]


def drain(bus: EventBus, consumer: str, handler: Callable[[str, Event], None]) -> int:
    total = 0
    while n := bus.consume(group=G, consumer=consumer, handler=handler):
        total += n
    return total


# ---------------------------------------------------------------- publish / consume
def test_publish_then_consume_in_order(event_bus: EventBus) -> None:
    event_bus.ensure_group(G)
    ids = publish(event_bus, 5)
    assert [parse_stream_id("id", i) for i in ids] == sorted(parse_stream_id("id", i) for i in ids)
    rec = Recorder()
    assert event_bus.consume(group=G, consumer="c1", handler=rec) == 5
    assert rec.seen == [(i, ev(n)) for n, i in enumerate(ids)]
    assert event_bus.pending(group=G) == 0
    assert event_bus.consume(group=G, consumer="c1", handler=rec) == 0


def test_max_events_bounds_a_batch(event_bus: EventBus) -> None:
    event_bus.ensure_group(G)
    ids = publish(event_bus, 5)
    rec = Recorder()
    assert event_bus.consume(group=G, consumer="c1", handler=rec, max_events=2) == 2
    assert event_bus.consume(group=G, consumer="c1", handler=rec, max_events=2) == 2
    assert event_bus.consume(group=G, consumer="c1", handler=rec, max_events=2) == 1
    assert rec.ids == ids


def test_event_round_trips_exactly(event_bus: EventBus) -> None:
    event_bus.ensure_group(G)
    event = Event("order_completed", "user.1@x", 1_767_225_600.123456789, {"a": [1, 2.5, None]})
    event_id = event_bus.publish(event)
    rec = Recorder()
    event_bus.consume(group=G, consumer="c1", handler=rec)
    assert rec.seen == [(event_id, event)]
    assert event_bus.replay() == [(event_id, event)]


def test_two_consumers_split_the_events(event_bus_factory: EventBusFactory) -> None:
    a_bus, b_bus = event_bus_factory(), event_bus_factory()
    a_bus.ensure_group(G)
    ids = publish(a_bus, 6)
    a, b = Recorder(), Recorder()
    assert a_bus.consume(group=G, consumer="a", handler=a, max_events=2) == 2
    assert b_bus.consume(group=G, consumer="b", handler=b, max_events=3) == 3
    assert a_bus.consume(group=G, consumer="a", handler=a) == 1
    assert b_bus.consume(group=G, consumer="b", handler=b) == 0
    assert not set(a.ids) & set(b.ids)
    assert sorted(a.ids + b.ids, key=lambda i: parse_stream_id("id", i)) == ids


def test_groups_each_get_every_event(event_bus: EventBus) -> None:
    event_bus.ensure_group("engine")
    event_bus.ensure_group("audit")
    ids = publish(event_bus, 3)
    engine, audit = Recorder(), Recorder()
    event_bus.consume(group="engine", consumer="c", handler=engine)
    event_bus.consume(group="audit", consumer="c", handler=audit)
    assert engine.ids == audit.ids == ids


def test_blocking_consume_wakes_on_publish(event_bus_factory: EventBusFactory) -> None:
    consumer_bus, producer = event_bus_factory(), event_bus_factory()
    consumer_bus.ensure_group(G)
    rec = Recorder()
    got: list[int] = []
    worker = threading.Thread(
        target=lambda: got.append(
            consumer_bus.consume(group=G, consumer="c", handler=rec, block_ms=10_000)
        )
    )
    worker.start()
    event_id = producer.publish(ev(1))
    worker.join(timeout=10)
    assert not worker.is_alive()
    assert got == [1]
    assert rec.ids == [event_id]


def test_block_ms_times_out_empty(event_bus: EventBus) -> None:
    event_bus.ensure_group(G)
    assert event_bus.consume(group=G, consumer="c", handler=Recorder(), block_ms=1) == 0


# ---------------------------------------------------------------- groups
def test_ensure_group_is_idempotent(event_bus: EventBus) -> None:
    assert event_bus.ensure_group(G) is True
    assert event_bus.ensure_group(G) is False
    assert event_bus.pending(group=G) == 0


def test_new_group_sees_history_unless_started_at_dollar(event_bus: EventBus) -> None:
    old = publish(event_bus, 2)
    event_bus.ensure_group("full")
    event_bus.ensure_group("late", start_id="$")
    new = publish(event_bus, 1, start=2)
    full, late = Recorder(), Recorder()
    event_bus.consume(group="full", consumer="c", handler=full)
    event_bus.consume(group="late", consumer="c", handler=late)
    assert full.ids == old + new
    assert late.ids == new


def test_unknown_group_is_not_found(event_bus: EventBus) -> None:
    publish(event_bus, 1)
    for call in (
        lambda: event_bus.consume(group="nope", consumer="c", handler=Recorder()),
        lambda: event_bus.pending(group="nope"),
        lambda: event_bus.claim_stale(group="nope", consumer="c", min_idle_ms=0),
    ):
        with pytest.raises(NotFound, match="nope"):
            call()


# ---------------------------------------------------------------- failures and restarts
def test_failed_handler_leaves_the_event_pending(event_bus: EventBus) -> None:
    event_bus.ensure_group(G)
    ids = publish(event_bus, 3)
    failing = Recorder(fail={ids[1]})
    with pytest.raises(Boom):
        event_bus.consume(group=G, consumer="c1", handler=failing)
    assert failing.ids == ids[:2]
    assert event_bus.pending(group=G) == 2  # the failed one and the one behind it
    rec = Recorder()
    assert event_bus.consume(group=G, consumer="c1", handler=rec) == 2
    assert rec.ids == ids[1:]
    assert event_bus.pending(group=G) == 0
    assert event_bus.dead_letters() == []


def test_poison_event_is_dead_lettered_after_max_failures(
    event_bus_factory: EventBusFactory,
) -> None:
    bus = event_bus_factory(max_failures=3)
    bus.ensure_group(G)
    ids = publish(bus, 2)
    poison = Recorder(fail={ids[0]})
    for _ in range(3):
        with pytest.raises(Boom):
            bus.consume(group=G, consumer="c1", handler=poison)
    assert poison.ids == [ids[0]] * 3
    (letter,) = bus.dead_letters()
    assert (letter.event_id, letter.group, letter.consumer, letter.field) == (
        ids[0],
        G,
        "c1",
        "handler",
    )
    assert "3 times" in letter.reason and "Boom" in letter.reason
    assert letter.fields["name"] == "profile_updated"
    rec = Recorder()
    assert bus.consume(group=G, consumer="c1", handler=rec) == 1
    assert rec.ids == [ids[1]]
    assert bus.pending(group=G) == 0


def test_consumer_down_processes_after_restart_exactly_once(
    event_bus_factory: EventBusFactory,
) -> None:
    producer = event_bus_factory()
    producer.ensure_group(G)
    effects: Counter[int] = Counter()

    def apply(event_id: str, event: Event) -> None:
        effects[event.payload["seq"]] += 1

    first = publish(producer, 3)
    bus = event_bus_factory()
    idem = IdempotentHandler(bus, G, apply)
    assert bus.consume(group=G, consumer="worker", handler=idem, max_events=1) == 1

    # The worker dies after applying and recording event 1, before acknowledging it.
    def dies_before_ack(event_id: str, event: Event) -> None:
        idem(event_id, event)
        raise Crash(event_id)

    with pytest.raises(Crash):
        bus.consume(group=G, consumer="worker", handler=dies_before_ack, max_events=1)
    bus.dispose()

    later = publish(producer, 4, start=3)  # published while the worker is down
    restarted = event_bus_factory()
    idem2 = IdempotentHandler(restarted, G, apply)
    assert drain(restarted, "worker", idem2) == 6
    assert idem2.skipped == 1  # event 1, redelivered, caught by the record
    assert effects == Counter(range(7))
    assert restarted.pending(group=G) == 0
    assert [i for i, _ in restarted.replay()] == first + later


def test_crash_before_handling_redelivers_on_restart(event_bus_factory: EventBusFactory) -> None:
    bus = event_bus_factory()
    bus.ensure_group(G)
    ids = publish(bus, 3)
    with pytest.raises(Crash):  # read all three, died in the first handler
        bus.consume(group=G, consumer="w", handler=Recorder(fail={ids[0]}, exc=Crash))
    restarted = event_bus_factory()
    rec = Recorder()
    assert restarted.consume(group=G, consumer="w", handler=rec) == 3
    assert rec.ids == ids


def test_claim_stale_takes_over_a_dead_consumers_events(
    event_bus_factory: EventBusFactory,
) -> None:
    dead = event_bus_factory()
    dead.ensure_group(G)
    ids = publish(dead, 3)
    with pytest.raises(Crash):
        dead.consume(group=G, consumer="dead", handler=Recorder(fail={ids[0]}, exc=Crash))
    live = event_bus_factory()
    assert live.claim_stale(group=G, consumer="live", min_idle_ms=60_000) == []
    assert live.claim_stale(group=G, consumer="live", min_idle_ms=0, max_events=2) == ids[:2]
    assert live.claim_stale(group=G, consumer="live", min_idle_ms=0) == ids  # own ones too
    rec = Recorder()
    assert live.consume(group=G, consumer="live", handler=rec) == 3
    assert rec.ids == ids
    assert live.consume(group=G, consumer="dead", handler=Recorder()) == 0
    assert live.pending(group=G) == 0


def test_claim_stale_measures_idle_time_on_the_virtual_clock(clock: VirtualClock) -> None:
    bus = InMemoryEventBus(Namespace("t_idle"), server=InMemoryEventServer(clock))
    bus.ensure_group(G)
    ids = publish(bus, 1)
    with pytest.raises(Crash):
        bus.consume(group=G, consumer="dead", handler=Recorder(fail=set(ids), exc=Crash))
    clock.advance(29.5)
    assert bus.claim_stale(group=G, consumer="live", min_idle_ms=30_000) == []
    clock.advance(0.5)
    assert bus.claim_stale(group=G, consumer="live", min_idle_ms=30_000) == ids


# ---------------------------------------------------------------- history and trimming
def test_replay_returns_the_whole_history(event_bus: EventBus) -> None:
    event_bus.ensure_group(G)
    ids = publish(event_bus, 4)
    event_bus.consume(group=G, consumer="c", handler=Recorder())  # acks change nothing
    assert event_bus.replay() == [(i, ev(n)) for n, i in enumerate(ids)]
    assert [i for i, _ in event_bus.replay(since_id=ids[1])] == ids[2:]
    assert [i for i, _ in event_bus.replay(since_id=ids[0], count=2)] == ids[1:3]
    assert event_bus.replay(since_id=ids[-1]) == []


def test_trim_keeps_the_newest_and_dead_letters_unhandled(event_bus: EventBus) -> None:
    event_bus.ensure_group(G)
    ids = publish(event_bus, 5)
    with pytest.raises(Boom):
        event_bus.consume(group=G, consumer="c", handler=Recorder(fail={ids[0]}))
    assert event_bus.trim(max_len=2) == 3
    assert event_bus.trim(max_len=2) == 0
    assert [i for i, _ in event_bus.replay()] == ids[3:]
    rec = Recorder()
    assert event_bus.consume(group=G, consumer="c", handler=rec) == 5
    assert rec.ids == ids[3:]
    assert [(d.event_id, d.field, d.fields) for d in event_bus.dead_letters()] == [
        (i, "entry", {}) for i in ids[:3]
    ]


def test_claim_stale_dead_letters_trimmed_entries(event_bus_factory: EventBusFactory) -> None:
    bus = event_bus_factory()
    bus.ensure_group(G)
    ids = publish(bus, 3)
    with pytest.raises(Crash):
        bus.consume(group=G, consumer="dead", handler=Recorder(fail={ids[0]}, exc=Crash))
    bus.trim(max_len=1)
    assert bus.claim_stale(group=G, consumer="live", min_idle_ms=0) == ids[2:]
    assert [(d.event_id, d.consumer) for d in bus.dead_letters()] == [(i, "live") for i in ids[:2]]
    assert bus.pending(group=G) == 1


# ---------------------------------------------------------------- validation
@pytest.mark.parametrize(
    ("event", "field"),
    [
        (Event("profile updated", "u1", T0), "event.name"),
        (Event("", "u1", T0), "event.name"),
        (Event("x", "u:1", T0), "event.user_id"),
        (Event("x", "u1", float("nan")), "event.at"),
        (Event("x", "u1", "yesterday"), "event.at"),  # type: ignore[arg-type]
        (Event("x", "u1", T0, {"k": {1, 2}}), "event.payload"),
        (Event("x", "u1", T0, ["not", "an", "object"]), "event.payload"),  # type: ignore[arg-type]
        ({"name": "x"}, "event"),
    ],
)
def test_bad_events_name_the_field(event_bus: EventBus, event: Any, field: str) -> None:
    with pytest.raises(InvalidInput) as err:
        event_bus.publish(event)
    assert err.value.field == field
    assert event_bus.replay() == []


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda b: b.ensure_group("a group"), "group"),
        (lambda b: b.ensure_group(G, start_id="latest"), "start_id"),
        (lambda b: b.consume(group=G, consumer="a:b", handler=Recorder()), "consumer"),
        (
            lambda b: b.consume(group=G, consumer="c", handler=Recorder(), max_events=0),
            "max_events",
        ),
        (lambda b: b.consume(group=G, consumer="c", handler=Recorder(), block_ms=-1), "block_ms"),
        (lambda b: b.claim_stale(group=G, consumer="c", min_idle_ms=-5), "min_idle_ms"),
        (lambda b: b.claim_stale(group="", consumer="c", min_idle_ms=0), "group"),
        (lambda b: b.pending(group="*"), "group"),
        (lambda b: b.replay(since_id="(0"), "since_id"),
        (lambda b: b.replay(count=0), "count"),
        (lambda b: b.trim(max_len=-1), "max_len"),
    ],
)
def test_bad_arguments_name_the_field(
    event_bus: EventBus, call: Callable[[EventBus], object], field: str
) -> None:
    event_bus.ensure_group(G)
    with pytest.raises(InvalidInput) as err:
        call(event_bus)
    assert err.value.field == field


def test_bad_max_failures_names_the_field(event_bus_factory: EventBusFactory) -> None:
    with pytest.raises(InvalidInput) as err:
        event_bus_factory(max_failures=0)
    assert err.value.field == "max_failures"


# ---------------------------------------------------------------- malformed entries
GOOD = {"name": "ticket_closed", "user_id": "u1", "at": "1.5", "payload": "{}"}


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({**GOOD, "payload": "{not json"}, "payload"),
        ({**GOOD, "payload": "[1, 2]"}, "payload"),
        ({k: v for k, v in GOOD.items() if k != "user_id"}, "user_id"),
        ({**GOOD, "user_id": "u 1"}, "user_id"),
        ({**GOOD, "name": ""}, "name"),
        ({**GOOD, "at": "soon"}, "at"),
        ({**GOOD, "at": "inf"}, "at"),
        ({"something": "else"}, "name"),
    ],
)
def test_malformed_entry_is_dead_lettered_not_retried(
    event_bus: EventBus, fields: dict[str, str], field: str
) -> None:
    event_bus.ensure_group(G)
    before = event_bus.publish(ev(0))
    bad = plant_raw_entry(event_bus, fields)
    after = event_bus.publish(ev(1))
    rec = Recorder()
    assert event_bus.consume(group=G, consumer="c", handler=rec) == 3
    assert rec.ids == [before, after]
    (letter,) = event_bus.dead_letters()
    assert (letter.event_id, letter.group, letter.consumer, letter.field) == (bad, G, "c", field)
    assert letter.fields == fields
    assert event_bus.pending(group=G) == 0
    assert event_bus.consume(group=G, consumer="c", handler=rec) == 0
    with pytest.raises(MalformedEvent) as err:
        event_bus.replay()
    assert (err.value.event_id, err.value.field) == (bad, field)
    assert bad in str(err.value) and field in str(err.value)
    assert [i for i, _ in event_bus.replay(since_id=bad)] == [after]


# ---------------------------------------------------------------- idempotency
def test_idempotent_handler_skips_recorded_ids(event_bus: EventBus) -> None:
    calls: list[str] = []
    idem = IdempotentHandler(event_bus.processed, G, lambda i, e: calls.append(i))
    idem("1-0", ev(1))
    idem("1-0", ev(1))
    IdempotentHandler(event_bus, "other", lambda i, e: calls.append(i))("1-0", ev(1))
    assert calls == ["1-0", "1-0"]  # once per group
    assert idem.skipped == 1


def test_idempotent_handler_records_only_after_success(event_bus: EventBus) -> None:
    event_bus.ensure_group(G)
    (event_id,) = publish(event_bus, 1)
    idem = IdempotentHandler(event_bus, G, Recorder(fail={event_id}))
    with pytest.raises(Boom):
        event_bus.consume(group=G, consumer="c", handler=idem)
    assert not event_bus.processed.seen(group=G, event_id=event_id)
    rec = Recorder()
    assert event_bus.consume(group=G, consumer="c", handler=IdempotentHandler(event_bus, G, rec))
    assert rec.ids == [event_id]
    assert event_bus.processed.seen(group=G, event_id=event_id)


# ---------------------------------------------------------------- differential
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("publish"), st.integers(0, 2)),
        st.tuples(st.just("plant"), st.just(0)),
        st.tuples(
            st.just("consume"),
            st.sampled_from(["a", "b"]),
            st.integers(1, 4),
            st.none() | st.integers(0, 3),
        ),
        st.tuples(st.just("claim"), st.sampled_from(["a", "b"]), st.integers(1, 3)),
        st.tuples(st.just("trim"), st.integers(0, 4)),
    ),
    max_size=25,
)


def _run(bus: EventBus, ops: list[tuple[Any, ...]]) -> list[object]:
    """Apply ops; observations with stream ids replaced by publication order."""
    order: dict[str, int] = {}
    out: list[object] = []
    bus.ensure_group(G)
    for op in ops:
        if op[0] == "publish":
            order[bus.publish(ev(len(order), user=f"u{op[1]}"))] = len(order)
        elif op[0] == "plant":
            order[plant_raw_entry(bus, {"name": "x"})] = len(order)
        elif op[0] == "consume":
            _, consumer, max_events, fail_at = op
            seen: list[int] = []

            def handler(
                event_id: str, event: Event, seen: list[int] = seen, k: Any = fail_at
            ) -> None:
                seen.append(order[event_id])
                if len(seen) - 1 == k:
                    raise Boom

            try:
                result: object = bus.consume(
                    group=G, consumer=consumer, handler=handler, max_events=max_events
                )
            except Boom:
                result = "boom"
            out.append((result, seen))
        elif op[0] == "claim":
            claimed = bus.claim_stale(group=G, consumer=op[1], min_idle_ms=0, max_events=op[2])
            out.append([order[i] for i in claimed])
        else:
            out.append(bus.trim(max_len=op[1]))
        out.append(bus.pending(group=G))
    out.append([(order[d.event_id], d.consumer, d.field) for d in bus.dead_letters()])
    return out


REDIS_BACKENDS = [p for p in EVENT_BACKENDS if p.values[0] != "memory"]


@pytest.mark.parametrize("event_backend", REDIS_BACKENDS)
@settings(
    max_examples=60,
    deadline=None,
    # One Redis URL for all examples; each example cleans its own namespace.
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(ops=OPS)
def test_memory_and_redis_agree(event_redis_url: str, ops: list[tuple[Any, ...]]) -> None:
    ns = Namespace("t_diff")
    redis_bus = RedisStreamEventBus.from_url(event_redis_url, ns, max_failures=2)
    try:
        redis_bus.client.ping()
    except redis.RedisError as exc:
        pytest.fail(f"Redis at {event_redis_url} unreachable: {exc}")

    def clean() -> None:
        keys = list(redis_bus.client.scan_iter(match=ns.key_pattern()))
        if keys:
            redis_bus.client.delete(*keys)

    try:
        clean()
        memory = _run(InMemoryEventBus(ns, max_failures=2), ops)
        assert _run(redis_bus, ops) == memory
    finally:
        clean()
        redis_bus.dispose()

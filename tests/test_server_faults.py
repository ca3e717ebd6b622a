"""Servers that die, pause, restart or drop their connections, under each layer.

Each fault x each layer (session on the embedded Redis, STM on a `chroma run` server,
LTM on the embedded PostgreSQL), on real servers (`memharness.faults`):

- the operation in flight fails with `BackendUnavailable` naming the layer and the
  server, within `RetryPolicy.bound_s(timeouts)` (small timeouts here, to stay fast);
- an idempotent operation succeeds once the server is back, a non-idempotent one is not
  repeated when its outcome is unknown;
- nothing is half-written: no LTM fact without its audit row or the reverse after a kill
  in the middle of a write, no STM record of a turn whose session step failed.

Time to error is printed (`pytest -s`, lines starting FAULT) for the table in docs/resilience.md.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from memharness.faults import EmbeddedPostgresServer, EmbeddedRedisServer, ServerProcess
from memharness.faults_chroma import ChromaServer
from reference.clock import VirtualClock
from reference.embedding import HashingEmbedder
from reference.errors import BackendUnavailable, NotFound
from reference.keys import Namespace
from reference.ltm.embedded_pg import start_embedded_postgres
from reference.ltm.filters import LtmFilter
from reference.ltm.postgres_store import PostgresLongTermStore
from reference.models import Category
from reference.pii import RegexPiiMasker
from reference.policy.intent import RuleIntentFilter
from reference.resilience import (
    LONG_TERM,
    SESSION,
    SHORT_TERM,
    RetryPolicy,
    Timeouts,
    call_with_retry,
)
from reference.session.embedded_redis import start_embedded_redis
from reference.session.redis_store import RedisSessionStore
from reference.stm.chroma_client import make_chroma_client
from reference.stm.chroma_store import ChromaShortTermStore
from reference.stm.filters import StmFilter

pytestmark = pytest.mark.faults

T0 = 1_767_225_600.0
#: Small timeouts keep the suite fast; MEMH_FAULTS_DEFAULTS=1 runs it with the defaults
#: (the table in docs/resilience.md:
#: `MEMH_FAULTS_DEFAULTS=1 pytest tests/test_server_faults.py -s`).
if os.environ.get("MEMH_FAULTS_DEFAULTS") == "1":
    TIMEOUTS, RETRY = Timeouts(), RetryPolicy()
else:
    TIMEOUTS = Timeouts(connect_s=0.5, operation_s=0.5)
    RETRY = RetryPolicy(attempts=3, base_delay_s=0.05, max_delay_s=0.2, budget_s=1.0)
#: The longest any operation may take to fail here, plus scheduling slack (2 shared cores).
BOUND_S = RETRY.bound_s(TIMEOUTS) + 1.0


@dataclass
class Rig:
    """One layer on one faultable server, with an operation of each kind."""

    layer: str
    server: ServerProcess
    store: Any
    read: Callable[[], object]  # idempotent
    write: Callable[[str], object]  # not idempotent (idempotent for STM: upsert by id)
    has: Callable[[str], bool]  # whether what `write(tag)` wrote is stored
    loses_data_on_restart: bool = False


# ------------------------------------------------------------------ servers (per module)
@pytest.fixture(scope="module")
def pg(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedPostgresServer]:
    path = tmp_path_factory.mktemp("faults-pg") / "pg"
    handle = start_embedded_postgres(path)
    yield EmbeddedPostgresServer(path, handle.url)
    _alive(EmbeddedPostgresServer(path, handle.url))
    handle.close()


@pytest.fixture(scope="module")
def chroma(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChromaServer]:
    server = ChromaServer(tmp_path_factory.mktemp("faults-chroma") / "chroma")
    server.start()
    yield server
    server.stop()


def _alive(server: ServerProcess) -> None:
    """Resume a paused server and start a killed one: each test starts on a live server."""
    if server.main_pid() is None:
        server.start()
    else:
        server.resume()


# ------------------------------------------------------------------ one rig per layer
def _session_rig(tmp_path: Path) -> Iterator[Rig]:
    embedded = start_embedded_redis(tmp_path / "redis")
    store = RedisSessionStore.from_url(
        embedded.url, timeouts=TIMEOUTS, retry=RETRY, clock=VirtualClock(T0),
        namespace=Namespace("f"), pii=RegexPiiMasker(),
    )  # fmt: skip
    store.create(user_id="u", session_id="s")
    server = EmbeddedRedisServer(embedded)

    def write(tag: str) -> object:
        return store.append_message(user_id="u", session_id="s", message_id=tag)

    def has(tag: str) -> bool:
        return tag in store.context(user_id="u", session_id="s")

    yield Rig(SESSION, server, store, lambda: store.get(user_id="u", session_id="s"),
              write, has, loses_data_on_restart=True)  # fmt: skip
    _alive(server)
    store.dispose()
    embedded.close()


def _stm_rig(chroma: ChromaServer, namespace: Namespace) -> Iterator[Rig]:
    _alive(chroma)
    client = make_chroma_client(chroma.url, Path("."), timeouts=TIMEOUTS)
    store = ChromaShortTermStore(
        client=client, clock=VirtualClock(T0), namespace=namespace, embedder=HashingEmbedder(),
        intent_filter=RuleIntentFilter(), pii=RegexPiiMasker(), retry=RETRY, access_buffer=0,
    )  # fmt: skip
    flt = StmFilter(user_id="u", session_id="s")

    def write(tag: str) -> object:
        return store.add(user_id="u", session_id="s", text=f"I live at {tag}", force=True)

    def has(tag: str) -> bool:
        return any(tag in r.text for r in store.records(filter=flt))

    yield Rig(SHORT_TERM, chroma, store, lambda: store.records(filter=flt), write, has)
    _alive(chroma)
    store.drop()


def _ltm_rig(pg: EmbeddedPostgresServer, namespace: Namespace) -> Iterator[Rig]:
    _alive(pg)
    store = PostgresLongTermStore(
        pg.url, clock=VirtualClock(T0), namespace=namespace, embedder=HashingEmbedder(),
        timeouts=TIMEOUTS, retry=RETRY, pool_size=2,
    )  # fmt: skip
    store.setup()
    flt = LtmFilter(user_id="u")

    def write(tag: str) -> object:
        return store.upsert(user_id="u", category=Category.FACT, key=tag, value={"v": tag},
                            text=f"fact {tag}")  # fmt: skip

    def has(tag: str) -> bool:
        return any(f.key == tag for f in store.facts(filter=flt))

    yield Rig(LONG_TERM, pg, store, lambda: store.facts(filter=flt), write, has)
    _alive(pg)
    _assert_audited(store)
    store.drop()


LAYERS = ["session", "stm", "ltm"]


@pytest.fixture(params=LAYERS)
def rig(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    namespace: Namespace,
) -> Iterator[Rig]:
    if request.param == "session":
        yield from _session_rig(tmp_path)
    elif request.param == "stm":
        yield from _stm_rig(request.getfixturevalue("chroma"), namespace)
    else:
        yield from _ltm_rig(request.getfixturevalue("pg"), namespace)


# ------------------------------------------------------------------ helpers
def _fails_clearly(rig: Rig, op: Callable[[], object], what: str) -> float:
    """Run `op`, which must fail naming the layer and the server within the bound; the
    time it took."""
    began = time.monotonic()
    with pytest.raises(BackendUnavailable) as caught:
        op()
    took = time.monotonic() - began
    message = str(caught.value)
    assert message.startswith(f"{rig.layer}: {rig.server.kind} at"), message
    assert caught.value.layer == rig.layer and rig.server.kind in (caught.value.server or "")
    assert took <= BOUND_S, f"{what}: {took:.2f} s > {BOUND_S} s: {message}"
    print(f"FAULT {rig.layer} | {what} | {took:.2f} s | {message[:160]}")
    return took


def _in_flight(
    op: Callable[[], object],
) -> tuple[threading.Thread, list[BaseException], list[float]]:
    """Start `op` in a thread; what it raised, and when it ended, land in the lists."""
    errors: list[BaseException] = []
    ended: list[float] = []

    def run() -> None:
        try:
            op()
        except BaseException as exc:  # recorded for the test to inspect
            errors.append(exc)
        ended.append(time.monotonic())

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, errors, ended


def _assert_audited(store: PostgresLongTermStore) -> None:
    """Every fact has its insert/update audit rows and every audit row its fact."""
    facts = {f.fact_id: f for f in store.facts(filter=LtmFilter(user_id="u", include_dead=True))}
    audit = store.audit_log(user_id="u")
    written = {}
    for entry in audit:
        if entry.action in ("insert", "update"):
            written[entry.fact_id] = written.get(entry.fact_id, 0) + 1
    for fact_id, fact in facts.items():
        assert written.get(fact_id) == fact.version, (fact, audit)
    assert set(written) <= set(facts), "an audit row without its fact"


# ------------------------------------------------------------------ kill -9
def test_kill_fails_the_operation_in_flight_clearly_and_a_restart_recovers(rig: Rig) -> None:
    rig.write("before")
    # In flight: the server is paused (the request is sent, no reply), then killed.
    rig.server.pause()
    thread, errors, ended = _in_flight(rig.read)
    time.sleep(0.1)  # let the request reach the paused server (not a TTL wait)
    killed_at = time.monotonic()
    rig.server.kill()
    thread.join(BOUND_S + 1)
    assert not thread.is_alive(), "the read in flight hangs after its server was killed"
    assert errors and isinstance(errors[0], BackendUnavailable), errors
    assert str(errors[0]).startswith(f"{rig.layer}: {rig.server.kind} at"), errors[0]
    print(f"FAULT {rig.layer} | kill: read in flight | {ended[0] - killed_at:.2f} s after the kill")

    _fails_clearly(rig, rig.read, "kill: read while down")
    _fails_clearly(rig, lambda: rig.write("while-down"), "kill: write while down")

    rig.server.start()
    rig.read()  # the client's dead connections are replaced: no error after a restart
    assert not rig.has("while-down")
    if rig.loses_data_on_restart:  # Redis without persistence: a cache, sessions are gone
        assert rig.read() is None
    else:
        assert rig.has("before"), "a write acknowledged before the kill was lost"
        rig.write("after")
        assert rig.has("after")


# ------------------------------------------------------------------ SIGSTOP / SIGCONT
def test_a_paused_server_times_out_within_the_bound_and_serves_again_when_resumed(
    rig: Rig,
) -> None:
    rig.write("before")
    rig.server.pause()
    try:
        _fails_clearly(rig, rig.read, "stop: idempotent read (retried)")
        _fails_clearly(rig, lambda: rig.write("paused"), "stop: write")
    finally:
        rig.server.resume()
    assert rig.has("before")
    rig.read()
    rig.write("resumed")
    assert rig.has("resumed")


# ------------------------------------------------------------------ restart
def test_operations_after_a_restart_succeed_on_new_connections(rig: Rig) -> None:
    rig.write("before")
    rig.read()  # the pool holds live connections, which the restart breaks
    rig.server.restart()
    began = time.monotonic()
    if rig.loses_data_on_restart:
        assert rig.read() is None  # the restarted Redis is empty: the session is gone
        with pytest.raises(NotFound):
            rig.write("after")
    else:
        rig.read()
        assert rig.has("before")
        rig.write("after")  # PostgreSQL: failed before its commit, so retried; STM: by id
        assert rig.has("after")
    print(f"FAULT {rig.layer} | restart: first operations | {time.monotonic() - began:.2f} s")


# ------------------------------------------------------------------ dropped connections
def test_dropped_connections_are_replaced_without_an_error(rig: Rig) -> None:
    rig.write("before")
    rig.read()
    dropped = rig.server.drop_connections()
    assert dropped >= 1, "no client connection was there to drop"
    began = time.monotonic()
    rig.read()
    rig.write("after")  # an idle connection dropped: nothing was in doubt
    assert rig.has("before") and rig.has("after")
    print(f"FAULT {rig.layer} | drop ({dropped}): next operations | "
          f"{time.monotonic() - began:.2f} s")  # fmt: skip


# ------------------------------------------------------------------ no partial write
def test_a_kill_between_a_fact_and_its_audit_row_leaves_neither(
    pg: EmbeddedPostgresServer, namespace: Namespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    rig = next(_ltm_rig(pg, namespace))
    store: PostgresLongTermStore = rig.store
    rig.write("kept")
    original = store._write_audit

    def die_then_audit(cur: Any, entries: Any) -> None:
        pg.kill()  # the fact's row is written in this transaction, its audit row is next
        original(cur, entries)

    monkeypatch.setattr(store, "_write_audit", die_then_audit)
    _fails_clearly(rig, lambda: rig.write("torn"), "kill mid-write (fact, then audit)")
    monkeypatch.setattr(store, "_write_audit", original)
    pg.start()
    assert not rig.has("torn") and rig.has("kept")
    assert not [e for e in store.audit_log(user_id="u") if e.key == "torn"]
    _assert_audited(store)
    rig.write("torn")  # written again, whole: one fact, one audit row
    _assert_audited(store)
    store.drop()


def test_a_turn_whose_session_step_fails_stores_nothing_in_stm(
    tmp_path: Path, chroma: ChromaServer, pg: EmbeddedPostgresServer, namespace: Namespace
) -> None:
    from reference.factory import build_memory_system
    from reference.settings import Settings

    _alive(chroma)
    _alive(pg)
    embedded = start_embedded_redis(tmp_path / "redis")
    settings = Settings(
        redis_url=embedded.url, chroma_url=chroma.url, pg_url=pg.url, data_dir=tmp_path,
        embedder="hashing", timeouts=TIMEOUTS, retry=RETRY,
    )  # fmt: skip
    system = build_memory_system(settings, clock=VirtualClock(T0), namespace=namespace)
    system.turn(user_id="u", session_id="s", text="I prefer aisle seats")
    redis = EmbeddedRedisServer(embedded)
    redis.kill()
    rig = Rig(SESSION, redis, None, lambda: None, lambda _: None, lambda _: False)
    turn = lambda: system.turn(user_id="u", session_id="s", text="call me on 555-0100")  # noqa: E731
    _fails_clearly(rig, turn, "kill: turn")
    records = system.stm.records(filter=StmFilter(user_id="u", session_id="s"))
    assert [r.text for r in records] == ["I prefer aisle seats"]
    redis.start()
    system.stm.drop()
    system.ltm.drop()
    embedded.close()


def test_an_event_whose_ack_met_a_paused_redis_is_redelivered_and_applied_once(
    tmp_path: Path, namespace: Namespace
) -> None:
    from reference.forgetting.events import IdempotentHandler
    from reference.forgetting.events_redis import RedisStreamEventBus
    from reference.models import Event

    embedded = start_embedded_redis(tmp_path / "redis")
    server = EmbeddedRedisServer(embedded)
    bus = RedisStreamEventBus.from_url(embedded.url, namespace, timeouts=TIMEOUTS)
    bus.ensure_group("g")
    event_id = bus.publish(Event(name="order_completed", user_id="u", at=T0, payload={}))
    applied: list[str] = []
    apply = IdempotentHandler(bus, "g", lambda i, e: applied.append(i))

    def apply_then_pause(i: str, e: Event) -> None:
        apply(i, e)  # applied and recorded as processed; the ack comes next
        server.pause()

    rig = Rig("events", server, bus, lambda: None, lambda _: None, lambda _: False)
    try:
        _fails_clearly(rig, lambda: bus.consume(group="g", consumer="c", handler=apply_then_pause),
                       "stop: ack after the handler")  # fmt: skip
    finally:
        server.resume()
    # The ack was sent before the client gave up: the resumed server may have applied it
    # (nothing pending) or not (pending, redelivered to the consumer and skipped).
    pending = bus.pending(group="g")
    assert bus.consume(group="g", consumer="c", handler=apply) == pending
    assert applied == [event_id] and apply.skipped == pending  # applied exactly once
    assert bus.pending(group="g") == 0
    bus.dispose()
    embedded.close()


# ------------------------------------------------------------------ the retry policy
def test_the_retry_policy_repeats_only_what_is_safe_to_repeat() -> None:
    policy = RetryPolicy(attempts=4, base_delay_s=0.01, max_delay_s=0.02, budget_s=5.0)
    pauses: list[float] = []

    def failing(in_doubt: bool) -> Callable[[], object]:
        calls = []

        def attempt() -> object:
            calls.append(1)
            raise BackendUnavailable("gone", layer=SESSION, server="Redis at x", in_doubt=in_doubt)

        attempt.calls = calls  # type: ignore[attr-defined]
        return attempt

    in_doubt = failing(True)
    with pytest.raises(BackendUnavailable, match=r"^session: Redis at x: gone$"):
        call_with_retry(in_doubt, idempotent=False, policy=policy, sleep=pauses.append)
    assert len(in_doubt.calls) == 1  # type: ignore[attr-defined]

    for attempt, idempotent in ((failing(True), True), (failing(False), False)):
        with pytest.raises(BackendUnavailable, match=r"gave up after 4 tries"):
            call_with_retry(attempt, idempotent=idempotent, policy=policy, sleep=pauses.append)
        assert len(attempt.calls) == 4  # type: ignore[attr-defined]
    assert pauses == [0.01, 0.02, 0.02] * 2  # doubling, capped

    flaky = iter([BackendUnavailable("blip", in_doubt=True), None])

    def recovers() -> str:
        error = next(flaky)
        if error is not None:
            raise error
        return "done"

    assert call_with_retry(recovers, idempotent=True, policy=policy, sleep=pauses.append) == "done"
    no_budget = RetryPolicy(attempts=10, base_delay_s=1.0, budget_s=0.5)
    attempt = failing(False)
    with pytest.raises(BackendUnavailable):
        call_with_retry(attempt, idempotent=True, policy=no_budget, sleep=pauses.append)
    assert len(attempt.calls) == 1  # type: ignore[attr-defined]  # the first pause > budget


def test_the_error_keeps_its_layer_server_and_doubt_across_processes() -> None:
    import pickle

    error = BackendUnavailable("gone", layer=LONG_TERM, server="PostgreSQL at x", in_doubt=True)
    again = pickle.loads(pickle.dumps(error))  # as Ray sends it from a worker
    assert (str(again), again.layer, again.server, again.in_doubt) == (
        "long-term memory: PostgreSQL at x: gone",
        LONG_TERM,
        "PostgreSQL at x",
        True,
    )
    assert isinstance(again, ConnectionError)


def test_timeouts_and_retries_come_from_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    from reference.settings import Settings

    monkeypatch.setenv("MEMH_TIMEOUTS__OPERATION_S", "2.5")
    monkeypatch.setenv("MEMH_RETRY__ATTEMPTS", "5")
    settings = Settings()
    assert settings.timeouts.operation_s == 2.5 and settings.retry.attempts == 5
    assert Settings().retry.bound_s(Settings().timeouts) == pytest.approx(8.0 + 3.0 + 2.5)
    monkeypatch.setenv("MEMH_TIMEOUTS__OPERATION_S", "0")
    with pytest.raises(ValueError, match="operation_s"):
        Settings()

"""The maintenance process on the real servers (embedded Redis and PostgreSQL, a `chroma
run` server): the lease, failover, kill mid-batch, restart with pending events, SIGTERM.

Time: the memory's clock is a `VirtualClock` (in process) or the wall clock with data
written in the past (subprocesses); the lease's own expiry is the Redis server's, and a
test that needs a lease to have run out expires its key on the server (`_expire`), it
does not sleep for it. Waiting for a subprocess to reach a state is a bounded poll.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from reference.clock import SystemClock, VirtualClock
from reference.factory import build_event_bus, build_memory_system
from reference.keys import Namespace
from reference.ltm.filters import LtmFilter
from reference.maintenance import (
    EVENTS_GROUP,
    Lease,
    SharedSessions,
    build_maintenance,
)
from reference.models import Category, Event, MemoryType
from reference.policy.loading import load_strategy, parse_strategy
from reference.policy.strategy import Strategy
from reference.session.embedded_redis import EmbeddedRedis
from reference.settings import Settings
from reference.stm.chroma_server import ChromaServer, start_chroma_server
from reference.stm.filters import StmFilter
from reference.system import MemorySystem

KEY = base64.b64encode(bytes(range(32))).decode()
DAY = 86_400.0
#: A strategy whose facts and records live an hour, swept in batches of 4.
SMALL_BATCHES = """
name: small_batches
description: one hour for everything, swept in batches of four
ttl:
  default_s: 3600
sweep_interval_s: 60
sweep_batch_size: 4
forget_commands: true
"""
WAIT_S = 120.0  # a subprocess on a busy machine may take this long to start


@pytest.fixture(scope="module")
def chroma(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChromaServer]:
    with start_chroma_server(tmp_path_factory.mktemp("chroma") / "data") as server:
        yield server


@pytest.fixture
def settings(
    embedded_redis: EmbeddedRedis, embedded_pg: Any, chroma: ChromaServer, namespace: Namespace,
    data_dir: Path,
) -> Settings:  # fmt: skip
    return Settings(
        backend="embedded",
        redis_url=embedded_redis.url,
        pg_url=embedded_pg.url,
        chroma_url=chroma.url,
        prefix=namespace.prefix,
        embedder="hashing",
        data_dir=data_dir,
        encryption_key=KEY,
    )


@pytest.fixture
def client(embedded_redis: EmbeddedRedis) -> redis.Redis:
    return embedded_redis.client()


def _env(settings: Settings) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        MEMH_BACKEND="embedded",
        MEMH_REDIS_URL=str(settings.redis_url),
        MEMH_PG_URL=settings.pg_url.get_secret_value() if settings.pg_url else "",
        MEMH_CHROMA_URL=str(settings.chroma_url),
        MEMH_PREFIX=settings.prefix,
        MEMH_EMBEDDER="hashing",
        MEMH_DATA_DIR=str(settings.data_dir),
        MEMH_ENCRYPTION_KEY=KEY,
        PYTHONPATH=str(Path(__file__).resolve().parents[1]),
    )
    return env


def _spawn(settings: Settings, tmp_path: Path, replica: str, *args: str) -> subprocess.Popen:
    argv = [sys.executable, "-m", "memharness.cli", "maintain", "--replica", replica, *args]
    argv += ["-v"]
    log = open(tmp_path / f"{replica}.log", "ab")  # noqa: SIM115 (the child owns it)
    return subprocess.Popen(argv, env=_env(settings), stdout=log, stderr=subprocess.STDOUT)


def _until(what: str, check: Callable[[], Any], timeout_s: float = WAIT_S) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)  # polling a subprocess's progress, bounded by the deadline
    raise AssertionError(f"timed out waiting for {what}")


def _expire(client: redis.Redis, key: str) -> None:
    """Let the lease run out now, on the server's clock (no sleeping for its length)."""
    client.pexpire(key, 1)
    _until(f"{key} to expire", lambda: not client.exists(key), 5.0)


def _kill(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=30)


def _system(settings: Settings, strategy: Strategy | str, clock: Any) -> MemorySystem:
    return build_memory_system(settings, strategy=strategy, clock=clock)


def _seed(system: MemorySystem, users: int = 3, facts: int = 5, notes: int = 2) -> None:
    """Facts and STM notes of several users, written under the system's clock."""
    engine = system.engine
    assert engine is not None
    for u in range(users):
        for f in range(facts):
            system.ltm.upsert(
                user_id=f"u{u}",
                category=Category.PREFERENCE,
                key=f"k{f}",
                value={"v": f},
                text=f"user {u} prefers thing {f}",
                expires_at=engine.ltm_expires_at(Category.PREFERENCE),
            )
        for n in range(notes):
            system.stm.add(
                user_id=f"u{u}",
                session_id="s1",
                text=f"note {n} of user {u}: I need a blue bag",
                force=True,
                type=MemoryType.PREFERENCE,
                **engine.stm_expiry(MemoryType.PREFERENCE),
            )


def _stored(system: MemorySystem, users: int) -> int:
    """Facts and notes still stored (expired or not: lazy expiry hides them from reads,
    only a sweep removes them)."""
    return sum(
        system.ltm.count(filter=LtmFilter(user_id=f"u{u}", include_dead=True))
        + system.stm.count(filter=StmFilter(user_id=f"u{u}", include_dead=True))
        for u in range(users)
    )


# ---------------------------------------------------------------- the lease
def test_one_holder_at_a_time_renewal_release_and_a_fence_per_takeover(
    client: redis.Redis, namespace: Namespace
) -> None:
    a = Lease(client, namespace, lease_s=5)
    b = Lease(client, namespace, lease_s=5)
    assert a.acquire() and not b.acquire()
    first = a.fence
    assert a.renew() and a.check() and not b.check()
    assert client.pttl(a.key) > 4000  # renewed to the full length
    assert a.release() and not a.held
    assert b.acquire(), "a released lease is free at once"
    assert b.fence == first + 1
    assert not a.renew() and not a.check(), "the old holder can neither renew nor pass"
    _expire(client, b.key)  # b paused past its lease
    assert a.acquire() and a.fence == first + 2
    assert not b.check() and not b.renew() and not b.release()
    assert a.holder_token() == a.token, "b's release did not delete a's lease"
    assert a.current_fence() == first + 2


def test_a_check_needs_the_margin_left(client: redis.Redis, namespace: Namespace) -> None:
    lease = Lease(client, namespace, lease_s=10, margin_s=2)
    assert lease.acquire()
    client.pexpire(lease.key, 1500)  # the lease is ours, with less than the margin left
    assert not lease.check()
    assert not lease.held


def test_a_paused_holder_applies_no_batch_after_losing_its_lease(
    settings: Settings, client: redis.Redis
) -> None:
    strategy = parse_strategy(SMALL_BATCHES)
    clock = VirtualClock(SystemClock().now())
    writer = _system(settings, strategy, clock)
    _seed(writer)
    clock.advance(2 * 3600)  # every fact and note is due
    paused = build_maintenance(settings, strategy, clock=clock, replica="paused", lease_s=5)
    other = build_maintenance(settings, strategy, clock=clock, replica="other", lease_s=5)
    try:
        assert paused.lease.acquire()
        _expire(client, paused.lease.key)  # frozen: it renewed nothing while the lease ran
        assert other.lease.acquire() and other.lease.fence == paused.lease.fence + 1
        assert _stored(writer, 3) == 21
        assert paused.sweep_cycle() is False
        assert paused.batches == 0, "no batch passed the check"
        assert _stored(writer, 3) == 21
        assert paused.figures.to_json()["changed"] == 0
        assert other.sweep_cycle() is True
        assert other.figures.to_json()["changed"] == 15 + 6
        assert _stored(writer, 3) == 0
    finally:
        for process in (paused, other):
            process.system.dispose()
        writer.dispose()


def test_stop_finishes_the_batch_in_hand_and_releases_the_lease(
    settings: Settings, client: redis.Redis
) -> None:
    strategy = parse_strategy(SMALL_BATCHES)
    clock = VirtualClock(SystemClock().now())
    writer = _system(settings, strategy, clock)
    _seed(writer, users=4, notes=0)  # 20 facts: five batches of four
    clock.advance(2 * 3600)
    process = build_maintenance(settings, strategy, clock=clock, replica="r1", lease_s=30)
    applied: list[int] = []
    real_apply = process.system.ltm.apply_changes

    def apply_and_stop(changes: Any, **kw: Any) -> Any:
        result = real_apply(changes, **kw)  # the batch in hand completes...
        applied.append(len(changes.delete))
        process.stop()  # ...as SIGTERM arrives during it
        return result

    process.system.ltm.apply_changes = apply_and_stop  # type: ignore[method-assign]
    try:
        process.run(duration_s=60)
        assert applied == [4], "one batch applied whole, none after the stop"
        assert _stored(writer, 4) == 16
        assert client.get(process.lease.key) is None, "released, not left to expire"
        assert Lease(client, Namespace(settings.prefix), lease_s=5).acquire()
    finally:
        process.system.dispose()
        writer.dispose()


# ---------------------------------------------------------------- events
def _publish_events(settings: Settings, writer: MemorySystem, n: int) -> list[str]:
    """`n` order_completed events, each deleting one preference fact of its order."""
    bus = build_event_bus(settings)
    ids = []
    for i in range(n):
        writer.ltm.upsert(
            user_id="buyer",
            category=Category.PREFERENCE,
            key=f"gift_wrap_{i}",
            value={"wrap": True, "order_id": f"o{i}"},
            text=f"wrap order o{i} as a gift",
        )
        event = Event("order_completed", "buyer", writer.clock.now() + 1, {"order_id": f"o{i}"})
        ids.append(bus.publish(event))
    bus.dispose()
    return ids


def _deleted_by_events(writer: MemorySystem) -> list[str]:
    entries = writer.ltm.audit_log(user_id="buyer")
    return sorted(e.key for e in entries if e.actor == "events" and e.action == "delete")


def test_events_pending_at_a_dead_replica_are_applied_once_after_restart_or_claim(
    settings: Settings,
) -> None:
    strategy = load_strategy("event_driven")
    clock = VirtualClock(SystemClock().now())
    writer = _system(settings, strategy, clock)
    first = build_maintenance(settings, strategy, clock=clock, replica="r1")
    ids = _publish_events(settings, writer, 6)
    bus = first.bus
    # r1 was handed the first four and died before acknowledging them; r0 the other two.
    assert len(bus._xreadgroup(EVENTS_GROUP, "r1", new=True, count=4, block_ms=None)) == 4
    assert len(bus._xreadgroup(EVENTS_GROUP, "r0", new=True, count=2, block_ms=None)) == 2
    assert bus.pending(group=EVENTS_GROUP) == 6
    try:
        assert first.consume_events_once() == 4, "a restarted replica takes its own first"
        assert bus.pending(group=EVENTS_GROUP) == 2
        second = build_maintenance(settings, strategy, clock=clock, replica="r2", claim_idle_s=0)
        claimed = second.bus.claim_stale(group=EVENTS_GROUP, consumer="r2", min_idle_ms=0)
        assert claimed == ids[4:]
        assert second.consume_events_once() == 2
        assert bus.pending(group=EVENTS_GROUP) == 0
        assert _deleted_by_events(writer) == [f"gift_wrap_{i}" for i in range(6)]
        applied = [p.figures.to_json()["events_applied"] for p in (first, second)]
        assert applied == [4, 2]
        assert first.figures.to_json()["event_lag_ms"]["max"] >= 0
        second.system.dispose()
    finally:
        first.system.dispose()
        writer.dispose()


# ---------------------------------------------------------------- shared sessions
def test_sessions_of_a_serving_process_are_consolidated_by_the_maintenance_process(
    settings: Settings, client: redis.Redis
) -> None:
    from reference.maintenance import ServingBackground

    strategy = load_strategy("hybrid")
    clock = VirtualClock(SystemClock().now())
    serving = _system(settings, strategy, clock)
    with ServingBackground(serving, interval_s=60):
        serving.turn(user_id="ann", session_id="s1", text="I always want my receipts by e-mail")
        serving.turn(user_id="ann", session_id="s1", text="My favourite colour is green")
    assert serving.engine is not None and len(serving.engine.sessions) == 0  # handed over
    shared = SharedSessions(client, Namespace(settings.prefix))
    assert shared.count() == 1
    said_at = clock.now()
    clock.advance(2 * 3600)  # the session ended
    process = build_maintenance(settings, strategy, clock=clock, replica="m1")
    try:
        assert process.lease.acquire()
        assert process.sweep_cycle()
        fig = process.figures.to_json()
        assert fig["sessions_consolidated"] == 1 and fig["episodes"] >= 1
        assert shared.count() == 0
        # the serving process's buffered activity reached the store the sweeper reads
        assert process.system.ltm.last_active(user_ids=["ann"]) == {"ann": said_at}
        assert serving.stm.count(filter=StmFilter(user_id="ann", session_id="s1")) == 0
    finally:
        process.system.dispose()
        serving.dispose()


# ---------------------------------------------------------------- subprocesses
def _strategy_file(tmp_path: Path) -> Path:
    path = tmp_path / "small_batches.yaml"
    path.write_text(SMALL_BATCHES, encoding="utf-8")
    return path


def _holder(client: redis.Redis, lease_key: str) -> str | None:
    value = client.get(lease_key)
    return None if value is None else str(value)


def test_failover_a_killed_holder_is_replaced_within_two_lease_periods(
    settings: Settings, client: redis.Redis, tmp_path: Path
) -> None:
    lease_s = 3.0
    key = Namespace(settings.prefix).lease_key("sweeper")
    fence_key = Namespace(settings.prefix).lease_fence_key("sweeper")
    args = ("--strategy", "typed_ttl", "--lease-s", str(lease_s))
    first = _spawn(settings, tmp_path, "r1", *args)
    second = None
    try:
        _until("r1 to take the lease", lambda: _holder(client, key))
        figures = tmp_path / "r2.json"
        second = _spawn(settings, tmp_path, "r2", *args, "--figures", str(figures),
                        "--figures-every", "0.2")  # fmt: skip
        _until("r2 to be up", figures.exists)
        assert int(client.get(fence_key) or 0) == 1
        first.send_signal(signal.SIGKILL)
        killed = time.monotonic()
        first.wait(timeout=30)
        _until("r2 to take the lease", lambda: int(client.get(fence_key) or 0) == 2)
        took_s = time.monotonic() - killed
        print(f"failover took {took_s:.2f} s")
        assert took_s <= 2 * lease_s, f"failover took {took_s:.2f} s"
        fig = _until(
            "r2 to sweep",
            lambda: (f := json.loads(figures.read_text()))["cycles"] >= 1 and f,
        )
        assert fig["lease"]["acquired"] == 1
    finally:
        _kill(first)
        if second is not None:
            _kill(second)


def test_killed_mid_batch_then_restarted_every_change_is_applied_exactly_once(
    settings: Settings, tmp_path: Path
) -> None:
    strategy_file = _strategy_file(tmp_path)
    strategy = parse_strategy(SMALL_BATCHES)
    clock = VirtualClock(SystemClock().now() - DAY)  # written a day ago: due now
    writer = _system(settings, strategy, clock)
    _seed(writer, users=5, facts=4, notes=2)  # 20 facts, 10 notes
    args = ("--strategy", str(strategy_file), "--lease-s", "2")
    victim = _spawn(settings, tmp_path, "victim", *args, "--fault", "kill@4")
    try:
        victim.wait(timeout=WAIT_S)
        assert victim.returncode == -signal.SIGKILL
        wall = VirtualClock(SystemClock().now())
        reader = _system(settings, strategy, wall)
        left = _stored(reader, 5)
        assert 0 < left < 30, "killed after some batches were applied, not all"
        figures = tmp_path / "again.json"
        again = _spawn(settings, tmp_path, "again", *args, "--figures", str(figures),
                       "--figures-every", "0.2")  # fmt: skip
        try:
            _until("the restart to sweep", lambda: figures.exists()
                   and json.loads(figures.read_text())["cycles"] >= 1)  # fmt: skip
        finally:
            again.send_signal(signal.SIGTERM)
            assert again.wait(timeout=60) == 0
        assert _stored(reader, 5) == 0
        for u in range(5):
            entries = reader.ltm.audit_log(user_id=f"u{u}")
            deletes = [e.fact_id for e in entries if e.action == "delete"]
            assert len(deletes) == len(set(deletes)) == 4, "one delete per fact, none twice"
        assert reader.engine is not None
        rule = reader.engine.due_rule
        assert reader.ltm.scan_due(now=wall.now(), rule=rule, after=None, limit=100).records == []
        reader.dispose()
    finally:
        _kill(victim)
        writer.dispose()


def test_sigterm_releases_the_lease_and_writes_the_figures(
    settings: Settings, client: redis.Redis, tmp_path: Path
) -> None:
    key = Namespace(settings.prefix).lease_key("sweeper")
    figures = tmp_path / "fig.json"
    proc = _spawn(settings, tmp_path, "r1", "--strategy", "hybrid", "--lease-s", "60",
                  "--figures", str(figures))  # fmt: skip
    try:
        _until("r1 to take the lease", lambda: _holder(client, key))
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
        assert _holder(client, key) is None, "released, not left to run out its 60 s"
        fig = json.loads(figures.read_text())
        assert fig["kind"] == "maintenance" and fig["replica"] == "r1"
        assert (fig["lease"]["acquired"], fig["lease"]["lost"]) == (1, 0)
        assert Lease(client, Namespace(settings.prefix)).acquire(), "taken at once"
    finally:
        _kill(proc)


# ---------------------------------------------------------------- the command's input
@pytest.mark.parametrize(
    ("args", "option", "says"),
    [
        (["--strategy", "hybird"], "--strategy", "Did you mean 'hybrid'"),
        (["--strategy", "oracle"], "--strategy", "cannot run in production"),
        (["--strategy", "hybrid", "--time-scale", "0"], "--time-scale", "> 0"),
        (["--strategy", "hybrid", "--time-scale", "-5"], "--time-scale", "> 0"),
        (["--strategy", "hybrid", "--lease-s", "0.5"], "--lease-s", "at least 1"),
        (["--strategy", "hybrid", "--duration", "soon"], "--duration", "duration"),
        (["--strategy", "hybrid", "--clock-origin", "5"], "--clock-origin", "--time-scale"),
    ],
)
def test_bad_input_is_a_clear_error_naming_the_option(
    args: list[str], option: str, says: str
) -> None:
    from click.testing import CliRunner

    from memharness.cli import main

    result = CliRunner().invoke(main, ["maintain", *args])
    assert result.exit_code == 2, result.output
    assert option in result.output and says in result.output, result.output


def test_figures_in_prometheus_text(settings: Settings) -> None:
    from reference.maintenance import MaintenanceFigures

    figures = MaintenanceFigures(strategy="hybrid", fingerprint="abc", replica="r1", time_scale=1)
    figures.sweep_cycle(ms=12.5, examined=10, changed=3, sessions=1, episodes=2)
    figures.event_applied(40.0)
    text = figures.to_prometheus()
    assert 'memh_maintenance_changed_total{strategy="hybrid",replica="r1"} 3.0' in text
    lag = 'memh_maintenance_event_lag_ms{strategy="hybrid",replica="r1",quantile="p95"} 40.0'
    assert lag in text
    assert text.count("# TYPE memh_maintenance_cycle_ms gauge") == 1


def test_a_process_refuses_the_oracle(settings: Settings) -> None:
    from reference.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match="production"):
        build_maintenance(settings, load_strategy("oracle"))

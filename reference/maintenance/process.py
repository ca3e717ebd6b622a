"""The maintenance process: a strategy's background work, beside the serving processes.

One `MaintenanceProcess` per replica; run N of them on the same servers and namespace:

- **events** (every replica, its own thread): the business events on the Redis Stream
  through the consumer group `forgetting`, consumer = the replica's name, applied by the
  engine through `IdempotentHandler` (one effect per event whatever the redeliveries).
  A restarted replica of the same name gets its own pending events first; every
  `claim_idle_s` a replica also claims the events another (dead) replica left pending
  that long (`EventBus.claim_stale`). Event lag: the moment an event was applied minus
  the milliseconds of its stream id (when Redis received it).
- **sweeps** (the lease holder only, the main thread): every `strategy.sweep_interval_s`
  of the process's clock (on a `ScaledClock` of scale N, N times as often in wall time)
  the sweep planner's batches (`sweeper.plan_sweep`, `strategy.sweep_batch_size` records
  a page) applied by the engine's executor. Before each batch that writes, the
  executor's `before_batch` hook checks the lease (`Lease.ensure`, renewing it when a
  third of it has passed): a replica that lost its lease stops with nothing of that
  batch applied. Ended sessions are consolidated by the same sweep: the sessions the
  serving processes touched come from `SharedSessions` (written by their
  `ServingBackground`). The process serves no turns, so it has no buffered activity or
  accesses to flush first, and it consumes its events on their own thread.
- **stop** (`stop()`, SIGTERM/SIGINT in `run_maintenance`): the batch in hand finishes,
  no new one starts, the lease is released (another replica takes it at once), the
  figures are written.

Figures (`MaintenanceFigures`) are written atomically to `figures_path` every
`figures_every_s` wall seconds and at the end, and served as Prometheus text.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import redis

from reference.clock import Clock, SystemClock
from reference.errors import BackendUnavailable, ConfigurationError, InvalidInput
from reference.forgetting.consolidation import SessionTracker
from reference.forgetting.events import EventBus, IdempotentHandler, parse_stream_id
from reference.forgetting.sweeper import plan_sweep
from reference.maintenance.figures import MaintenanceFigures
from reference.maintenance.lease import Lease, LeaseLost
from reference.maintenance.shared import SharedSessions
from reference.models import Event
from reference.policy.strategy import Strategy
from reference.system import MemorySystem
from reference.validation import check_id

log = logging.getLogger(__name__)

#: The consumer group the maintenance processes share.
EVENTS_GROUP = "forgetting"
#: The lease's name: one sweeper per namespace.
LEASE_NAME = "sweeper"
#: What a server can raise into a loop (a layer's error, the lease's and the bus's raw
#: Redis client, a socket): counted, logged, tried again next time. Anything else is a
#: bug and stops the process.
SERVER_ERRORS = (BackendUnavailable, redis.RedisError, OSError)


class Stopping(Exception):
    """Raised by the batch hook when the process was asked to stop: the sweep ends there."""


@dataclass(frozen=True, slots=True)
class BatchFault:
    """Fault injection for tests: at the `at`-th batch (counted over the process's life,
    after its lease check passed, before it is applied) `kill` the process with SIGKILL
    or `block` it there until it is killed."""

    action: Literal["kill", "block"]
    at: int

    @classmethod
    def parse(cls, text: str) -> BatchFault:
        action, sep, at = text.partition("@")
        if action not in ("kill", "block") or not sep or not at.isdigit() or int(at) < 1:
            raise InvalidInput("fault", f"{text!r} must be kill@N or block@N (N >= 1)")
        return cls(action, int(at))  # type: ignore[arg-type]


def default_replica_name() -> str:
    """`<host>-<pid>`, made a valid id."""
    host = "".join(c if c.isalnum() or c in "_.-" else "-" for c in socket.gethostname())
    return f"{host.strip('-.') or 'host'}-{os.getpid()}"


class MaintenanceProcess:
    """One replica's loop (see the module docstring). Build, then `run()`; `stop()` from
    another thread or a signal handler."""

    def __init__(
        self,
        system: MemorySystem,
        bus: EventBus,
        *,
        replica: str,
        lease: Lease,
        shared: SharedSessions,
        figures: MaintenanceFigures,
        figures_path: Path | None = None,
        figures_every_s: float = 10.0,
        claim_idle_s: float | None = None,
        event_block_ms: int = 100,
        fault: BatchFault | None = None,
        wall: Clock | None = None,
    ) -> None:
        engine = system.engine
        if engine is None:
            raise ConfigurationError("the maintenance process needs a forgetting engine")
        if engine.strategy.oracle:
            raise ConfigurationError(
                f"strategy {engine.strategy.name!r} reads the scenario's future probes "
                "(the oracle): it cannot run in production"
            )
        if not figures_every_s > 0:
            raise InvalidInput("figures_every_s", f"must be > 0, got {figures_every_s!r}")
        self.system = system
        self.engine = engine
        self.strategy: Strategy = engine.strategy
        self.clock = system.clock
        self.bus = bus
        self.replica = check_id("replica", replica)
        self.lease = lease
        self.shared = shared
        self.figures = figures
        self.figures_path = figures_path
        self.figures_every_s = float(figures_every_s)
        self.claim_idle_ms = int(
            1000 * (2 * lease.lease_s if claim_idle_s is None else claim_idle_s)
        )
        self.event_block_ms = int(event_block_ms)
        self.fault = fault
        self.wall = wall or SystemClock()
        self.batches = 0
        self._stop = threading.Event()
        self._last_renew = 0.0
        self._next_sweep_at: float | None = None  # on the process clock
        bus.ensure_group(EVENTS_GROUP)

    # ------------------------------------------------------------------ control
    def stop(self) -> None:
        """Ask the loop to stop after the batch in hand (safe from a signal handler)."""
        self._stop.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def run(self, *, duration_s: float | None = None) -> None:
        """Run until `stop()` or `duration_s` wall seconds; then release and write."""
        deadline = None if duration_s is None else time.monotonic() + duration_s
        events = threading.Thread(target=self._events_loop, name="events", daemon=True)
        events.start()
        next_figures = time.monotonic() + self.figures_every_s
        try:
            while not self._stop.is_set():
                if deadline is not None and time.monotonic() >= deadline:
                    break
                self._lease_step()
                if self.lease.held and self._sweep_due():
                    self.sweep_cycle()
                if time.monotonic() >= next_figures:
                    self.write_figures()
                    next_figures = time.monotonic() + self.figures_every_s
                waits = [self._wall_until_sweep(), self.lease.lease_s / 3, self.figures_every_s]
                if deadline is not None:
                    waits.append(deadline - time.monotonic())
                self._stop.wait(max(0.0, min(waits)))
        finally:
            self._stop.set()
            events.join(timeout=10 + self.event_block_ms / 1000)
            self._release()
            self.write_figures()

    # ------------------------------------------------------------------ lease
    def _lease_step(self) -> None:
        try:
            if self.lease.held:
                if time.monotonic() - self._last_renew >= self.lease.lease_s / 3:
                    if self.lease.renew():
                        self._last_renew = time.monotonic()
                    else:
                        self.figures.lease_ended(lost=True)
            elif self.lease.acquire():
                self._last_renew = time.monotonic()
                self._next_sweep_at = None  # a new holder sweeps at once
                self.figures.lease_taken()
                log.info("%s took the lease (fence %d)", self.replica, self.lease.fence)
        except SERVER_ERRORS:
            self.figures.error()
            log.exception("lease step failed")

    def _release(self) -> None:
        if not self.lease.held:
            return
        try:
            self.lease.release()
        except SERVER_ERRORS:
            self.figures.error()
            log.exception("lease release failed (it expires by itself)")
        self.figures.lease_ended(lost=False)

    def _before_batch(self) -> None:
        if self._stop.is_set():
            raise Stopping("stop requested: no new batch")
        self.lease.ensure()
        if time.monotonic() - self._last_renew >= self.lease.lease_s / 3:
            if not self.lease.renew():
                raise LeaseLost(f"lease {self.lease.key}: renewal refused")
            self._last_renew = time.monotonic()
        self.batches += 1
        if self.fault is not None and self.batches == self.fault.at:
            if self.fault.action == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            threading.Event().wait()  # block: held here until the process is killed

    # ------------------------------------------------------------------ sweeps
    def _sweep_due(self) -> bool:
        return self._next_sweep_at is None or self.clock.now() >= self._next_sweep_at

    def _wall_until_sweep(self) -> float:
        if not self.lease.held:
            return self.lease.lease_s / 3
        if self._next_sweep_at is None:
            return 0.0
        scale = self.clock.native_ttl_scale or 1.0
        return max(0.0, (self._next_sweep_at - self.clock.now()) / scale)

    def sweep_cycle(self) -> bool:
        """One sweep under the lease, with the shared open sessions; True if it ran to
        the end (False: the lease was lost, a stop came, or it failed)."""
        started = time.perf_counter()
        self._next_sweep_at = self.clock.now() + self.strategy.sweep_interval_s
        tracker = SessionTracker()
        pulled: dict[str, float] = {}
        try:
            if self.strategy.consolidates:
                pulled = self.shared.pull(tracker, self.clock.now())
            inputs = self.engine.sweep_inputs(sessions=tracker)
            executor = self.engine.executor(sessions=tracker, before_batch=self._before_batch)
            batches = plan_sweep(inputs, self.strategy, self.clock.now())
            stats = executor.sweep(batches, dry_run=False, events=0, started=started)
        except LeaseLost:
            self.figures.lease_ended(lost=True)
            log.warning("%s lost the lease during a sweep", self.replica)
            return False
        except Stopping:
            return False
        except SERVER_ERRORS:
            self.figures.error()
            log.exception("sweep failed")
            return False
        finally:
            if pulled:
                try:
                    self.shared.settle(tracker, pulled)
                except SERVER_ERRORS:
                    self.figures.error()
                    log.exception("settling the shared sessions failed")
        changed = stats.expired + stats.archived + stats.anonymised + stats.deleted
        self.figures.sweep_cycle(
            ms=(time.perf_counter() - started) * 1000,
            examined=stats.examined,
            changed=changed,
            sessions=stats.sessions_consolidated,
            episodes=len(stats.episodes),
        )
        return True

    # ------------------------------------------------------------------ events
    def _events_loop(self) -> None:
        handler = IdempotentHandler(self.bus, EVENTS_GROUP, self._apply_event)
        next_claim = 0.0
        while not self._stop.is_set():
            try:
                if time.monotonic() >= next_claim:
                    self.bus.claim_stale(
                        group=EVENTS_GROUP, consumer=self.replica, min_idle_ms=self.claim_idle_ms
                    )
                    next_claim = time.monotonic() + self.claim_idle_ms / 2000
                self.bus.consume(
                    group=EVENTS_GROUP,
                    consumer=self.replica,
                    handler=handler,
                    max_events=100,
                    block_ms=self.event_block_ms,
                )
            except SERVER_ERRORS:
                self.figures.error()
                log.exception("event consumption failed")
                self._stop.wait(0.5)  # a server hiccup: do not spin

    def _apply_event(self, event_id: str, event: Event) -> None:
        self.engine.handle_event(event)
        ms, _ = parse_stream_id("event_id", event_id)
        self.figures.event_applied(self.wall.now() * 1000 - ms)

    def consume_events_once(self) -> int:
        """Settle what is waiting for this replica now (tests, and a final drain)."""
        handler = IdempotentHandler(self.bus, EVENTS_GROUP, self._apply_event)
        return self.bus.consume(
            group=EVENTS_GROUP, consumer=self.replica, handler=handler, max_events=1000
        )

    # ------------------------------------------------------------------ figures
    def write_figures(self) -> None:
        if self.figures_path is None:
            return
        try:
            self.figures.write(self.figures_path)
        except OSError:
            self.figures.error()
            log.exception("writing the figures to %s failed", self.figures_path)


def describe(process: MaintenanceProcess) -> dict[str, Any]:
    """What a replica runs, for its start-up line."""
    return {
        "replica": process.replica,
        "strategy": process.strategy.name,
        "sweep_interval_s": process.strategy.sweep_interval_s,
        "batch": process.strategy.sweep_batch_size,
        "lease_s": process.lease.lease_s,
        "time_scale": process.clock.native_ttl_scale,
    }

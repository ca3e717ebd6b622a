"""Building and running one maintenance replica from `Settings` (what `memharness
maintain` does): the memory system on the shared servers, its event bus, the lease, the
shared open sessions, figures, signals and the metrics endpoint."""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

from reference.clock import Clock, SystemClock
from reference.errors import ConfigurationError
from reference.factory import build_event_bus, build_memory_system
from reference.keys import Namespace
from reference.maintenance.figures import MaintenanceFigures, MetricsServer
from reference.maintenance.lease import Lease
from reference.maintenance.process import (
    LEASE_NAME,
    BatchFault,
    MaintenanceProcess,
    default_replica_name,
)
from reference.maintenance.shared import SharedSessions
from reference.monitoring import exposition
from reference.policy.strategy import Strategy
from reference.settings import Settings

log = logging.getLogger(__name__)


def build_maintenance(
    settings: Settings,
    strategy: Strategy,
    *,
    clock: Clock | None = None,
    replica: str | None = None,
    lease_s: float = 10.0,
    figures_path: Path | None = None,
    figures_every_s: float = 10.0,
    claim_idle_s: float | None = None,
    fault: BatchFault | None = None,
) -> MaintenanceProcess:
    """A replica on the servers `settings` names (not the in-memory backends: the
    serving processes could not share them)."""
    if settings.backend == "memory":
        raise ConfigurationError(
            "backend: the maintenance process runs beside serving processes on shared "
            "servers; MEMH_BACKEND=memory keeps each process's memory to itself"
        )
    if settings.chroma_url is None:
        raise ConfigurationError(
            "chroma_url: Chroma's embedded client cannot be shared with the serving "
            "processes; start a Chroma server (`chroma run`, or "
            "reference.stm.chroma_server.start_chroma_server) and set MEMH_CHROMA_URL for both"
        )
    if strategy.oracle:
        raise ConfigurationError(
            f"strategy {strategy.name!r} reads the scenario's future probes (the oracle): "
            "it cannot run in production"
        )
    clock = clock or SystemClock()
    namespace = Namespace(settings.prefix)
    system = build_memory_system(settings, strategy=strategy, clock=clock, namespace=namespace)
    client: Any = getattr(system.session, "client", None)
    if client is None:
        raise ConfigurationError("the maintenance process needs the Redis session store")
    bus = build_event_bus(settings, namespace=namespace, clock=clock)
    name = replica or default_replica_name()
    figures = MaintenanceFigures(
        strategy=strategy.name,
        fingerprint=strategy.fingerprint(),
        replica=name,
        time_scale=clock.native_ttl_scale or 1.0,
    )
    return MaintenanceProcess(
        system,
        bus,
        replica=name,
        lease=Lease(client, namespace, name=LEASE_NAME, lease_s=lease_s),
        shared=SharedSessions(client, namespace),
        figures=figures,
        figures_path=figures_path,
        figures_every_s=figures_every_s,
        claim_idle_s=claim_idle_s,
        fault=fault,
    )


def counters_text(process: MaintenanceProcess) -> Callable[[], str] | None:
    """The Prometheus text of the process engine's counters (`reference.monitoring`),
    labelled with the strategy and the replica."""
    engine = process.system.engine
    if engine is None:
        return None
    labels = {"strategy": process.strategy.name, "replica": process.replica}
    return lambda: exposition(engine.counters, labels)


def run_maintenance(
    process: MaintenanceProcess,
    *,
    duration_s: float | None = None,
    metrics_port: int | None = None,
    on_metrics: Callable[[int], None] | None = None,
) -> None:
    """Run `process` in this (main) thread until SIGTERM/SIGINT or `duration_s`: the batch
    in hand finishes, the lease is released, the figures written; then the system's
    connections are closed."""
    server = None
    if metrics_port is not None:
        server = MetricsServer(process.figures, metrics_port, more=counters_text(process))
    if server is not None and on_metrics is not None:
        on_metrics(server.port)
    previous: dict[signal.Signals, Any] = {}

    def stop(signum: int, frame: FrameType | None) -> None:
        process.stop()

    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            previous[sig] = signal.signal(sig, stop)
    try:
        process.run(duration_s=duration_s)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if server is not None:
            server.close()
        process.system.dispose()
        process.bus.dispose()

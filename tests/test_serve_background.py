"""`memharness serve` runs the strategy's background work: on the in-memory backend a
thread of the service sweeps on the service's clock (`memharness.serve.background`)."""

from __future__ import annotations

import threading
from pathlib import Path

from memharness.serve.background import background_work
from reference.settings import Settings
from reference.stm.filters import StmFilter
from tests.conftest import T0
from tests.serve_support import memory_system

DAY = 86_400.0


def test_the_in_memory_service_sweeps_what_its_strategy_expires(tmp_path: Path) -> None:
    system = memory_system("srvbg", tmp_path, strategy="fixed_ttl")
    system.turn(user_id="acme.alice", session_id="s1", text="I always prefer DHL for deliveries.")
    every = StmFilter(user_id="acme.alice", include_dead=True)
    assert len(system.stm.records(filter=every)) == 1
    system.clock.set(T0 + 30 * DAY)  # past fixed_ttl's TTL: expired, not yet swept
    assert len(system.stm.records(filter=every)) == 1
    swept = threading.Event()
    original = system.sweep

    def sweep_and_tell() -> object:
        stats = original()
        swept.set()
        return stats

    system.sweep = sweep_and_tell  # type: ignore[method-assign]
    settings = Settings(backend="memory", data_dir=tmp_path)
    with background_work(
        system, settings, "fixed_ttl", virtual_time=True, sweep_every_s=0.01
    ) as said:
        assert "in-process sweeps" in said
        assert swept.wait(timeout=30), "the service's sweeper never ran"
    assert system.stm.records(filter=every) == []
    system.dispose()

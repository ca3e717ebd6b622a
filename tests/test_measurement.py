"""Measuring changes nothing: a probe, a footprint sample (daily or at a probe's moment)
and a PII residency check leave every store byte-identical (Redis keys and values, Chroma
records, PostgreSQL rows).

A replay on the embedded servers wraps the harness's three measurements: before and after
each one, every layer of the namespace is snapshotted; the two snapshots must be equal.
Under `importance` a touch of a fact would move its access time (the thing importance
decay reads), so the strategies chosen are the ones where a touch would show.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from memharness.scenarios import load_scenario
from memharness.sim import layer_reads
from memharness.sim import replay as replay_module
from memharness.sim.plan import StrategySpec, probe_times, sample_times, sweep_ticks
from memharness.sim.replay import SimUser
from memharness.sim.shard import ShardReplayer
from reference.clock import VirtualClock
from reference.factory import build_memory_system
from reference.keys import Namespace
from reference.ltm.embedded_pg import start_embedded_postgres
from reference.policy.oracle import OracleAdvice
from reference.settings import Settings
from reference.stm.chroma_client import make_chroma_client
from reference.system import MemorySystem
from reference.text_interfaces import Embedder
from tests.test_engine import KEY, redis_client

SUITE = Path(__file__).resolve().parents[1] / "scenarios"
Snapshot = dict[str, Any]


def snapshot(system: MemorySystem, data_dir: Path) -> Snapshot:
    """Every byte the namespace holds in each layer, in a comparable form."""
    ns: Namespace = system.stm.namespace
    client = redis_client(data_dir)
    redis_state = {
        key: (client.type(key), client.dump(key), client.pttl(key))
        for key in sorted(client.scan_iter(ns.key_pattern()))
    }
    collection = make_chroma_client(None, data_dir).get_collection(ns.stm_collection)
    got = collection.get(include=["documents", "metadatas", "embeddings"])
    order = sorted(range(len(got["ids"])), key=lambda i: got["ids"][i])
    chroma_state = [
        (got["ids"][i], got["documents"][i], got["metadatas"][i], list(got["embeddings"][i]))
        for i in order
    ]
    tables = {}
    with psycopg.connect(start_embedded_postgres(data_dir / "pg").url) as conn:
        for table in (ns.facts_table, ns.audit_table, ns.users_table):
            rows = conn.execute(
                sql.SQL("SELECT t::text FROM {} AS t ORDER BY 1").format(sql.Identifier(table))
            ).fetchall()
            tables[table] = [r[0] for r in rows]
    return {"redis": redis_state, "chroma": chroma_state, "pg": tables}


def unchanged(
    method: Callable[..., Any],
    data_dir: Path,
    seen: list[str],
    system_of: Callable[[Any], MemorySystem] = lambda replay: replay.system,
) -> Callable[..., Any]:
    """`method`, checking that it changes no byte of the system its first argument gives."""

    def measured(first: Any, *args: Any, **kwargs: Any) -> Any:
        system = system_of(first)
        system.engine.flush_activity()  # buffered writes belong to the steps before
        before = snapshot(system, data_dir)
        result = method(first, *args, **kwargs)
        after = snapshot(system, data_dir)
        for layer in before:
            assert after[layer] == before[layer], f"{method.__name__} changed {layer}"
        seen.append(method.__name__)
        return result

    return measured


@pytest.mark.parametrize("name", ["importance", "hybrid"])
def test_probes_footprint_samples_and_pii_checks_change_no_byte(
    name: str, embedder: Embedder, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    users = [
        SimUser(i, u)
        for i, u in enumerate(
            load_scenario(SUITE / "pii_disclosure.yaml").users
            + load_scenario(SUITE / "drift.yaml").users
        )
    ]
    seen: list[str] = []
    for method in ("probe", "sample"):
        original = getattr(replay_module.Replay, method)
        monkeypatch.setattr(replay_module.Replay, method, unchanged(original, data_dir, seen))
    pii_check = unchanged(layer_reads.resolved, data_dir, seen, system_of=lambda system: system)
    monkeypatch.setattr(replay_module, "resolved", pii_check)
    strategy = StrategySpec.parse(name).strategy
    times = [s.at for u in users for s in u.user.timeline]
    settings = Settings(backend="embedded", data_dir=data_dir, encryption_key=KEY)  # type: ignore[arg-type]

    def build(clock: VirtualClock, ns: Namespace, oracle: OracleAdvice | None) -> MemorySystem:
        return build_memory_system(
            settings, clock=clock, embedder=embedder, namespace=ns, strategy=strategy
        )

    result = ShardReplayer(users, k=5).run(
        build,
        strategy,
        Namespace(f"measure_{name}"),
        ticks=sweep_ticks(times, strategy.sweep_interval_s, 21600.0),
        samples=sample_times(times),
        peak_samples=probe_times([u.user for u in users]),
    )
    assert result.probes > 0 and result.turns > 0
    assert result.peak_footprint, "the samples at probe moments were taken"
    assert {"probe", "sample", "resolved"} <= set(seen), "every measurement was exercised"

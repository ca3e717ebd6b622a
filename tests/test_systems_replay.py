"""Replaying hand-written scenarios against a system under test (`PeerReplay`), here
LangGraph's InMemoryStore, on the hashing embedder: what the harness does for a system
without native expiry (sweeps delete), for one with it (TTLs handed over, the system
expires), and for one that cannot delete (the leak is counted and named)."""

from __future__ import annotations

import importlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import ray
from click.testing import CliRunner

from memharness.cli import main
from memharness.scenarios import load_scenario
from memharness.sim.metrics import merge
from memharness.sim.plan import StrategySpec, probe_times, sample_times, sweep_ticks
from memharness.sim.replay import SimUser
from memharness.sim.shard import ShardReplayer
from memharness.sim.tally import ShardResult
from memharness.systems.base import Hit, NativeExpiry, Unsupported, Written
from memharness.systems.langgraph_memory import LangGraphMemoryAdapter
from reference.keys import Namespace
from reference.settings import Settings
from reference.text_interfaces import Embedder

SUITE = Path(__file__).resolve().parent.parent / "scenarios"


class Recording(LangGraphMemoryAdapter):
    """The LangGraph adapter, noting every delete and each add's time to live."""

    def __init__(self, *, namespace: str, embedder: Embedder) -> None:
        super().__init__(namespace=namespace, embedder=embedder)
        self.deleted: list[tuple[str, str, bool]] = []  # (user, id, still held after)
        self.ttls: list[float | None] = []

    def add(self, **kwargs: Any) -> Written:
        self.ttls.append(kwargs["ttl_s"])
        return super().add(**kwargs)

    def delete(self, *, user_id: str, memory_id: str) -> None:
        super().delete(user_id=user_id, memory_id=memory_id)
        self.deleted.append((user_id, memory_id, self.holds(user_id=user_id, memory_id=memory_id)))


class CannotDelete(Recording):
    """A system without delete or delete-by-user."""

    def delete(self, *, user_id: str, memory_id: str) -> None:
        raise Unsupported(self.name, "delete a memory")

    def delete_user(self, *, user_id: str) -> None:
        raise Unsupported(self.name, "delete a user's data")


class HidesExpired(Recording):
    """Native expiry in the style of mem0: day-free here, 60 s granularity, expired
    memories hidden from search and kept until deleted."""

    def __init__(self, *, namespace: str, embedder: Embedder) -> None:
        super().__init__(namespace=namespace, embedder=embedder)
        self.capabilities = type(self.capabilities)(
            native_expiry=NativeExpiry(60.0, "hidden", False, "virtual")
        )
        self.deadline: dict[str, float] = {}

    def add(self, **kwargs: Any) -> Written:
        written = super().add(**kwargs)
        if kwargs["ttl_s"] is not None:
            self.deadline[written.memory_ids[0]] = kwargs["at"] + kwargs["ttl_s"]
        return written

    def search(
        self, *, user_id: str, query: str, k: int, at: float, read_only: bool = False
    ) -> list[Hit]:
        hits = super().search(user_id=user_id, query=query, k=100, at=at)
        return [h for h in hits if at < self.deadline.get(h.memory_id, float("inf"))][:k]


class SweepsExpired(HidesExpired):
    """Native expiry in the style of LangGraph's stores: expired memories stay readable
    until the system's own sweep deletes them."""

    def __init__(self, *, namespace: str, embedder: Embedder) -> None:
        super().__init__(namespace=namespace, embedder=embedder)
        self.capabilities = type(self.capabilities)(
            native_expiry=NativeExpiry(60.0, "readable", False, "virtual")
        )

    def search(
        self, *, user_id: str, query: str, k: int, at: float, read_only: bool = False
    ) -> list[Hit]:
        return LangGraphMemoryAdapter.search(self, user_id=user_id, query=query, k=k, at=at)

    def sweep(self, at: float) -> int:
        due = [m for m, deadline in self.deadline.items() if deadline <= at]
        for memory_id in due:
            LangGraphMemoryAdapter.delete(
                self, user_id=self._held[memory_id][0], memory_id=memory_id
            )
            del self.deadline[memory_id]
        return len(due)


def replay(
    scenario: str, spec: str, adapter: type[Recording], embedder: Embedder
) -> tuple[ShardResult, Recording]:
    users = [SimUser(i, u) for i, u in enumerate(load_scenario(SUITE / scenario).users)]
    strategy = StrategySpec.parse(spec).strategy
    times = [s.at for u in users for s in u.user.timeline]
    settings = Settings(backend="memory")
    opened: list[Recording] = []

    def open_adapter(namespace: str) -> Recording:
        opened.append(adapter(namespace=namespace, embedder=embedder))
        return opened[0]

    result = ShardReplayer(users, k=5).run_peer(
        open_adapter,
        strategy,
        Namespace("peer_test"),
        settings=settings,
        embedder=embedder,
        ticks=sweep_ticks(times, strategy.sweep_interval_s, 21600.0),
        samples=sample_times(times),
        peak_samples=probe_times([u.user for u in users]),
    )
    return result, opened[0]


def test_keep_all_recalls_everything_and_deletes_nothing(embedder: Embedder) -> None:
    result, store = replay("drift.yaml", "keep_all", Recording, embedder)
    m = merge([result])["metrics"]
    assert m["recall_at_k"] == 1.0 and m["leakage"] == 0
    # Nothing removes a superseded preference: it keeps coming back, stale.
    assert m["stale_at_k"] > 0
    assert store.deleted == [] and store.ttls and set(store.ttls) == {None}
    assert result.capabilities["native_expiry"] is None


def test_a_ttl_is_applied_by_the_harness_sweep_and_the_memory_is_gone(
    embedder: Embedder,
) -> None:
    kept, _ = replay("drift.yaml", "keep_all", Recording, embedder)
    result, store = replay("drift.yaml", "fixed_ttl:ttl.default_s=60", Recording, embedder)
    assert store.deleted, "the sweeps deleted the expired memories"
    assert not any(held for _, _, held in store.deleted), "a deleted memory is not held"
    m = merge([result])["metrics"]
    assert m["stale_at_k"] == 0.0 < merge([kept])["metrics"]["stale_at_k"]
    # A minute is shorter than any gap from statement to probe: over-forgetting, named.
    assert m["over_forget_rate"] > 0
    causes = {w["cause"] for r in result.probe_records for w in r["why"].values()}
    assert causes == {"ttl.default_s"}  # the rule, as the reference names it
    final = merge([result])["footprint"]["final"]["ltm"]["records"]
    assert final < merge([kept])["footprint"]["final"]["ltm"]["records"]


def test_a_forget_command_deletes_and_nothing_leaks(embedder: Embedder) -> None:
    result, store = replay("forget_commands.yaml", "keep_all", Recording, embedder)
    m = merge([result])["metrics"]
    assert m["leakage"] == 0
    assert store.deleted and not any(held for _, _, held in store.deleted)
    assert result.monitor.forgets > 0 and result.monitor.forgets_failed == 0


def test_a_system_that_cannot_delete_leaks_and_says_so(embedder: Embedder) -> None:
    result, store = replay("forget_commands.yaml", "keep_all", CannotDelete, embedder)
    m = merge([result])["metrics"]
    assert m["leakage"] > 0
    assert m["unsupported"], "the operations it could not do are counted"
    assert any(op.startswith("delete") for op in m["unsupported"])
    assert store.footprint().memories == 0  # closed: whatever it held is dropped
    assert result.monitor.forgets_failed > 0


def test_native_expiry_gets_the_strategy_ttl_and_the_harness_does_not_expire(
    embedder: Embedder,
) -> None:
    result, store = replay("drift.yaml", "fixed_ttl:ttl.default_s=60", HidesExpired, embedder)
    assert {t for t in store.ttls} == {60.0}
    assert store.deleted == [], "expiry is the system's: the harness deletes nothing"
    m = merge([result])["metrics"]
    assert m["stale_at_k"] == 0.0 and m["over_forget_rate"] > 0  # hidden: not retrievable
    assert result.capabilities["native_expiry"]["expired"] == "hidden"


def test_an_event_invalidates_through_delete(embedder: Embedder) -> None:
    kept, _ = replay("hotline_ticket.yaml", "keep_all", Recording, embedder)
    result, store = replay("hotline_ticket.yaml", "event_driven", Recording, embedder)
    assert store.deleted
    assert merge([result])["metrics"]["stale_at_k"] < merge([kept])["metrics"]["stale_at_k"]


@pytest.mark.parametrize(
    ("value", "needle"),
    [("nosuch", "unknown system 'nosuch'"), ("reference,reference", "named twice")],
)
def test_run_rejects_a_bad_system_naming_it(value: str, needle: str, tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main,
        ["run", "--system", value, "--scenario", str(SUITE / "drift.yaml"), "--out", str(tmp_path)],
    )
    assert result.exit_code == 2, result.output
    assert needle in result.output and "Traceback" not in result.output


@pytest.fixture
def ray_session() -> Iterator[None]:
    yield
    ray.shutdown()


def test_run_system_end_to_end(ray_session: None, tmp_path: Path) -> None:
    """The whole pipeline (a Ray worker, the adapter built in it from its name, result
    files, the report's systems table) on one small scenario, beside the reference."""
    result = CliRunner().invoke(
        main,
        ["run", "--system", "langgraph-memory,reference", "--scenario",
         str(SUITE / "forget_commands.yaml"), "--strategy", "keep_all", "--backend", "memory",
         "--embedder", "hashing", "--workers", "1", "--out", str(tmp_path), "--run-id", "peers",
         "--no-progress"],
        env={"MEMH_DATA_DIR": str(tmp_path / "data"), "HF_HUB_OFFLINE": "1",
             "TRANSFORMERS_OFFLINE": "1"},
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    document = json.loads((tmp_path / "peers" / "results.json").read_text())
    entries = {e["label"]: e for e in document["scenarios"][0]["strategies"]}
    assert set(entries) == {"langgraph-memory/keep_all", "keep_all"}
    peer = entries["langgraph-memory/keep_all"]
    assert peer["system"] == "langgraph-memory" and peer["status"] == "ok"
    assert peer["metrics"]["leakage"] == 0 and peer["metrics"]["recall_at_k"] == 1.0
    assert peer["latency_ms"]["turn"]["n"] > 0 and peer["latency_ms"]["recall"]["n"] > 0
    summary = (tmp_path / "peers" / "summary.md").read_text()
    assert "## Systems × strategies" in summary
    assert "| langgraph-memory | keep_all |" in summary and "| reference | keep_all |" in summary
    assert "no native expiry" in summary


def test_the_real_embedder_recalls_and_forgets_through_langgraph() -> None:
    """MiniLM, as a run uses it (offline), under keep_all and hybrid."""
    from reference.embedding import MiniLMEmbedder

    minilm = MiniLMEmbedder()
    result, store = replay("forget_commands.yaml", "keep_all", Recording, minilm)
    m = merge([result])["metrics"]
    assert m["recall_at_k"] == 1.0 and m["leakage"] == 0 and store.deleted
    result, _ = replay("drift.yaml", "hybrid", Recording, minilm)
    assert merge([result])["metrics"]["stale_at_k"] == 0.0


def test_a_missing_extra_is_named_without_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import memharness.systems as systems

    real = importlib.import_module

    def not_installed(module: str) -> Any:
        if module == systems.SYSTEMS["langgraph-memory"].module:
            raise ModuleNotFoundError("No module named 'langgraph'", name="langgraph")
        return real(module)

    monkeypatch.setattr(systems.importlib, "import_module", not_installed)
    result = CliRunner().invoke(
        main,
        ["run", "--system", "langgraph-memory", "--scenario", str(SUITE / "drift.yaml"),
         "--out", str(tmp_path)],
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    assert "pip install -e '.[langgraph]'" in result.output
    assert "Traceback" not in result.output and not (tmp_path / "results.json").exists()


def test_one_layer_keeps_what_each_rule_covers() -> None:
    from memharness.sim.peer_mirror import one_layer, peer_kind
    from reference.models import MemoryType

    hybrid = StrategySpec.parse("hybrid").strategy
    flat = one_layer(hybrid, native_expiry=False)
    knowledge = next(e for e in flat.events if e.event == "knowledge_updated")
    assert knowledge.layers == ("stm",) and knowledge.types == (MemoryType.KNOWLEDGE,)
    assert flat.ttl is not None and flat.ttl.ttl_for(MemoryType.PROFILE) is None  # a fact
    assert flat.promotion == "rules" and flat.pii is None
    assert one_layer(hybrid, native_expiry=True).ttl is None  # the system's own TTL
    kind, _, tags = peer_kind("My address is 12 Oak Street", hybrid)
    assert kind is MemoryType.PROFILE and tags["topic"] == "address"
    assert peer_kind("haha nice weather today", hybrid)[0] is MemoryType.EPISODE


def test_a_system_that_sweeps_its_own_expired_memories(embedder: Embedder) -> None:
    result, store = replay("drift.yaml", "fixed_ttl:ttl.default_s=60", SweepsExpired, embedder)
    assert set(store.ttls) == {60.0} and store.deleted == []  # the harness deleted nothing
    m = merge([result])["metrics"]
    assert m["over_forget_rate"] > 0 and m["stale_at_k"] == 0.0
    causes = {w["cause"] for r in result.probe_records for w in r["why"].values()}
    assert causes == {"native expiry"}

"""Planners and the executor (reference/forgetting/plans.py, executor.py), on the in-memory
stack: what a planner decides for given records, strategy and time; a dry run of the
executor writes nothing; a sweep pages by `sweep_batch_size`, checking its hook before
each page that writes. The other backends run the same planners and executor through
tests/test_engine.py and tests/test_consolidation.py."""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import pytest

from reference.clock import VirtualClock
from reference.factory import build_memory_system
from reference.forgetting.consolidation import episode_key, plan_session
from reference.forgetting.engine import ForgettingEngine
from reference.forgetting.executor import Executor
from reference.forgetting.forgetter import plan_event
from reference.forgetting.plans import CONSOLIDATION_ACTOR, ChangeBatch, SweepStats
from reference.forgetting.sweeper import plan_sweep
from reference.keys import Namespace
from reference.ltm.filters import LtmFilter
from reference.models import Event
from reference.policy.decisions import Action
from reference.policy.loading import load_strategy
from reference.policy.strategy import Strategy
from reference.settings import Settings
from reference.stm.filters import StmFilter
from reference.system import MemorySystem
from reference.text_interfaces import Embedder
from tests.test_engine import KEY

ALICE, BOB = "alice", "bob"
HOUR = 3600.0
SAYS = [
    "My address is 12 Oak Street, Springfield.",
    "I always want deliveries by SF Express.",
    "I like jazz music.",
    "Please book a table for two at 7pm at Luigi's.",
    "My phone is 13812345678.",
]


def one_hour(**params: Any) -> Strategy:
    """Every memory lives one hour (inline promotion only, unless `params` say)."""
    base = {"ttl.default_s": HOUR, "promotion": "rules", "consolidation": None}
    return load_strategy("fixed_ttl").with_params(base | params)


@pytest.fixture
def build(clock: VirtualClock, namespace: Namespace, data_dir: Path, embedder: Embedder) -> Any:
    def make(strategy: Strategy) -> MemorySystem:
        settings = Settings(
            backend="memory",
            data_dir=data_dir,
            prefix=namespace.prefix,
            encryption_key=KEY,  # type: ignore[arg-type]
        )
        return build_memory_system(
            settings, clock=clock, embedder=embedder, namespace=namespace, strategy=strategy
        )

    return make


def engine_of(system: MemorySystem) -> ForgettingEngine:
    assert system.engine is not None
    return system.engine


def said(system: MemorySystem, user: str, texts: list[str], session: str = "s1") -> None:
    for text in texts:
        system.turn(user_id=user, session_id=session, text=text)


def stored(system: MemorySystem) -> dict[str, Any]:
    """Everything the stores hold for both users, dead records and the audit included."""
    out: dict[str, Any] = {}
    for user in (ALICE, BOB):
        out[f"stm {user}"] = system.stm.records(filter=StmFilter(user_id=user, include_dead=True))
        out[f"ltm {user}"] = system.ltm.facts(filter=LtmFilter(user_id=user, include_dead=True))
        out[f"audit {user}"] = system.ltm.audit_log(user_id=user)
        out[f"sessions {user}"] = system.session.list_user_sessions(user_id=user)
    out["activity"] = system.ltm.last_active(user_ids=[ALICE, BOB])
    return out


def run(executor: Executor, system: MemorySystem, *, dry_run: bool) -> SweepStats:
    engine = engine_of(system)
    batches = plan_sweep(engine.sweep_inputs(), engine.strategy, engine.clock.now())
    return executor.sweep(batches, dry_run=dry_run, events=0, started=time.perf_counter())


def test_the_sweep_planner_expires_every_record_and_fact_past_its_ttl(
    build: Any, clock: VirtualClock
) -> None:
    system = build(one_hour())
    said(system, ALICE, SAYS[:2])
    said(system, BOB, SAYS[2:3])
    engine = engine_of(system)
    records = {r.record_id for r in system.stm.records(filter=StmFilter(user_id=ALICE))}
    records |= {r.record_id for r in system.stm.records(filter=StmFilter(user_id=BOB))}
    facts = {f.fact_id for f in system.ltm.facts(filter=LtmFilter(user_id=ALICE))}
    assert records and facts

    early = list(plan_sweep(engine.sweep_inputs(), engine.strategy, clock.now() + 60))
    assert early == [], "nothing is due yet (session, record or fact): it plans nothing"

    batches = list(plan_sweep(engine.sweep_inputs(), engine.strategy, clock.now() + HOUR))
    session, *pages = batches
    assert session == ChangeBatch(layer="session", expire_sessions=1000)
    stm = [b for b in pages if b.layer == "stm"]
    ltm = [b for b in pages if b.layer == "ltm"]
    assert len(stm) == len(ltm) == 1 and len(pages) == 2
    assert stm[0].stm_remove == records and stm[0].examined == len(records)
    assert ltm[0].ltm.delete == facts and ltm[0].examined == len(facts)
    assert not (ltm[0].ltm.erase or ltm[0].ltm.archive or ltm[0].ltm.anonymise)
    # Each change carries its decision's reason, naming the rule, as its audit cause.
    assert set(ltm[0].ltm.causes) == facts
    assert {c.split(" by ")[-1] for c in ltm[0].ltm.causes.values()} == {"ttl.default_s"}
    assert all(c.startswith("sweep: expired at ") for c in ltm[0].ltm.causes.values())
    assert {d.action for b in pages for d in b.decisions} == {Action.EXPIRE}
    assert all(b.writes for b in batches)


def test_the_consolidation_planner_makes_an_episode_per_utterance_and_empties_the_session(
    build: Any, clock: VirtualClock
) -> None:
    strategy = load_strategy("hybrid").with_params({"consolidation.min_importance": 4})
    system = build(strategy)
    said(system, ALICE, ["Hi there, how are you?", "I like jazz music.", "My son is 7."])
    every = system.stm.records(filter=StmFilter(user_id=ALICE, include_dead=True))
    before = stored(system)

    batch = plan_session(system.stm, system.ltm, strategy, ALICE, "s1", clock.now())

    assert stored(system) == before, "a planner reads, never writes"
    assert batch.actor == CONSOLIDATION_ACTOR and batch.consolidated == (ALICE, "s1")
    assert batch.stm_remove == {r.record_id for r in every}
    assert batch.session_records == len(every)
    chosen = {e.record.text for e in batch.episodes}
    dropped = {rid for rid, _, _ in batch.dropped}
    assert {r.record_id for r in every if r.text in chosen} | dropped == batch.stm_remove
    assert all(e.importance >= 4 for e in batch.episodes)
    assert "I like jazz music." in chosen

    done = engine_of(system).executor().consolidation(batch, dry_run=False)
    assert [f.key for f in done.episodes] == [
        episode_key(e.record.record_id) for e in batch.episodes
    ]
    assert system.stm.records(filter=StmFilter(user_id=ALICE, include_dead=True)) == []


def test_the_event_planner_archives_and_removes_what_the_strategy_invalidates(
    build: Any, clock: VirtualClock
) -> None:
    system = build(load_strategy("event_driven"))
    system.turn(
        user_id=ALICE,
        session_id="s1",
        text="I always want gift wrapping for this order.",
        metadata={"order_id": "O1"},
    )
    clock.advance(60)  # an event invalidates what was said before it
    event = Event(name="order_completed", user_id=ALICE, at=clock.now(), payload={"order_id": "O1"})
    batch = plan_event(event, stm=system.stm, ltm=system.ltm, strategy=engine_of(system).strategy)
    records = system.stm.records(filter=StmFilter(user_id=ALICE))
    assert batch.stm_remove == {r.record_id for r in records if r.metadata.get("order_id")}
    outcome = system.handle_event(event)
    assert outcome.stm_removed == len(batch.stm_remove) > 0
    assert (outcome.ltm_archived, outcome.ltm_deleted) == (0, len(batch.ltm.delete)) == (0, 1)


@pytest.mark.parametrize("strategy", ["fixed_ttl", "hybrid", "importance", "typed_ttl"])
def test_a_dry_run_counts_the_decisions_and_writes_nothing(
    build: Any, clock: VirtualClock, strategy: str
) -> None:
    system = build(load_strategy(strategy))
    said(system, ALICE, SAYS)
    said(system, BOB, SAYS[:3], session="s2")
    clock.advance(400 * 24 * HOUR)  # past every deadline of these strategies
    before = stored(system)
    facts = {f.fact_id for user in (ALICE, BOB) for f in before[f"ltm {user}"]}

    dry = run(engine_of(system).executor(), system, dry_run=True)

    assert stored(system) == before
    assert dry.dry_run and dry.expired + dry.archived + dry.deleted > 0
    assert dry.sessions_consolidated == 2 * load_strategy(strategy).consolidates
    assert dry.episodes == () and dry.by_layer["session"].batches == 0
    # The same plan applied: the sessions' records are consolidated (or dropped) first,
    # so STM decides on none of them; LTM on the same facts (and on the new episodes).
    real = system.sweep()
    assert real.sessions_consolidated == dry.sessions_consolidated
    assert real.consolidated == dry.consolidated == len(real.episodes)
    assert real.consolidation_dropped == dry.consolidation_dropped
    ltm = {(d.record_id, d.action) for d in dry.by_layer["ltm"].decisions}
    decided = real.by_layer["ltm"].decisions
    assert {(d.record_id, d.action) for d in decided if d.record_id in facts} == ltm


def test_a_sweep_pages_by_the_batch_size_and_checks_its_hook_before_each_write(
    build: Any, clock: VirtualClock
) -> None:
    system = build(one_hour(sweep_batch_size=2))
    said(system, ALICE, SAYS)
    said(system, BOB, SAYS, session="s2")
    n = len(system.stm.records(filter=StmFilter(user_id=ALICE))) * 2
    clock.advance(2 * HOUR)
    calls: list[int] = []
    executor = engine_of(system).executor(before_batch=lambda: calls.append(1))

    stats = run(executor, system, dry_run=False)

    stm = stats.by_layer["stm"]
    assert stm.examined == stm.expired == n
    assert stm.batches == math.ceil(n / 2)
    layers = stats.by_layer.values()
    assert len(calls) == sum(layer.batches for layer in layers)
    assert system.stm.records(filter=StmFilter(user_id=ALICE, include_dead=True)) == []


def test_a_hook_that_raises_stops_the_sweep_with_that_batch_unapplied(
    build: Any, clock: VirtualClock
) -> None:
    system = build(one_hour(sweep_batch_size=2))
    said(system, ALICE, SAYS)
    clock.advance(2 * HOUR)
    every = StmFilter(user_id=ALICE, include_dead=True)
    n = len(system.stm.records(filter=every))
    calls: list[int] = []

    def lease() -> None:  # the sessions' page, then one STM page, then the lease is gone
        calls.append(1)
        if len(calls) == 3:
            raise RuntimeError("lease lost")

    with pytest.raises(RuntimeError, match="lease lost"):
        run(engine_of(system).executor(before_batch=lease), system, dry_run=False)
    assert len(system.stm.records(filter=every)) == n - 2

"""The due index: a sweep that visits only what is due decides exactly what a full scan
decides, record by record, under every strategy, on both backends.

Random timelines (the steps of `test_forgetting_properties`: utterances, forget
commands, time jumps, sweeps, events, task updates) run under each built-in strategy.
At every sweep step, and after every time jump, a dry run of each kind is compared
(layer, record, action); then the due sweep runs for real, so the index is exercised
through the changes it drives. Whenever the engine says it is quiet (`quiet_until`: a
due sweep returns at once), a full scan must find nothing to do either.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reference.clock import VirtualClock
from reference.dueindex import DueIndex
from reference.factory import build_memory_system
from reference.forgetting.consolidation import plan_ended
from reference.forgetting.sweeper import newly_inactive
from reference.keys import Namespace
from reference.models import Status
from reference.policy.loading import BUILTINS, load_strategy
from reference.policy.oracle import OracleAdvice
from reference.policy.rules import DAY_S
from reference.policy.sweep import DueRule, due_rule, next_due_at
from reference.session.memory_store import InMemorySessionStore
from reference.settings import Settings
from reference.system import MemorySystem
from reference.text_interfaces import Embedder
from tests.conftest import T0
from tests.test_engine import drop_embedded_namespace
from tests.test_forgetting_properties import KEY, Model, run, step
from tests.test_policy import fact, record

#: "sole_writer": the embedded servers, each store keeping the deadlines it wrote
#: (`build_memory_system(sole_writer=True)`), so the engine plans from them.
EXAMPLES = {"memory": 40, "embedded": 6, "sole_writer": 6}


def decisions(system: MemorySystem, *, full_scan: bool) -> set[tuple[str, str, str]]:
    stats = system._engine().sweep(dry_run=True, full_scan=full_scan)
    return {
        (d.layer, d.record_id, d.action.value)
        for layer in stats.by_layer.values()
        for d in layer.decisions
    }


def assert_same_decisions(system: MemorySystem, where: str) -> None:
    scan = decisions(system, full_scan=True)
    due = decisions(system, full_scan=False)
    assert due == scan, f"{where}: due-index sweep {sorted(due)} != full scan {sorted(scan)}"
    engine = system._engine()
    now = engine.clock.now()
    if now < engine.quiet_until():  # a sweep returns at once: there must be nothing to do
        assert scan == set(), f"{where}: quiet until {engine.quiet_until()}, yet {scan}"
        stores = (engine.session, engine.stm, engine.ltm)
        assert list(plan_ended(*stores, engine.sessions, engine.strategy, now)) == [], where
        assert newly_inactive(engine.sweep_inputs(), engine.strategy, now)[0] == [], where
        if isinstance(system.session, InMemorySessionStore):
            assert all(now < e.expires_at for e in system.session._sessions.values()), where


def oracle() -> OracleAdvice:
    return OracleAdvice(needed_until=lambda m: math.inf if len(m.text) % 2 == 0 else None)


@contextlib.contextmanager
def built(backend: str, name: str, embedder: Embedder, data_dir: Path, n: int) -> Iterator[Any]:
    namespace = Namespace(f"due{n}")
    clock = VirtualClock(T0)
    servers = "memory" if backend == "memory" else "embedded"
    system = build_memory_system(
        Settings(backend=servers, data_dir=data_dir, prefix=namespace.prefix, encryption_key=KEY),  # type: ignore[arg-type]
        clock=clock,
        embedder=embedder,
        namespace=namespace,
        strategy=name,
        oracle=oracle(),
        sole_writer=backend == "sole_writer",
    )
    try:
        yield system, clock
    finally:
        system.dispose()
        if servers == "embedded":
            drop_embedded_namespace(data_dir, namespace)


_count = iter(range(10**9))


@pytest.mark.parametrize("backend", ["memory", "embedded", "sole_writer"])
@pytest.mark.parametrize("name", list(BUILTINS))
def test_a_due_sweep_decides_what_a_full_scan_decides(
    backend: str, name: str, embedder: Embedder, data_dir: Path
) -> None:
    @settings(
        max_examples=EXAMPLES[backend],
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(steps=st.lists(step, min_size=1, max_size=30))
    def replay(steps: list[tuple[Any, ...]]) -> None:
        with built(backend, name, embedder, data_dir, next(_count)) as (system, clock):
            model = Model()
            system.sweep()  # the oracle's first sweep scans; later ones use the index
            for i, (action, *args) in enumerate(steps):
                if action in ("sweep", "advance"):
                    if action == "advance":
                        run(system, model, clock, action, args)
                    assert_same_decisions(system, f"{name} step {i} ({action})")
                    system.sweep()
                else:
                    run(system, model, clock, action, args)
            clock.advance(200 * DAY_S)  # everything time-bound is due by now
            assert_same_decisions(system, f"{name} at the end")

    replay()


@pytest.mark.parametrize("backend", ["memory", "embedded", "sole_writer"])
def test_an_archived_users_records_are_visited_when_the_user_becomes_inactive(
    backend: str, embedder: Embedder, data_dir: Path
) -> None:
    with built(backend, "hybrid", embedder, data_dir, next(_count)) as (system, clock):
        system.turn(user_id="alice", session_id="a1", text="My address is 12 Oak Street.")
        clock.advance(89 * DAY_S)
        assert system.sweep().archived == 0
        clock.advance(2 * DAY_S)
        first = system.sweep()
        assert first.by_layer["ltm"].archived == 1
        assert system.sweep().examined == 0  # archived once: not visited again


@given(
    st.lists(
        st.tuples(st.sampled_from("abcdef"), st.one_of(st.none(), st.floats(-10, 10))),
        max_size=40,
    ),
    st.floats(-12, 12),
)
def test_the_due_index_lists_exactly_the_ids_due(
    moves: list[tuple[str, float | None]], until: float
) -> None:
    index, model = DueIndex(), {}
    for ident, moment in moves:
        index.set(ident, moment)
        if moment is None:
            model.pop(ident, None)
        else:
            model[ident] = moment
    expected = sorted((m, i) for i, m in model.items() if m <= until)
    assert index.due(until) == [i for _, i in expected]
    assert index.first() == min(model.values(), default=math.inf)
    assert len(index) == len(model)


def test_next_due_at_is_the_first_deadline_a_sweep_acts_on() -> None:
    hybrid = load_strategy("hybrid")
    assert hybrid.archival is not None and hybrid.pii is not None
    rule = due_rule(hybrid)
    assert rule == DueRule(hybrid.archival.delete_after_s, hybrid.pii.anonymise_after_s)
    sealed = {"value": "x", "_sealed": "c2VhbGVk", "_sealed_at": T0 + 5}
    assert next_due_at(fact("f", value=sealed), rule) == T0 + 5 + DAY_S
    assert next_due_at(fact("f", value=sealed, expires_at=T0 + 60), rule) == T0 + 60
    assert next_due_at(fact("f", status=Status.ARCHIVED), rule) == T0 + 30 * DAY_S
    assert next_due_at(fact("f", status=Status.ARCHIVED), DueRule()) is None
    assert next_due_at(fact("f", status=Status.DELETED, expires_at=T0), rule) is None
    assert next_due_at(record("r", expires_at=T0 + 9), rule) == T0 + 9
    assert next_due_at(record("r", status=Status.ARCHIVED), rule) == -math.inf
    assert next_due_at(record("r"), rule) is None

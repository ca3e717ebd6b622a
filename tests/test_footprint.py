"""The footprint from counters: the in-memory stores keep their live records and payload
bytes as records come and go; it must equal a count over every record (the pages of
`scan`, which the real backends use), after every step of random timelines under every
strategy. Reading it changes nothing."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reference.clock import VirtualClock
from reference.factory import build_memory_system
from reference.footprint import Usage, session_bytes
from reference.keys import Namespace
from reference.ltm.base import LongTermStore
from reference.policy.loading import BUILTINS
from reference.policy.oracle import OracleAdvice
from reference.settings import Settings
from reference.stm.base import ShortTermStore
from reference.system import MemorySystem
from reference.text_interfaces import Embedder
from tests.conftest import T0
from tests.test_forgetting_properties import KEY, USERS, Model, run, step


def assert_counters_match_a_scan(system: MemorySystem, where: str) -> None:
    now = system.clock.now()
    stm, ltm = system.stm, system.ltm
    assert stm.usage() == ShortTermStore._usage(stm, now), f"STM at {where}"
    assert ltm.usage() == LongTermStore._usage(ltm, now), f"LTM at {where}"
    states = [s for u in USERS for s in system.session.list_user_sessions(user_id=u)]
    listed = Usage(len(states), sum(session_bytes(s) for s in states))
    assert system.session.usage() == listed, f"sessions at {where}"


@pytest.mark.parametrize("name", list(BUILTINS))
@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(steps=st.lists(step, min_size=1, max_size=30))
def test_the_counted_footprint_is_the_scanned_one(
    name: str, steps: list[tuple[Any, ...]], embedder: Embedder, tmp_path: Path
) -> None:
    clock = VirtualClock(T0)
    system = build_memory_system(
        Settings(backend="memory", data_dir=tmp_path, encryption_key=KEY),  # type: ignore[arg-type]
        clock=clock,
        embedder=embedder,
        namespace=Namespace("footprint"),
        strategy=name,
        oracle=OracleAdvice(needed_until=lambda m: math.inf if len(m.text) % 3 else None),
    )
    model = Model()
    for i, (action, *args) in enumerate(steps):
        run(system, model, clock, action, args)
        assert_counters_match_a_scan(system, f"step {i} ({action})")

"""The strategy's background work, each sample the same work (memharness/ab/background.py):

- `sweep.batch`: one `engine.sweep()` that finds and removes one batch
  (`strategy.sweep_batch_size`) of STM records past their expiry, written untimed before
  each sample, in the measured namespace (its 5,000 or 100,000 other STM records, its
  LTM table): the rest of a sweep (activity, sessions, the LTM pass) is inside too;
- `consolidate.session`: `engine.consolidate_session` of an ended session of 10 STM
  statements, which become LTM episodes (embedded, sealed) and leave STM;
- `event.apply`: `engine.handle_event` for the strategy's first `match_on` event rule,
  on a user with 10 STM records and 10 LTM facts, half of each matching.

They run on the real servers only, after every other operation (bench/conftest.py: the
sweep's churn must not be in the STM index while a turn's operations are timed), with 10
samples (sweep) or 60 and no SLA (INFO): they run off the turn's path, in the maintenance
process. Each sample is checked as it runs: one that did less than its work fails the
test. An operation the strategy has no rule for (consolidation, events) is skipped.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest

from bench.config import BenchCase, BenchConfig
from bench.measure import Measure
from memharness.ab.background import EVENT_MEMORIES, SESSION_RECORDS, Background, event_rule

LAYER = "maintenance"


def _run(call: Callable[[], Any]) -> Any:
    return call()


def _measure(
    measure: Measure,
    op: str,
    case: BenchCase,
    config: BenchConfig,
    setup: Callable[[random.Random, int], Callable[[], Any]],
    check: Callable[[Any], None],
    *,
    rounds: int,
    params: dict[str, Any],
) -> None:
    rng, counter = random.Random(op), iter(range(1_000_000))

    def prepared() -> tuple[tuple[Callable[[], Any]], dict[str, Any]]:
        call = setup(rng, next(counter))

        def checked() -> Any:
            done = call()
            check(done)
            return done

        return (checked,), {}

    engine = case.system.engine
    assert engine is not None
    measure(
        op,
        LAYER,
        _run,
        case=case,
        setup=prepared,
        rounds=min(rounds, config.rounds),
        warmup=1,
        params={"strategy": engine.strategy.name, **params},
    )


def test_sweep_batch(measure: Measure, real_case: BenchCase, bench_config: BenchConfig) -> None:
    work = Background(real_case.system)
    if work.strategy.oracle:
        pytest.skip("an oracle strategy sweeps on the simulator's advice")
    batch = work.strategy.sweep_batch_size

    def check(stats: Any) -> None:
        assert stats.by_layer["stm"].expired >= batch, stats

    _measure(
        measure,
        "sweep.batch",
        real_case,
        bench_config,
        work.sweep_setup,
        check,
        rounds=10,
        params={"due_stm_records": batch},
    )


def test_consolidate_session(
    measure: Measure, real_case: BenchCase, bench_config: BenchConfig
) -> None:
    work = Background(real_case.system)
    if not work.strategy.consolidates:
        pytest.skip(f"{work.strategy.name} does not consolidate sessions")

    def check(done: Any) -> None:
        assert len(done.episodes) == SESSION_RECORDS, done

    _measure(
        measure,
        "consolidate.session",
        real_case,
        bench_config,
        work.consolidation_setup,
        check,
        rounds=60,
        params={"stm_records": SESSION_RECORDS},
    )


def test_event_apply(measure: Measure, real_case: BenchCase, bench_config: BenchConfig) -> None:
    work = Background(real_case.system)
    rule = event_rule(work.strategy)
    if rule is None:
        pytest.skip(f"{work.strategy.name} has no event rule matching on payload fields")
    half = EVENT_MEMORIES // 2

    def check(done: Any) -> None:
        stm = done.stm_removed if "stm" in rule.layers else half
        ltm = done.ltm_archived + done.ltm_deleted if "ltm" in rule.layers else half
        assert (stm, ltm) == (half, half), done

    _measure(
        measure,
        "event.apply",
        real_case,
        bench_config,
        work.event_setup,
        check,
        rounds=60,
        params={"event": rule.event, "memories_per_layer": EVENT_MEMORIES, "matching": half},
    )

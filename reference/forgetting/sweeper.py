"""One sweep of the forgetting engine over every layer, in batches, with a dry run.

Order: events waiting on the attached bus, buffered user activity, then sessions
(`sweep_expired` until a batch comes back short), STM and LTM. STM and LTM are read a
page at a time (`scan`, by id, `strategy.sweep_batch_size` per page); each page goes
through `policy.select_for_forgetting` and its decisions are applied before the next
page is read, so a sweep holds one page in memory whatever the store's size.

What each decision does:

- expire: STM removed; LTM deleted (its audit keeps the masked value);
- archive: STM removed (no archived state: the layer is short-lived); LTM archived;
- delete: STM removed; an archived LTM fact past its grace erased (audit values
  redacted), a live one (the oracle's decision) deleted;
- anonymise: LTM only, the sealed original dropped from the value and its audit.

A deleted fact's audit entries lose their sealed originals too (the masked form stays):
nothing can decrypt a fact that no longer exists.

A dry run reads and decides exactly as a sweep does and writes nothing: no events are
consumed, no activity is flushed (buffered activity still counts), sessions are not
examined (their store has no read-only way to list expired sessions).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from reference.crypto import anonymise_value
from reference.errors import ConfigurationError
from reference.forgetting.policy import Action, Decision, select_for_forgetting
from reference.ltm.base import FactChanges
from reference.models import Fact, Status

if TYPE_CHECKING:
    from reference.forgetting.engine import ForgettingEngine

SWEEP_ACTOR = "sweeper"


@dataclass(slots=True)
class LayerStats:
    """What a sweep did (or, in a dry run, would do) in one layer."""

    examined: int = 0
    expired: int = 0
    archived: int = 0
    anonymised: int = 0
    deleted: int = 0
    batches: int = 0


@dataclass(frozen=True, slots=True)
class SweepStats:
    """One sweep: totals over the layers, and each layer's own figures.

    `examined` counts records read and decided on; `expired` what was past its deadline;
    `archived`, `anonymised`, `deleted` (grace over, oracle, erased) the other decisions.
    """

    examined: int
    expired: int
    archived: int
    anonymised: int
    deleted: int
    duration_s: float
    dry_run: bool = False
    events: int = 0
    by_layer: dict[str, LayerStats] = field(default_factory=dict)

    @property
    def examined_per_s(self) -> float:
        """Throughput: records examined per second of sweep."""
        return self.examined / self.duration_s if self.duration_s > 0 else float("inf")


def run_sweep(engine: ForgettingEngine, *, dry_run: bool) -> SweepStats:
    """Sweep every layer of `engine` once (see the module docstring)."""
    strategy = engine.strategy
    if strategy.oracle and engine.oracle is None:
        raise ConfigurationError(
            f"strategy {strategy.name!r} sweeps on the harness's advice: pass OracleAdvice "
            "to ForgettingEngine.advise (or build_memory_system(oracle=...)) first"
        )
    started = time.perf_counter()
    events = 0
    if not dry_run:
        events = engine.consume_attached()
        engine.flush_activity()
    layers = {
        "session": _sweep_sessions(engine, dry_run),
        "stm": _sweep_stm(engine, dry_run),
        "ltm": _sweep_ltm(engine, dry_run),
    }
    return SweepStats(
        examined=sum(s.examined for s in layers.values()),
        expired=sum(s.expired for s in layers.values()),
        archived=sum(s.archived for s in layers.values()),
        anonymised=sum(s.anonymised for s in layers.values()),
        deleted=sum(s.deleted for s in layers.values()),
        duration_s=time.perf_counter() - started,
        dry_run=dry_run,
        events=events,
        by_layer=layers,
    )


def _sweep_sessions(engine: ForgettingEngine, dry_run: bool) -> LayerStats:
    stats = LayerStats()
    if dry_run:
        return stats
    batch = engine.strategy.sweep_batch_size
    while True:
        removed = engine.session.sweep_expired(batch_size=batch)
        stats.batches += 1
        stats.examined += removed
        stats.expired += removed
        if removed < batch:
            return stats


def _decide(engine: ForgettingEngine, page: list[Any]) -> list[Decision]:
    strategy = engine.strategy
    last_active = None
    if strategy.archival is not None:
        last_active = engine.last_active({r.user_id for r in page})
    return select_for_forgetting(
        page,
        strategy=strategy,
        now=engine.clock.now(),
        last_active=last_active,
        oracle=engine.oracle if strategy.oracle else None,
    )


def _count(stats: LayerStats, decisions: list[Decision]) -> None:
    for decision in decisions:
        if decision.action is Action.EXPIRE:
            stats.expired += 1
        elif decision.action is Action.ARCHIVE:
            stats.archived += 1
        elif decision.action is Action.ANONYMISE:
            stats.anonymised += 1
        else:
            stats.deleted += 1


def _sweep_stm(engine: ForgettingEngine, dry_run: bool) -> LayerStats:
    stats = LayerStats()
    batch = engine.strategy.sweep_batch_size
    after: str | None = None
    while True:
        page = engine.stm.scan(after=after, limit=batch)
        if not page:
            return stats
        stats.batches += 1
        stats.examined += len(page)
        decisions = _decide(engine, page)
        _count(stats, decisions)
        # Archiving a short-lived record is removing it; anonymising does not apply.
        remove = {d.record_id for d in decisions if d.action is not Action.ANONYMISE}
        if remove and not dry_run:
            engine.stm.purge(record_ids=remove)
        after = page[-1].record_id
        if len(page) < batch:
            return stats


def _sweep_ltm(engine: ForgettingEngine, dry_run: bool) -> LayerStats:
    stats = LayerStats()
    batch = engine.strategy.sweep_batch_size
    after: str | None = None
    while True:
        page = engine.ltm.scan(after=after, limit=batch)
        if not page:
            return stats
        stats.batches += 1
        stats.examined += len(page)
        decisions = _decide(engine, page)
        _count(stats, decisions)
        changes = fact_changes(page, decisions)
        if changes and not dry_run:
            engine.ltm.apply_changes(changes, actor=SWEEP_ACTOR)
        after = page[-1].fact_id
        if len(page) < batch:
            return stats


def fact_changes(facts: list[Fact], decisions: list[Decision]) -> FactChanges:
    """The store changes that carry out one page's LTM decisions (table above)."""
    by_id = {f.fact_id: f for f in facts}
    delete: set[str] = set()
    erase: set[str] = set()
    archive: set[str] = set()
    anonymise: dict[str, dict[str, Any]] = {}
    for decision in decisions:
        fact = by_id[decision.record_id]
        if decision.action is Action.EXPIRE:
            delete.add(fact.fact_id)
        elif decision.action is Action.DELETE:
            (erase if fact.status is Status.ARCHIVED else delete).add(fact.fact_id)
        elif decision.action is Action.ARCHIVE:
            archive.add(fact.fact_id)
        else:
            anonymise[fact.fact_id] = anonymised(fact.value)
    return FactChanges(
        delete=frozenset(delete),
        erase=frozenset(erase),
        archive=frozenset(archive),
        anonymise=anonymise,
    )


def anonymised(value: dict[str, Any]) -> dict[str, Any]:
    """`anonymise_value` of the value and of each object field in it (the policy finds
    seals one level down too)."""
    top = anonymise_value(value)
    return {k: anonymise_value(v) if isinstance(v, dict) else v for k, v in top.items()}


__all__ = ["LayerStats", "SweepStats", "anonymised", "fact_changes", "run_sweep"]

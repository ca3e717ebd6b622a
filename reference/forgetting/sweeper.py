"""One sweep of the forgetting engine over every layer, in batches, with a dry run.

Order: events waiting on the attached bus, buffered user activity, then sessions
(`sweep_expired` until a batch comes back short), the consolidation of ended sessions
into LTM episodes under `promotion: consolidate` (`consolidation.py`), STM and LTM.

A sweep visits only what is due (the due index, DESIGN.md "Time"), in three passes per
layer, each a page at a time (`strategy.sweep_batch_size`), and returns at once when the
engine's `quiet_until` says nothing can be due yet (the in-memory stores know it from
their indexes; the others are always looked at):

1. the records whose own deadline has come (`scan_due`: `policy.next_due_at` at or
   before now: expiry, an archived fact's grace, an anonymisation deadline);
2. the records of the users who became inactive since the previous sweep (archival:
   `inactive_users` over the per-user activity index);
3. under an oracle strategy, the records no future probe needs (`OracleAdvice.due`).

Each page goes through `policy.select_for_forgetting` and its decisions are applied
before the next page is read; a record is decided once per sweep. Its cost follows the
work to do, not the size of the memory. `full_scan=True` pages through every record
instead (`scan`, by id): the same decisions, record by record (the test oracle of the
due index; tests prove the two equal over random timelines for every strategy).

What each decision does:

- expire: STM removed; LTM deleted (its audit keeps the masked value);
- archive: STM removed (no archived state: the layer is short-lived); LTM archived;
- delete: STM removed; an archived LTM fact past its grace erased (audit values
  redacted), a live one (the oracle's decision) deleted;
- anonymise: LTM only, the sealed original dropped from the value and its audit.

A deleted fact's audit entries lose their sealed originals too (the masked form stays):
nothing can decrypt a fact that no longer exists.

Before each batch of changes is applied (a page of sessions, one session's
consolidation, a page of STM or LTM decisions) the sweep calls the engine's
`before_batch` hook when one is set: the maintenance process checks its lease there
(`reference.maintenance.lease`), and a hook that raises stops the sweep with nothing of
that batch applied.

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
from reference.forgetting.consolidation import consolidate_ended
from reference.ltm.base import FactChanges, LtmFilter
from reference.models import Fact, Status
from reference.policy.decisions import Action, Decision
from reference.policy.rules import Layer
from reference.policy.sweep import select_for_forgetting
from reference.records import fast_init
from reference.stm.base import StmFilter

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
    #: Every decision, in the order made (a test compares the due and full-scan sweeps).
    decisions: list[Decision] = field(default_factory=list)


@fast_init
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
    #: Ended sessions consolidated, and the LTM episodes written from them (a dry run
    #: writes none: `consolidated` counts the records it would consolidate).
    sessions_consolidated: int = 0
    consolidated: int = 0
    episodes: tuple[Fact, ...] = ()
    #: The ended sessions' live STM records that became no episode: (record_id, rule, why).
    consolidation_dropped: tuple[tuple[str, str, str], ...] = ()

    @property
    def examined_per_s(self) -> float:
        """Throughput: records examined per second of sweep."""
        return self.examined / self.duration_s if self.duration_s > 0 else float("inf")


def run_sweep(engine: ForgettingEngine, *, dry_run: bool, full_scan: bool = False) -> SweepStats:
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
    if not full_scan and engine.clock.now() < engine.quiet_until():
        layers = {"session": LayerStats(), "stm": LayerStats(), "ltm": LayerStats()}
        return SweepStats(
            examined=0,
            expired=0,
            archived=0,
            anonymised=0,
            deleted=0,
            duration_s=time.perf_counter() - started,
            dry_run=dry_run,
            events=events,
            by_layer=layers,
        )
    session = _sweep_sessions(engine, dry_run)
    consolidation = consolidate_ended(engine, dry_run=dry_run)
    if full_scan:
        stm, ltm = _sweep_stm(engine, dry_run), _sweep_ltm(engine, dry_run)
    else:
        stm, ltm = _sweep_due(engine, dry_run)
    return SweepStats(
        examined=session.examined + stm.examined + ltm.examined,
        expired=session.expired + stm.expired + ltm.expired,
        archived=session.archived + stm.archived + ltm.archived,
        anonymised=session.anonymised + stm.anonymised + ltm.anonymised,
        deleted=session.deleted + stm.deleted + ltm.deleted,
        duration_s=time.perf_counter() - started,
        dry_run=dry_run,
        events=events,
        by_layer={"session": session, "stm": stm, "ltm": ltm},
        sessions_consolidated=consolidation.sessions,
        consolidated=consolidation.consolidated,
        episodes=consolidation.episodes,
        consolidation_dropped=consolidation.dropped,
    )


def _sweep_sessions(engine: ForgettingEngine, dry_run: bool) -> LayerStats:
    stats = LayerStats()
    if dry_run:
        return stats
    batch = engine.strategy.sweep_batch_size
    while True:
        before_batch(engine)
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
    stats.decisions.extend(decisions)
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
            before_batch(engine)
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
            before_batch(engine)
            engine.ltm.apply_changes(changes, actor=SWEEP_ACTOR)
        after = page[-1].fact_id
        if len(page) < batch:
            return stats


def _sweep_due(engine: ForgettingEngine, dry_run: bool) -> tuple[LayerStats, LayerStats]:
    """Passes 1-3 of the module docstring over STM and LTM."""
    strategy, now = engine.strategy, engine.clock.now()
    batch = strategy.sweep_batch_size
    stm, ltm = _DueLayer(engine, "stm", dry_run), _DueLayer(engine, "ltm", dry_run)
    after: str | None = None
    while True:  # 1. due by their own deadlines
        records = engine.stm.scan_due(now=now, after=after, limit=batch)
        stm.visit(records.records)
        if (after := records.after) is None:
            break
    rule = engine.due_rule
    while True:
        facts = engine.ltm.scan_due(now=now, rule=rule, after=after, limit=batch)
        ltm.visit(facts.records)
        if (after := facts.after) is None:
            break
    if strategy.archival is not None:  # 2. users who became inactive
        users = engine.newly_inactive(now, advance=not dry_run)
        for start in range(0, len(users), max(1, batch // 10)):
            chunk = users[start : start + max(1, batch // 10)]
            stm.visit([r for u in chunk for r in engine.stm.records(filter=_every_stm(u))])
            ltm.visit([f for u in chunk for f in engine.ltm.facts(filter=_every_fact(u))])
    if strategy.oracle and engine.oracle is not None:  # 3. what no future probe needs
        by_user: dict[tuple[Layer, str], set[str]] = {}
        for layer, user_id, ident in engine.oracle.due(now):
            by_user.setdefault((layer, user_id), set()).add(ident)
        for (layer, user_id), idents in sorted(by_user.items()):
            ids = frozenset(idents)
            if layer == "stm":
                found: list[Any] = engine.stm.records(filter=_every_stm(user_id, ids))
                stm.visit(found)
            else:
                found = engine.ltm.facts(filter=_every_fact(user_id, ids))
                ltm.visit(found)
            if not dry_run:
                for gone in idents - {_ident_of(m) for m in found}:
                    engine.oracle.drop(layer, gone)
    return stm.stats, ltm.stats


class _DueLayer:
    """The decisions of one layer's due passes: each record once, applied page by page."""

    def __init__(self, engine: ForgettingEngine, layer: str, dry_run: bool) -> None:
        self.engine, self.layer, self.dry_run = engine, layer, dry_run
        self.stats = LayerStats()
        self.seen: set[str] = set()

    def visit(self, records: list[Any]) -> None:
        page = [r for r in records if _ident_of(r) not in self.seen]
        if not page:
            return
        self.seen.update(_ident_of(r) for r in page)
        self.stats.batches += 1
        self.stats.examined += len(page)
        decisions = _decide(self.engine, page)
        _count(self.stats, decisions)
        if not decisions or self.dry_run:
            return
        before_batch(self.engine)
        if self.layer == "stm":
            remove = {d.record_id for d in decisions if d.action is not Action.ANONYMISE}
            if remove:
                self.engine.stm.purge(record_ids=remove)
        else:
            changes = fact_changes(page, decisions)
            if changes:
                self.engine.ltm.apply_changes(changes, actor=SWEEP_ACTOR)


def before_batch(engine: ForgettingEngine) -> None:
    """Run the engine's `before_batch` hook, if any (it raises to stop the sweep)."""
    hook = engine.before_batch
    if hook is not None:
        hook()


def _ident_of(memory: Any) -> str:
    return memory.fact_id if isinstance(memory, Fact) else memory.record_id


def _every_stm(user_id: str, ids: frozenset[str] | None = None) -> StmFilter:
    return StmFilter(user_id=user_id, record_ids=ids, include_dead=True)


def _every_fact(user_id: str, ids: frozenset[str] | None = None) -> LtmFilter:
    return LtmFilter(user_id=user_id, fact_ids=ids, include_dead=True)


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


__all__ = [
    "LayerStats",
    "SweepStats",
    "anonymised",
    "before_batch",
    "fact_changes",
    "run_sweep",
]

"""The sweep planner: one sweep over every layer as a stream of `ChangeBatch`es.

Order: sessions (the executor removes expired ones a page at a time until a page comes
back short), the consolidation of ended sessions into LTM episodes under `promotion:
consolidate` (`consolidation.plan_ended`), STM and LTM. The engine consumes the events
waiting on its bus and flushes buffered activity before it plans.

A sweep visits only what is due (the due index, DESIGN.md "Time"), in three passes per
layer, each a page at a time (`strategy.sweep_batch_size`), and plans nothing when
`quiet_until` says nothing can be due yet (the in-memory stores know it from their
indexes; the others are always looked at):

1. the records whose own deadline has come (`scan_due`: `policy.next_due_at` at or
   before now: expiry, an archived fact's grace, an anonymisation deadline);
2. the records of the users who became inactive since the previous sweep (archival:
   `inactive_users` over the per-user activity index);
3. under an oracle strategy, the records no future probe needs (`OracleAdvice.due`).

Each page goes through `policy.select_for_forgetting` into one batch. `plan_sweep` is a
generator: the executor applies a batch before the next page is read, so a page sees
the changes of the pages before it, and a record is decided once per sweep. Its cost
follows the work to do, not the size of the memory. `full_scan=True` pages through
every record instead (`scan`, by id): the same decisions, record by record (the test
oracle of the due index; tests prove the two equal over random timelines for every
strategy).

What each decision does: STM records are removed (the layer is short-lived: it has no
archived or anonymised state); LTM changes are `plans.fact_changes`. A deleted fact's
audit entries lose their sealed originals too (the masked form stays): nothing can
decrypt a fact that no longer exists.

A dry run plans exactly as a sweep does and the executor applies nothing: no events are
consumed, no activity is flushed (buffered activity still counts), sessions are not
examined (their store has no read-only way to list expired sessions).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from reference.forgetting.activity import ActivityLog
from reference.forgetting.consolidation import SessionTracker, plan_ended
from reference.forgetting.plans import ChangeBatch, fact_changes
from reference.ltm.base import LongTermStore, due_margin
from reference.ltm.filters import LtmFilter
from reference.models import Fact
from reference.policy.decisions import Action, Decision
from reference.policy.oracle import OracleAdvice
from reference.policy.rules import Layer
from reference.policy.strategy import Strategy
from reference.policy.sweep import DueRule, select_for_forgetting
from reference.records import fast_init
from reference.session.base import SessionStore
from reference.stm.base import ShortTermStore
from reference.stm.filters import StmFilter


@fast_init
@dataclass(frozen=True, slots=True)
class SweepInputs:
    """What a sweep plans from: the stores (read only), the engine's in-process state
    (buffered activity and the archival mark, the open sessions, the oracle's advice)
    and the strategy's `DueRule`."""

    session: SessionStore
    stm: ShortTermStore
    ltm: LongTermStore
    activity: ActivityLog
    sessions: SessionTracker
    oracle: OracleAdvice | None
    rule: DueRule


def quiet_until(inputs: SweepInputs, strategy: Strategy) -> float:
    """A moment before which a sweep (of the due index) has nothing to do: no session to
    remove or consolidate, no record or fact due, no user's inactivity period over
    (buffered activity included), nothing the oracle lets go. -inf when a store cannot
    tell without a query (Redis, Chroma and PostgreSQL: their sweeps look). A read."""
    moments = [
        inputs.session.earliest_expiry(),
        inputs.stm.earliest_due(),
        inputs.ltm.earliest_due(inputs.rule),
    ]
    if strategy.consolidates:
        moments.append(inputs.sessions.earliest())
    if strategy.archival is not None:
        after = inputs.activity.inactive_through
        buffered = inputs.activity.pending_after(after)
        first = min([inputs.ltm.earliest_activity_after(after), *buffered])
        moments.append(first + strategy.archival.inactive_s)
    if strategy.oracle:
        moments.append(float("-inf") if inputs.oracle is None else inputs.oracle.earliest())
    return min(moments)


def newly_inactive(inputs: SweepInputs, strategy: Strategy, now: float) -> tuple[list[str], float]:
    """The users who became inactive (`archival.inactive_s` since their last activity,
    buffered activity included) after the archival mark, and the mark past them."""
    archival, mark = strategy.archival, inputs.activity.inactive_through
    if archival is None:
        return [], mark
    until = now - archival.inactive_s
    stored = inputs.ltm.inactive_users(after=mark, until=until + due_margin(now))
    buffered = inputs.activity.pending()
    seen = {
        u: max(at, buffered.get(u, at)) for u, at in inputs.ltm.last_active(user_ids=stored).items()
    }
    seen.update((u, at) for u, at in buffered.items() if u not in seen)
    idle = {u: at for u, at in seen.items() if at > mark and now >= at + archival.inactive_s}
    return sorted(idle), max(idle.values(), default=mark)


def plan_sweep(
    inputs: SweepInputs, strategy: Strategy, now: float, *, full_scan: bool = False
) -> Iterator[ChangeBatch]:
    """The batches of one sweep at `now` (module docstring), each planned after the
    previous one was applied: nothing when `quiet_until` says nothing can be due."""
    if not full_scan and now < quiet_until(inputs, strategy):
        return
    yield ChangeBatch(layer="session", expire_sessions=strategy.sweep_batch_size)
    yield from plan_ended(inputs.session, inputs.stm, inputs.ltm, inputs.sessions, strategy, now)
    if full_scan:
        yield from _scan_stm(inputs, strategy, now)
        yield from _scan_ltm(inputs, strategy, now)
    else:
        yield from _due(inputs, strategy, now)


def _decide(inputs: SweepInputs, strategy: Strategy, now: float, page: list[Any]) -> list[Decision]:
    last_active = None
    if strategy.archival is not None:
        last_active = inputs.activity.last_active(inputs.ltm, {r.user_id for r in page})
    return select_for_forgetting(
        page,
        strategy=strategy,
        now=now,
        last_active=last_active,
        oracle=inputs.oracle if strategy.oracle else None,
    )


def _page(layer: str, page: list[Any], decisions: list[Decision]) -> ChangeBatch:
    """The batch that carries out one page's decisions."""
    if layer == "stm":
        # Archiving a short-lived record is removing it (STM has no archived state).
        remove = frozenset(d.record_id for d in decisions if d.action is not Action.ANONYMISE)
        return ChangeBatch(
            layer="stm", examined=len(page), decisions=tuple(decisions), stm_remove=remove
        )
    return ChangeBatch(
        layer="ltm",
        examined=len(page),
        decisions=tuple(decisions),
        ltm=fact_changes(page, decisions),
    )


def _scan_stm(inputs: SweepInputs, strategy: Strategy, now: float) -> Iterator[ChangeBatch]:
    batch, after = strategy.sweep_batch_size, None
    while page := inputs.stm.scan(after=after, limit=batch):
        yield _page("stm", page, _decide(inputs, strategy, now, page))
        after = page[-1].record_id
        if len(page) < batch:
            return


def _scan_ltm(inputs: SweepInputs, strategy: Strategy, now: float) -> Iterator[ChangeBatch]:
    batch, after = strategy.sweep_batch_size, None
    while page := inputs.ltm.scan(after=after, limit=batch):
        yield _page("ltm", page, _decide(inputs, strategy, now, page))
        after = page[-1].fact_id
        if len(page) < batch:
            return


def _due(inputs: SweepInputs, strategy: Strategy, now: float) -> Iterator[ChangeBatch]:
    """Passes 1-3 of the module docstring over STM and LTM: each record once."""
    batch = strategy.sweep_batch_size
    seen: dict[str, set[str]] = {"stm": set(), "ltm": set()}

    def visit(layer: str, records: list[Any]) -> Iterator[ChangeBatch]:
        page = [r for r in records if _ident_of(r) not in seen[layer]]
        if page:
            seen[layer].update(_ident_of(r) for r in page)
            yield _page(layer, page, _decide(inputs, strategy, now, page))

    after: str | None = None
    while True:  # 1. due by their own deadlines
        records = inputs.stm.scan_due(now=now, after=after, limit=batch)
        yield from visit("stm", records.records)
        if (after := records.after) is None:
            break
    while True:
        facts = inputs.ltm.scan_due(now=now, rule=inputs.rule, after=after, limit=batch)
        yield from visit("ltm", facts.records)
        if (after := facts.after) is None:
            break
    if strategy.archival is not None:  # 2. users who became inactive
        users, mark = newly_inactive(inputs, strategy, now)
        if users:
            yield ChangeBatch(inactive_through=mark)
        step = max(1, batch // 10)
        for start in range(0, len(users), step):
            chunk = users[start : start + step]
            stm = [r for u in chunk for r in inputs.stm.records(filter=_every_stm(u))]
            yield from visit("stm", stm)
            ltm = [f for u in chunk for f in inputs.ltm.facts(filter=_every_fact(u))]
            yield from visit("ltm", ltm)
    if strategy.oracle and inputs.oracle is not None:  # 3. what no future probe needs
        by_user: dict[tuple[Layer, str], set[str]] = {}
        for layer, user_id, ident in inputs.oracle.due(now):
            by_user.setdefault((layer, user_id), set()).add(ident)
        for (layer, user_id), idents in sorted(by_user.items()):
            ids = frozenset(idents)
            found: list[Any]
            if layer == "stm":
                found = inputs.stm.records(filter=_every_stm(user_id, ids))
            else:
                found = inputs.ltm.facts(filter=_every_fact(user_id, ids))
            yield from visit(layer, found)
            gone = idents - {_ident_of(m) for m in found}
            if gone:
                yield ChangeBatch(oracle_drops=tuple((layer, g) for g in sorted(gone)))


def _ident_of(memory: Any) -> str:
    return memory.fact_id if isinstance(memory, Fact) else memory.record_id


def _every_stm(user_id: str, ids: frozenset[str] | None = None) -> StmFilter:
    return StmFilter(user_id=user_id, record_ids=ids, include_dead=True)


def _every_fact(user_id: str, ids: frozenset[str] | None = None) -> LtmFilter:
    return LtmFilter(user_id=user_id, fact_ids=ids, include_dead=True)


__all__ = ["SweepInputs", "newly_inactive", "plan_sweep", "quiet_until"]

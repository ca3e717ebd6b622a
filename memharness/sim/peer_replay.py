"""One replay of a shard under one strategy against a system under test (`PeerReplay`):
the same steps, ticks, samples, ground truth and tallies as the reference's `Replay`,
through a `MemoryAdapter` (`memharness/systems/base.py`).

A `say` is a turn: the app searches the user's memories (the context a turn reads, as
the reference's turn retrieves) and then adds what was said (a memory per say, the raw
text, with the scenario's metadata). Probes are searches; they change nothing the
harness keeps (a system that refreshes on read may refresh: its capability says so).

The strategy is applied through the mirror (`peer_mirror.py`): every memory is also a
reference `MemoryRecord` in the reference's in-memory stores under the reference's
`ForgettingEngine`, which decides expiry, archival, the oracle, events and forget
commands (with their confirmation: `reference.forgetting.dialogue.forget_turn`); what
it removes from the mirror, the replay deletes from the system. A system with native
expiry gets the strategy's TTL on `add` and expires on its own; its `sweep` runs at
each tick, and the mirror drops a record once the system no longer `holds` it.

Leakage is an erased fact still held (hidden included) after its forget command, or
retrieved; a `delete` the system cannot do is counted under `unsupported` and its
memory stays (so its leak counts). PII residency follows the script's marked values in
the raw text the system holds. The footprint is the system's (`footprint()`), under the
`ltm` layer: a peer's store is its long-term memory.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from memharness.scenarios.model import EventStep, ForgetStep, ProbeStep, SayStep, Step
from memharness.scenarios.stats import is_turn
from memharness.sim.causes import Causes, Key, sweep_rule
from memharness.sim.layer_reads import shows
from memharness.sim.monitoring import Monitor
from memharness.sim.peer_mirror import build_mirror, one_layer, peer_kind, ttl_for_peer
from memharness.sim.probes import (
    Verdict,
    count_probe,
    hit_record,
    is_clean,
    judge,
    needed_verdict,
    probe_record,
)
from memharness.sim.replay import ReplayedShard, SimUser
from memharness.sim.tally import Latencies, ShardResult
from memharness.systems.base import Hit, MemoryAdapter, Unsupported
from reference.clock import VirtualClock
from reference.forgetting.dialogue import forget_turn
from reference.forgetting.engine import ForgettingEngine
from reference.forgetting.forgetter import plan_event
from reference.forgetting.plans import ForgetReport
from reference.keys import Namespace
from reference.models import Event, MemoryRecord, RetentionUpdate
from reference.models import Hit as RefHit
from reference.pii import RegexPiiMasker
from reference.policy.decisions import Action, Memory
from reference.policy.expiry import on_access
from reference.policy.oracle import OracleAdvice
from reference.policy.ranking import rerank
from reference.policy.strategy import Strategy
from reference.settings import Settings
from reference.stm.filters import StmFilter
from reference.text_interfaces import Embedder

#: Sweep decisions that end a mirror record: the system's memory is deleted.
_REMOVING = (Action.EXPIRE, Action.ARCHIVE, Action.DELETE)
#: Under a decay rule, a search fetches this many times k and keeps k after re-ranking
#: (as the reference's engine does: `DEFAULT_OVERFETCH`).
_OVERFETCH = 3


@dataclass
class PeerItem:
    """A statement with marked PII, followed until the system holds none of its copies."""

    user_id: str
    said_at: float
    values: tuple[str, ...]
    memories: list[str]  # mirror record ids


class PeerReplay:
    """The state of one replay against a system under test (module docstring)."""

    def __init__(
        self,
        shard: ReplayedShard,
        strategy: Strategy,
        *,
        adapter: MemoryAdapter,
        settings: Settings,
        embedder: Embedder,
        clock: VirtualClock,
        namespace: Namespace,
    ) -> None:
        self.shard = shard
        self.strategy = strategy
        self.adapter = adapter
        self.native = adapter.capabilities.native_expiry
        self.policy = one_layer(strategy, native_expiry=self.native is not None)
        #: The time rules a system with native expiry is given as TTLs.
        self.time_policy = one_layer(strategy, native_expiry=False)
        self.truth = shard.truths(strategy)
        self.clock = clock
        self.masker = RegexPiiMasker()
        self.advice = OracleAdvice(needed_until=self.oracle_until) if strategy.oracle else None
        self.mirror = build_mirror(
            settings,
            strategy=self.policy,
            clock=clock,
            embedder=embedder,
            namespace=namespace,
            oracle=self.advice,
        )
        engine = self.mirror.engine
        if engine is None:  # build_memory_system always attaches one
            raise RuntimeError("the mirror has no forgetting engine")
        self.engine: ForgettingEngine = engine
        self.result = ShardResult()
        self.latencies = Latencies()
        self.causes = Causes()
        self.monitor = Monitor()
        self.peer: dict[str, tuple[str, str]] = {}  # mirror id -> (user id, system's id)
        self.mirror_of: dict[str, str] = {}  # system's id -> mirror id
        self.facts: dict[str, tuple[int, tuple[str, ...]]] = {}  # mirror id -> facts
        self.texts: dict[str, str] = {}  # mirror id -> the raw text the system holds
        self.refs: dict[tuple[int, str], list[str]] = {}  # (user, fact) -> mirror ids
        self.deleted: set[str] = set()  # mirror ids whose memory the system deleted
        self.native_deadline: dict[str, float] = {}  # mirror id -> when it expires natively
        self.pii: list[PeerItem] = []
        self.pii_dirty: set[str] = set()
        self._spent = 0.0  # seconds inside the system since the operation in flight began
        self.result.capabilities = dataclasses.asdict(adapter.capabilities)

    # ------------------------------------------------------------------ the oracle
    def oracle_until(self, memory: Memory) -> float | None:
        found = self.facts.get(memory.record_id) if isinstance(memory, MemoryRecord) else None
        return None if found is None else self.truth[found[0]].needed_until(found[1])

    # ------------------------------------------------------------------ steps
    def step(self, u: SimUser, step: Step, index: int) -> None:
        self.pii_dirty.add(u.user_id)
        self.result.turns += is_turn(step)
        if isinstance(step, SayStep):
            self.say(u, step.session, step.say, step.at, dict(step.metadata), step, index)
        elif isinstance(step, ForgetStep):
            self.say(u, step.session, step.forget, step.at, {}, None, index)
        elif isinstance(step, EventStep):
            self.result.events += 1
            self.event(u, step)
        else:
            self.probe(u, step, index)

    def _timed(self, op: str | None, call: Callable[[], Any]) -> Any:
        """Call the system (and only the system: the mirror's work is the harness's),
        adding its time to `inside_s`, to the operation in flight (`_spent`), and under
        `op` to the latencies."""
        mark = time.perf_counter()
        out = call()
        spent = time.perf_counter() - mark
        self.result.inside_s += spent
        self._spent += spent
        if op is not None:
            self.latencies.record(op, spent * 1000.0)
        return out

    def _move(self, at: float) -> None:
        self.clock.set(at)
        self.adapter.set_clock(at)

    def say(
        self,
        u: SimUser,
        session: str,
        text: str,
        at: float,
        meta: dict[str, Any],
        step: SayStep | None,
        index: int,
    ) -> None:
        """A turn: a forget command (or its confirmation) is carried out, not stored;
        anything else is searched with, then added."""
        self._move(at)
        user, session_id = u.user_id, self.shard.sessions[(u.index, session)]
        masked = self.masker.mask(text)
        self.engine.note_activity(user)
        state = self.mirror.session.get(user_id=user, session_id=session_id)
        if state is None:
            state = self.mirror.session.create(user_id=user, session_id=session_id, channel="web")
        self._spent = 0.0  # the turn's time in the system: a forget's deletes, search, add
        forgetting = forget_turn(self.engine, state, masked, user_id=user, session_id=session_id)
        if forgetting.forgotten is not None:
            self._carry_out(u, forgetting.forgotten, at)
        self._search(user, text, self.shard.k, at, touch=True)  # the turn's context
        added = None
        if not forgetting.handled:
            added = self._add(u, session_id, text, masked, at, meta)
        self.latencies.record("turn", self._spent * 1000.0)
        if forgetting.handled or index in self.truth[u.index].erased_by:
            self._forgotten(u, at, index, forgetting.forgotten, text)
        if step is None:
            return
        facts = tuple(f.id for f in step.facts)
        if added is not None:
            self.facts[added.record_id] = (u.index, facts)
            for fact_id in facts:
                self.refs.setdefault((u.index, fact_id), []).append(added.record_id)
            self.monitor.written(added, at, added.record_id)
            if self.advice is not None:
                self.advice.note(added, self.truth[u.index].needed_until(facts))
        elif facts:
            self.causes.refuse(u.index, facts, "a forget command's answer, not stored")
        if step.pii:
            self.result.pii_items += 1
            item = PeerItem(user, at, step.pii_values, [] if added is None else [added.record_id])
            if not self._resolved(item, at):
                self.pii.append(item)
        elif step.sensitive:
            self.result.pii_unmeasured += 1

    def _add(
        self, u: SimUser, session_id: str, text: str, masked: str, at: float, meta: dict[str, Any]
    ) -> MemoryRecord | None:
        disclosed = [m.kind for m in self.masker.detect(text)] if masked != text else []
        kind, importance, tags = peer_kind(masked, self.strategy, disclosed=disclosed)
        ttl_s = None
        if self.native is not None:
            ttl_s = ttl_for_peer(
                self.time_policy,
                kind,
                importance,
                at,
                self.native.granularity_s,
            )
        written = self._timed(
            "stm",  # the add alone (a turn's "turn" is its search and its add)
            lambda: self.adapter.add(
                user_id=u.user_id,
                session_id=session_id,
                text=text,
                at=at,
                metadata=meta,
                ttl_s=ttl_s,
            ),
        )
        if not written.memory_ids:
            return None
        expiry = self.engine.stm_expiry(kind, importance=importance)
        added = self.mirror.stm.add(
            user_id=u.user_id,
            session_id=session_id,
            text=masked,
            type=kind,
            importance=importance,
            metadata={**_scalars(meta), **tags},
            force=True,
            **expiry,
        )
        record = added.record
        if record is None:
            return None
        self.engine.note_written(record)
        memory_id = written.memory_ids[0]
        self.peer[record.record_id] = (u.user_id, memory_id)
        self.mirror_of[memory_id] = record.record_id
        self.texts[record.record_id] = text
        if ttl_s is not None:
            self.native_deadline[record.record_id] = at + ttl_s
        return record

    def _search(self, user: str, query: str, k: int, at: float, *, touch: bool) -> list[Hit]:
        """The system's top k for `query`; under a decay rule over-fetched and re-ranked
        by the reference's `rerank` on the mirror's records; a turn's hits are accessed
        (the mirror stores `on_access`: sliding windows, importance)."""
        fetch = k * _OVERFETCH if self.policy.decay is not None else k
        hits: list[Hit] = self._timed(
            None,
            lambda: self.adapter.search(
                user_id=user, query=query, k=fetch, at=at, read_only=not touch
            ),
        )
        records = self.mirror.stm.records(filter=StmFilter(user_id=user, include_dead=True))
        by_id = {r.record_id: r for r in records}
        if self.policy.decay is not None:
            pairs = [
                (h, RefHit(by_id[m], h.score))
                for h in hits
                if (m := self.mirror_of.get(h.memory_id)) in by_id
            ]
            ranked = rerank([p for _, p in pairs], strategy=self.policy, now=at, k=k)
            back = {p.record.record_id: h for h, p in pairs}
            hits = [back[p.record.record_id] for p in ranked]
        if touch and self.engine.access_moves_expiry:
            accessed = [by_id[m] for h in hits if (m := self.mirror_of.get(h.memory_id)) in by_id]
            updates = []
            for record in accessed:
                change = on_access(self.policy, record, now=at)
                updates.append((record.record_id, change))
            if updates:
                self.mirror.stm.touch(
                    user_id=user,
                    updates=[RetentionUpdate(i, c.expires_at, c.importance) for i, c in updates],
                    seen=accessed,
                )
        return hits

    def _delete(self, mirror_ids: list[str], at: float, rule: str, detail: str) -> None:
        """Delete the systems' memories of these mirror records; what it cannot delete is
        counted as unsupported and stays."""
        for mirror_id in mirror_ids:
            if mirror_id in self.deleted or mirror_id not in self.peer:
                continue
            user, memory_id = self.peer[mirror_id]
            try:
                self._timed(
                    "sweep", partial(self.adapter.delete, user_id=user, memory_id=memory_id)
                )
            except Unsupported as exc:
                self.result.unsupported[f"delete ({rule})"] += 1
                if len(self.result.leaks) < self.shard.max_leaks and rule == "forget command":
                    what = f"{exc}: the memory stays"
                    self.result.leaks.append({"user": user, "at": at, "fact": "-", "how": what})
                continue
            self.deleted.add(mirror_id)
            self.causes.remove(("stm", mirror_id, 0), at, rule, detail)
            self.monitor.ended("stm", mirror_id, at)
            self.pii_dirty.add(user)

    def _carry_out(self, u: SimUser, report: ForgetReport, at: float) -> None:
        detail = f"{report.scope} forget command"
        ids = sorted(report.stm_removed)
        if report.scope == "everything":
            ids = sorted(m for m, (user, _) in self.peer.items() if user == u.user_id)
            try:
                self._timed(None, lambda: self.adapter.delete_user(user_id=u.user_id))
            except Unsupported:
                self.result.unsupported["delete_user (forget everything)"] += 1
            else:
                held = [m for m in ids if m not in self.deleted]
                for mirror_id in held:
                    self.deleted.add(mirror_id)
                    self.causes.remove(("stm", mirror_id, 0), at, "forget command", detail)
                    self.monitor.ended("stm", mirror_id, at)
                return
        self._delete(ids, at, "forget command", detail)

    def _forgotten(
        self, u: SimUser, at: float, index: int, report: ForgetReport | None, said: str
    ) -> None:
        failed = False
        for fact_id in self.truth[u.index].erased_by.get(index, ()):
            if any(self._holds(m) for m in self.refs.get((u.index, fact_id), [])):
                self._leak(u, at, fact_id, "still stored after the forget command")
                failed = True
        self.monitor.forgot(report, at, failed=failed)

    def event(self, u: SimUser, step: EventStep) -> None:
        self._move(step.at)
        event = Event(name=step.event, user_id=u.user_id, at=step.at, payload=step.payload)
        batch = plan_event(event, stm=self.mirror.stm, ltm=self.mirror.ltm, strategy=self.policy)
        self.engine.handle_event(event)
        self._delete(sorted(batch.stm_remove), step.at, f"event {step.event}", "invalidated")

    def probe(self, u: SimUser, step: ProbeStep, index: int) -> None:
        step = self.truth[u.index].judged(step)
        self._move(step.at)
        k = step.k or self.shard.k
        self._spent = 0.0
        hits = self._search(u.user_id, step.probe, k, step.at, touch=False)
        self.latencies.record("recall", self._spent * 1000.0)
        carried = [self._facts_of(h) for h in hits]
        found = {f for facts in carried for f in facts}
        truth = self.truth[u.index]
        verdicts = judge(
            step,
            found,
            state=lambda fact_id: truth.state(fact_id, step.at),
            why_not=lambda fact_id: self._not_retrieved(u, fact_id, step.at),
        )
        count_probe(self.result, step, verdicts, {"ltm": found})
        self.monitor.probe(step.needed, found)
        for fact_id, verdict in verdicts.items():
            if verdict is Verdict.LEAK:
                self._leak(u, step.at, fact_id, f"retrieved by probe {step.probe!r}")
        if not is_clean(verdicts):
            layer_hits = [
                hit_record(h.score, facts, h.text) for h, facts in zip(hits, carried, strict=True)
            ]
            why = {
                fact_id: self._why(u, fact_id, verdicts[fact_id], step.at)
                for fact_id in step.needed
                if verdicts[fact_id] in (Verdict.OVER_FORGOTTEN, Verdict.UNSTORED)
            }
            record = probe_record(
                u.user.id, u.index, index, step, {"stm": [], "ltm": layer_hits}, verdicts, why
            )
            self.result.probe_records.append(record)

    def _facts_of(self, hit: Hit) -> tuple[str, ...]:
        mirror_id = self.mirror_of.get(hit.memory_id)
        found = self.facts.get(mirror_id) if mirror_id is not None else None
        return () if found is None else found[1]

    def _not_retrieved(self, u: SimUser, fact_id: str, at: float) -> Verdict:
        refs = self.refs.get((u.index, fact_id), [])
        return needed_verdict(
            stored=bool(refs), reachable=bool(refs), live=any(self._live(m, at) for m in refs)
        )

    def _why(self, u: SimUser, fact_id: str, verdict: Verdict, at: float) -> dict[str, Any]:
        if verdict is Verdict.UNSTORED:
            return self.causes.why_unstored(u.index, fact_id)
        keys: list[Key] = [("stm", m, 0) for m in self.refs.get((u.index, fact_id), [])]
        return self.causes.why_over_forgotten(keys, promoted=False, probe_at=at)

    # ------------------------------------------------------------------ time
    def tick(self, at: float) -> None:
        self._move(at)
        self._spent = 0.0  # the system's sweep and the harness's deletes: one sweep
        removed = self._timed(None, lambda: self.adapter.sweep(at))
        stats = self.mirror.sweep(at=at)
        self.monitor.swept(stats, at, lambda fact: None)  # one layer: no episodes
        found = stats.by_layer.get("stm")
        decisions = [] if found is None else list(found.decisions)
        for decision in decisions:
            if decision.action in _REMOVING:
                rule = sweep_rule(decision) or str(decision.action)
                self._delete([decision.record_id], at, rule, decision.reason)
        if self.native is not None and removed:  # only what the system says it removed
            self._native_gone(at)
        self.latencies.record("sweep", self._spent * 1000.0)
        if self.pii_dirty and self.pii:
            self.pii = [
                item
                for item in self.pii
                if item.user_id not in self.pii_dirty or not self._resolved(item, at)
            ]
        self.pii_dirty.clear()

    def _native_gone(self, at: float) -> None:
        """Mirror records past their native deadline that the system no longer holds:
        expired by the system (the mirror drops them)."""
        due = [
            m
            for m, deadline in self.native_deadline.items()
            if deadline <= at and m not in self.deleted
        ]
        gone = [m for m in due if not self._holds(m)]
        for mirror_id in gone:
            self.deleted.add(mirror_id)
            del self.native_deadline[mirror_id]
            self.causes.remove(("stm", mirror_id, 0), at, "native expiry", "the system expired it")
            self.monitor.ended("stm", mirror_id, at)
            self.pii_dirty.add(self.peer[mirror_id][0])
        if gone:
            self.mirror.stm.purge(record_ids=gone)

    def sample(self, at: float, in_series: bool) -> None:
        self._move(at)
        held = self.adapter.footprint()
        taken = self.result.footprint if in_series else self.result.peak_footprint
        taken[at] = {"session": (0, 0), "stm": (0, 0), "ltm": (held.memories, held.bytes)}

    def finish(self) -> None:
        self.monitor.finish()
        self.result.monitor = self.monitor.tally
        end = self.clock.now()
        for item in self.pii:
            if not self._resolved(item, end):
                self.result.pii_raw_at_end += 1

    # ------------------------------------------------------------------ checks
    def _holds(self, mirror_id: str) -> bool:
        """Whether the system still keeps the memory in any form. A deleted one is gone
        unless the system keeps a deleted memory's text (`deletes_keep_text`: then the
        system is asked, and a forgotten fact it keeps is a leak)."""
        if mirror_id not in self.peer:
            return False
        if mirror_id in self.deleted and not self.adapter.capabilities.deletes_keep_text:
            return False
        user, memory_id = self.peer[mirror_id]
        return self.adapter.holds(user_id=user, memory_id=memory_id)

    def _live(self, mirror_id: str, at: float) -> bool:
        """Held and not hidden by native expiry (a `readable` one is, until its system's
        sweep deletes it): where a search could still find it."""
        if mirror_id in self.deleted:  # kept text (mem0's history) is not searchable
            return False
        deadline = self.native_deadline.get(mirror_id)
        readable = self.native is not None and self.native.expired == "readable"
        return (deadline is None or at < deadline or readable) and self._holds(mirror_id)

    def _resolved(self, item: PeerItem, at: float) -> bool:
        raw = any(
            self._holds(m) and shows(self.texts.get(m, ""), item.values) for m in item.memories
        )
        if not raw:
            self.result.pii_raw_s.append(at - item.said_at)
        return not raw

    def _leak(self, u: SimUser, at: float, fact_id: str, how: str) -> None:
        self.result.leaked += 1
        if len(self.result.leaks) < self.shard.max_leaks:
            self.result.leaks.append({"user": u.user.id, "at": at, "fact": fact_id, "how": how})


def _scalars(meta: dict[str, Any]) -> dict[str, str | int | float | bool]:
    """The metadata values an STM record can hold (events match on them)."""
    return {k: v for k, v in meta.items() if isinstance(v, str | int | float | bool)}

"""One replay of a shard under one strategy (`Replay`): each step through the reference's
public interface, and the maps from what the stores made back to the scenario's facts.

`shard.ShardReplayer` drives it, in time order; `layer_reads.py` reads the layers back.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Protocol

from memharness.scenarios.model import EventStep, ForgetStep, ProbeStep, SayStep, Step, User
from memharness.scenarios.stats import is_turn
from memharness.sim.causes import Causes, Key
from memharness.sim.layer_reads import PiiItem, Ref, footprint, live, resolved
from memharness.sim.monitoring import Monitor
from memharness.sim.probes import (
    Verdict,
    count_probe,
    hit_record,
    is_clean,
    judge,
    needed_verdict,
    probe_record,
)
from memharness.sim.tally import Latencies, ShardResult
from memharness.sim.truth import UserTruth
from reference.forgetting.consolidation import episode_source
from reference.forgetting.plans import ForgetReport
from reference.models import Event, Fact, MemoryRecord
from reference.policy.decisions import Memory
from reference.policy.oracle import OracleAdvice
from reference.policy.strategy import Strategy
from reference.system import MemorySystem


@dataclass(frozen=True)
class SimUser:
    """A scenario user with the ids the memory sees: `u<index>`, sessions `u<index>.s<n>`
    (scenario ids are free text and session names repeat across users)."""

    index: int
    user: User

    @property
    def user_id(self) -> str:
        return f"u{self.index}"


class ReplayedShard(Protocol):
    """What a replay reads of its shard (`shard.ShardReplayer`)."""

    k: int
    max_leaks: int
    sessions: dict[tuple[int, str], str]

    def truths(self, strategy: Strategy) -> dict[int, UserTruth]: ...


class Replay:
    """The state of one replay: the maps from stored ids to facts, and the tallies."""

    def __init__(self, shard: ReplayedShard, strategy: Strategy) -> None:
        self.shard = shard
        self.strategy = strategy
        self.truth = shard.truths(strategy)  # ground truth under this strategy's setting
        self.system: MemorySystem
        self.advice: OracleAdvice | None = None
        self.result = ShardResult()
        self.latencies = Latencies()
        self.stm_facts: dict[str, tuple[int, tuple[str, ...]]] = {}
        self.ltm_facts: dict[tuple[str, int], tuple[int, tuple[str, ...]]] = {}
        self.refs: dict[tuple[int, str], list[Ref]] = {}  # (user, fact id) -> where stored
        self.stm_sessions: dict[str, str] = {}  # STM record id -> its session (its scope)
        self.pii: list[PiiItem] = []
        self.pii_dirty: set[str] = set()  # users whose PII items the next tick checks
        # What removed or refused each memory that carries facts, for the probe records.
        self.causes = Causes()
        self.keys: dict[tuple[str, str], Key] = {}  # (layer, id) -> its current version
        self.user_refs: dict[int, list[Ref]] = {}  # user -> where their facts were stored
        self.monitor = Monitor()  # growth, lifetime, cleanup, hit rate (`monitoring.py`)

    # ------------------------------------------------------------------ the oracle
    def oracle_until(self, memory: Memory) -> float | None:
        """The time of the last probe that needs a fact this record carries (None: no
        probe does, or the record is not known yet): the oracle's advice."""
        found = self._facts_of(memory)
        if found is None:
            return None
        user, facts = found
        return self.truth[user].needed_until(facts)

    def _facts_of(self, memory: Memory | None) -> tuple[int, tuple[str, ...]] | None:
        if isinstance(memory, MemoryRecord):
            return self.stm_facts.get(memory.record_id)
        if isinstance(memory, Fact):
            found = self.ltm_facts.get((memory.fact_id, memory.version))
            source = episode_source(memory)
            if found is None and source is not None:  # an episode carries its record's facts
                return self.stm_facts.get(source)
            return found
        return None

    # ------------------------------------------------------------------ steps
    def step(self, u: SimUser, step: Step, index: int) -> None:
        self.pii_dirty.add(u.user_id)
        self.result.turns += is_turn(step)  # the count `scenarios stats` gives
        if isinstance(step, SayStep):
            self.say(u, step, index)
        elif isinstance(step, ForgetStep):
            self.forget(u, step, index)
        elif isinstance(step, EventStep):
            self.result.events += 1
            self.event(u, step)
        else:
            self.probe(u, step, index)

    def _turn(self, u: SimUser, session: str, text: str, at: float, meta: dict[str, Any]) -> Any:
        mark = time.perf_counter()
        result = self.system.turn(
            user_id=u.user_id,
            session_id=self.shard.sessions[(u.index, session)],
            text=text,
            at=at,
            metadata=meta or None,
        )
        self.result.inside_s += time.perf_counter() - mark
        self.latencies.record_all(result.timings_ms)
        return result

    def say(self, u: SimUser, step: SayStep, index: int) -> None:
        result = self._turn(u, step.session, step.say, step.at, dict(step.metadata))
        if result.forgotten is not None or index in self.truth[u.index].erased_by:
            self._forgotten(u, step.at, index, result.forgotten, step.say)  # a confirmation
        facts = tuple(f.id for f in step.facts)
        refs: list[Ref] = []
        if result.stm.record is not None:
            self.stm_facts[result.stm.record.record_id] = (u.index, facts)
            self.stm_sessions[result.stm.record.record_id] = result.stm.record.session_id
            refs.append(("stm", result.stm.record.record_id))
            self.monitor.written(result.stm.record, step.at, refs[-1])
        if result.promoted is not None:
            fact = result.promoted
            self.ltm_facts[(fact.fact_id, fact.version)] = (u.index, facts)
            refs.append(("ltm", fact.category.value, fact.key, fact.fact_id, fact.version))
            self.monitor.written(fact, step.at, refs[-1])
            older = self.keys.get(("ltm", fact.fact_id))
            if older is not None and older[2] != fact.version:
                what = f"{fact.category.value}/{fact.key}"
                self.causes.remove(older, step.at, "replaced", f"a newer value of {what}")
        for fact_id in facts:
            self.refs.setdefault((u.index, fact_id), []).extend(refs)
        if facts:
            self._follow(u.index, refs)
            if not refs:
                self.causes.refuse(u.index, facts, result.stm.reason)
        if self.advice is not None:  # the oracle learns what the new memories carry
            for memory in (result.stm.record, result.promoted):
                if memory is not None:
                    self.advice.note(memory, self.truth[u.index].needed_until(facts))
        if step.pii:  # ground truth: the values the script marks, whatever was masked
            item = PiiItem(u.user_id, step.at, step.pii_values, refs)
            self.result.pii_items += 1
            if not resolved(self.system, self.result, item, step.at):
                self.pii.append(item)
        elif step.sensitive:  # marked, but no value to follow: counted, never guessed
            self.result.pii_unmeasured += 1

    def _follow(self, user: int, refs: list[Ref]) -> None:
        """Follow the memories at `refs` (they carry scenario facts) for `causes`."""
        self.user_refs.setdefault(user, []).extend(refs)
        for ref in refs:
            key = _key(ref)
            self.keys[(key[0], key[1])] = key

    def event(self, u: SimUser, step: EventStep) -> None:
        event = Event(name=step.event, user_id=u.user_id, at=step.at, payload=step.payload)
        # Under event rules, the memories a later probe needs are checked around the event
        # (read-only reads), to name it as the cause of what it removed.
        watched = self._needed_live(u, step.at) if self.strategy.events else []
        mark = time.perf_counter()
        outcome = self.system.handle_event(event, at=step.at)
        self.result.inside_s += time.perf_counter() - mark
        removed = outcome.stm_removed + outcome.ltm_archived + outcome.ltm_deleted
        self.monitor.event(
            u.user_id, removed, step.at, lambda user, ref: live(self.system, user, ref)
        )
        for ref in watched:
            if not self._stored(u, ref):
                detail = f"invalidated by event {step.event!r}"
                self.causes.remove(_key(ref), step.at, f"event {step.event}", detail)

    def _needed_live(self, u: SimUser, at: float) -> list[Ref]:
        truth = self.truth[u.index]
        found = []
        for ref in self.user_refs.get(u.index, []):
            if _key(ref) in self.causes.removed:
                continue
            carried = self.stm_facts.get(ref[1]) if ref[0] == "stm" else None
            if ref[0] == "ltm":
                carried = self.ltm_facts.get((ref[3], ref[4]))  # type: ignore[misc]
            facts = carried[1] if carried is not None else ()
            if any(truth.needed_from(f, at) for f in facts) and self._stored(u, ref):
                found.append(ref)
        return found

    def forget(self, u: SimUser, step: ForgetStep, index: int) -> None:
        result = self._turn(u, step.session, step.forget, step.at, {})
        self._forgotten(u, step.at, index, result.forgotten, step.forget)

    def _forgotten(
        self, u: SimUser, at: float, index: int, report: ForgetReport | None, said: str
    ) -> None:
        """After a turn that was (or, by the script, should have been) a forget command or
        its confirmation: name it as the cause of what it removed, and count as a leak
        every fact the ground truth says it erased that is still stored."""
        if report is not None:
            detail = f"{report.scope} forget command {said!r}"
            removed = [("stm", r) for r in report.stm_removed] + [
                ("ltm", f) for f in report.ltm_erased
            ]
            for ident in removed:
                key = self.keys.get(ident)
                if key is not None:
                    self.causes.remove(key, at, "forget command", detail)
        failed = False
        for fact_id in self.truth[u.index].erased_by.get(index, ()):  # gone, right away
            if any(self._stored(u, ref) for ref in self.refs.get((u.index, fact_id), [])):
                self._leak(u, at, fact_id, "still stored after the forget command")
                failed = True
        self.monitor.forgot(report, at, failed=failed)

    def probe(self, u: SimUser, step: ProbeStep, index: int) -> None:
        step = self.truth[u.index].judged(step)  # its lists under this strategy
        session_id = self.shard.sessions[(u.index, step.session)]
        mark = time.perf_counter()
        recall = self.system.recall(
            user_id=u.user_id,
            session_id=session_id,
            query=step.probe,
            at=step.at,
            k=step.k or self.shard.k,
        )
        spent = time.perf_counter() - mark
        self.result.inside_s += spent
        self.latencies.record("recall", spent * 1000.0)
        layers: tuple[tuple[str, list[Any]], ...] = (
            ("stm", recall.stm_hits), ("ltm", recall.ltm_hits)
        )  # fmt: skip
        carried = {  # per layer, the scenario facts each hit carries, best hit first
            layer: [(self._facts_of(hit.record) or (u.index, ()))[1] for hit in layer_hits]
            for layer, layer_hits in layers
        }
        found = {layer: {f for facts in carried[layer] for f in facts} for layer, _ in layers}
        truth = self.truth[u.index]
        verdicts = judge(
            step,
            found["stm"] | found["ltm"],
            state=lambda fact_id: truth.state(fact_id, step.at),
            why_not=lambda fact_id: self._not_retrieved(u, fact_id, session_id),
        )
        count_probe(self.result, step, verdicts, found)
        self.monitor.probe(step.needed, found["stm"] | found["ltm"])
        for fact_id, verdict in verdicts.items():
            if verdict is Verdict.LEAK:
                self._leak(u, step.at, fact_id, f"retrieved by probe {step.probe!r}")
        if not is_clean(verdicts):  # recorded with its hits (most probes are clean)
            hits = {
                layer: [
                    hit_record(hit.score, facts, hit.record.text)
                    for hit, facts in zip(layer_hits, carried[layer], strict=True)
                ]
                for layer, layer_hits in layers
            }
            why = {
                fact_id: self._why(u, fact_id, session_id, verdicts[fact_id], step.at)
                for fact_id in step.needed
                if verdicts[fact_id] in (Verdict.OVER_FORGOTTEN, Verdict.UNSTORED)
            }
            record = probe_record(u.user.id, u.index, index, step, hits, verdicts, why)
            self.result.probe_records.append(record)

    def _why(
        self, u: SimUser, fact_id: str, session_id: str, verdict: Verdict, at: float
    ) -> dict[str, Any]:
        """Why a needed fact is over-forgotten or was never stored (`causes.py`)."""
        if verdict is Verdict.UNSTORED:
            return self.causes.why_unstored(u.index, fact_id)
        refs = self.refs.get((u.index, fact_id), [])
        reachable = [_key(r) for r in refs if self._reachable(r, session_id)]
        promoted = any(r[0] == "ltm" for r in refs)
        return self.causes.why_over_forgotten(reachable, promoted=promoted, probe_at=at)

    def _reachable(self, ref: Ref, session_id: str) -> bool:
        return ref[0] == "ltm" or self.stm_sessions.get(ref[1]) == session_id

    def _not_retrieved(self, u: SimUser, fact_id: str, session_id: str) -> Verdict:
        """Why a needed fact was not retrieved by a probe in `session_id` (`probes.py`):
        STM is scoped to its session, so only this session's STM and LTM are reachable."""
        refs = self.refs.get((u.index, fact_id), [])
        reachable = [r for r in refs if self._reachable(r, session_id)]
        return needed_verdict(
            stored=bool(refs),
            reachable=bool(reachable),
            live=any(self._stored(u, ref) for ref in reachable),
        )

    # ------------------------------------------------------------------ time
    def tick(self, at: float) -> None:
        mark = time.perf_counter()
        stats = self.system.sweep(at=at)
        spent = time.perf_counter() - mark
        self.result.inside_s += spent
        self.latencies.record("sweep", spent * 1000.0)
        self.monitor.swept(stats, at, _episode_ref)
        for layer in stats.by_layer.values():
            if layer.decisions:
                self.pii_dirty.update(d.user_id for d in layer.decisions)
                self.causes.sweep(at, layer.decisions, self.keys)
        for episode in stats.episodes:  # consolidated from STM: stored where, carrying what
            self._consolidated(episode, at)
        for record_id, rule, why in stats.consolidation_dropped:  # ended, no episode made
            if (key := self.keys.get(("stm", record_id))) is not None:
                self.causes.remove(key, at, rule, why)
        if self.pii_dirty and self.pii:
            # Only users whose memories changed since the last check (a sweep decision on
            # one of their records, or a step of theirs) can have had raw PII leave the
            # layers: a record past its deadline is a decision of the sweep at that tick.
            self.pii = [
                item
                for item in self.pii
                if item.user_id not in self.pii_dirty
                or not resolved(self.system, self.result, item, at)
            ]
        self.pii_dirty.clear()

    def _consolidated(self, episode: Fact, at: float) -> None:
        found = self._facts_of(episode)
        if found is None:
            return
        self.ltm_facts[(episode.fact_id, episode.version)] = found
        user, facts = found
        ref: Ref = ("ltm", episode.category.value, episode.key, episode.fact_id, episode.version)
        for fact_id in facts:
            self.refs.setdefault((user, fact_id), []).append(ref)
        source: Ref = ("stm", episode_source(episode) or "")
        if facts:
            self._follow(user, [ref])
            detail = "its session ended: consolidated into an LTM episode"
            self.causes.remove(_key(source), at, "consolidation", detail)
        for item in self.pii:  # PII said in the record may live on in the episode's value
            if source in item.refs:
                item.refs.append(ref)

    def sample(self, at: float, in_series: bool) -> None:
        self.system.clock.set(at)  # type: ignore[attr-defined]
        taken = self.result.footprint if in_series else self.result.peak_footprint
        taken[at] = footprint(self.system)

    def finish(self) -> None:
        self.monitor.finish()
        self.result.monitor = self.monitor.tally
        end = self.system.clock.now()
        for item in self.pii:
            # Not resolved: its time has no end within the run.
            if not resolved(self.system, self.result, item, end):
                self.result.pii_raw_at_end += item.raw_open
                self.result.pii_sealed_at_end += item.sealed_open
                self.result.pii_sealed_items += item.ever_sealed

    # ------------------------------------------------------------------ checks
    def _stored(self, u: SimUser, ref: Ref) -> bool:
        return live(self.system, u.user_id, ref) is not None

    def _leak(self, u: SimUser, at: float, fact_id: str, how: str) -> None:
        self.result.leaked += 1
        if len(self.result.leaks) < self.shard.max_leaks:
            self.result.leaks.append({"user": u.user.id, "at": at, "fact": fact_id, "how": how})


def _key(ref: Ref) -> Key:
    """The `causes` key of the memory at `ref`."""
    if ref[0] == "stm":
        return "stm", ref[1], 0
    return "ltm", ref[3], ref[4]  # type: ignore[misc]


def _episode_ref(fact: Fact) -> Ref:
    return "ltm", fact.category.value, fact.key, fact.fact_id, fact.version

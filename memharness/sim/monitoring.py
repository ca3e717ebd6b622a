"""Monitoring figures of a replay (R16 in docs/requirements.md): growth per memory type per virtual
day, average lifetime per type, cleanup success rate and duration, retrieval hit rate.

They come from what the replay knows already, the script and what the reference reports
for each call (a turn's stored record and promoted fact, a sweep's `SweepStats`, a forget
command's `ForgetReport`, an event's `EventOutcome`); measuring writes nothing. Only
after an event that removed something are that user's open memories read back
(read-only, `layer_reads.live`), since an event reports counts, not ids.

- Type: an STM record's `type`, an LTM value's category (every category is also a memory
  type of the same name, as the strategies' rules count it).
- Growth: memories written per type per virtual day (UTC days of the virtual clock): STM
  records, LTM values (a new version of a fact is a write), consolidated episodes.
- Lifetime: per type, the virtual time from a memory's first write until a sweep expired,
  archived or deleted it, consolidation moved or dropped it, a forget command or an event
  removed it (to the resolution of the sweep ticks). A fact's new version does not end
  it. Memories still open when the run ends are counted (`open_at_end`) and left out of
  the average: their lifetime is not known.
- Cleanup: each sweep and each forget command is one operation. A sweep succeeds when it
  completes (one that raises stops the replay: the strategy fails); a forget command when
  every fact the script says it erases is gone from every layer right after. Duration is
  wall time (`SweepStats.duration_s`, `ForgetReport.duration_ms`); virtual time does not
  move while a sweep runs.
- Hit rate: among probes that need at least one fact, the share that retrieved at least
  one of them in the top-k of STM or LTM. Recall@k counts needed facts, not probes: a
  probe needing two facts that gets one is a hit and half a recall.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from reference.forgetting.consolidation import episode_source
from reference.models import Fact, MemoryRecord
from reference.policy.decisions import Action

DAY_S = 86_400.0
#: Sweep decisions that end a memory (an anonymised one lives on).
_ENDING = (Action.EXPIRE, Action.ARCHIVE, Action.DELETE)


@dataclass
class MonitorTally:
    """A shard's monitoring counts; shards and cohorts add up (`+`)."""

    writes: Counter[tuple[str, int]] = field(default_factory=Counter)  # (type, day) -> n
    ended: Counter[str] = field(default_factory=Counter)  # type -> memories that ended
    #: Per type, the sum of the lifetimes of the memories that ended.
    lifetime_s: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))
    open_at_end: Counter[str] = field(default_factory=Counter)
    sweeps: int = 0
    sweeps_failed: int = 0
    forgets: int = 0
    forgets_failed: int = 0
    cleanup_s: float = 0.0
    cleanup_max_s: float = 0.0
    needing_probes: int = 0
    hit_probes: int = 0

    def __add__(self, other: MonitorTally) -> MonitorTally:
        total = MonitorTally()
        for name in ("writes", "ended", "lifetime_s", "open_at_end"):  # summed per key
            for part in (self, other):
                for key, value in getattr(part, name).items():
                    getattr(total, name)[key] += value
        for name in ("sweeps", "sweeps_failed", "forgets", "forgets_failed", "cleanup_s"):
            setattr(total, name, getattr(self, name) + getattr(other, name))
        for name in ("needing_probes", "hit_probes"):
            setattr(total, name, getattr(self, name) + getattr(other, name))
        total.cleanup_max_s = max(self.cleanup_max_s, other.cleanup_max_s)
        return total


def kind_of(memory: MemoryRecord | Fact) -> str:
    """The memory type a record or fact counts under."""
    return memory.category.value if isinstance(memory, Fact) else memory.type.value


class Monitor:
    """Follows one replay's memories from write to end (see the module docstring)."""

    def __init__(self) -> None:
        self.tally = MonitorTally()
        #: (layer, id) -> (user, type, first written, the ref `layer_reads.live` reads).
        self.open: dict[tuple[str, str], tuple[str, str, float, Any]] = {}
        self.by_user: dict[str, set[tuple[str, str]]] = {}  # user -> their open memories

    def written(self, memory: MemoryRecord | Fact, at: float, ref: Any) -> None:
        kind = kind_of(memory)
        self.tally.writes[(kind, int(at // DAY_S))] += 1
        ident = ("ltm", memory.fact_id) if isinstance(memory, Fact) else ("stm", memory.record_id)
        if ident in self.open:  # a fact's new version: the same memory lives on
            user, kind, first, _ = self.open[ident]
            self.open[ident] = (user, kind, first, ref)
        else:
            self.open[ident] = (memory.user_id, kind, at, ref)
            self.by_user.setdefault(memory.user_id, set()).add(ident)

    def ended(self, layer: str, ident: str, at: float) -> None:
        entry = self.open.pop((layer, ident), None)
        if entry is not None:
            user, kind, first, _ = entry
            self.by_user[user].discard((layer, ident))
            self.tally.ended[kind] += 1
            self.tally.lifetime_s[kind] += at - first

    def swept(self, stats: Any, at: float, refs: Any) -> None:
        """A completed sweep (`SweepStats`); `refs(fact)` is an episode's ref."""
        self._cleanup(stats.duration_s)
        self.tally.sweeps += 1
        for layer in ("stm", "ltm"):
            found = stats.by_layer.get(layer)
            for decision in found.decisions if found is not None else ():
                if decision.action in _ENDING:
                    self.ended(layer, decision.record_id, at)
        for episode in stats.episodes:
            source = episode_source(episode)
            if source is not None:
                self.ended("stm", source, at)
            self.written(episode, at, refs(episode))
        for record_id, _, _ in stats.consolidation_dropped:
            self.ended("stm", record_id, at)

    def forgot(self, report: Any, at: float, *, failed: bool) -> None:
        """A forget command (`ForgetReport`, None when the turn was not one); `failed`
        when a fact it had to erase is still stored."""
        if report is not None:
            self._cleanup(report.duration_ms / 1000.0)
            for record_id in report.stm_removed:
                self.ended("stm", record_id, at)
            for fact_id in report.ltm_erased:
                self.ended("ltm", fact_id, at)
        self.tally.forgets += 1
        self.tally.forgets_failed += failed

    def event(self, user_id: str, removed: int, at: float, is_live: Any) -> None:
        """After an event that removed `removed` memories: end the user's open memories
        that `is_live(user_id, ref)` no longer finds."""
        if not removed:
            return
        gone = [
            ident
            for ident in sorted(self.by_user.get(user_id, ()))
            if is_live(user_id, self.open[ident][3]) is None
        ]
        for layer, ident in gone:
            self.ended(layer, ident, at)

    def probe(self, needed: Iterable[str], found: set[str]) -> None:
        wanted = set(needed)
        if wanted:
            self.tally.needing_probes += 1
            self.tally.hit_probes += bool(wanted & found)

    def finish(self) -> None:
        for _, kind, _, _ in self.open.values():
            self.tally.open_at_end[kind] += 1

    def _cleanup(self, seconds: float) -> None:
        self.tally.cleanup_s += seconds
        self.tally.cleanup_max_s = max(self.tally.cleanup_max_s, seconds)


def figures(tallies: Sequence[MonitorTally]) -> dict[str, Any]:
    """A strategy's monitoring figures over its shards (keys in docs/monitoring.md)."""
    total = sum(tallies, MonitorTally())
    days = sorted({day for _, day in total.writes})
    kinds = sorted({kind for kind, _ in total.writes})
    per_day = {kind: [total.writes[(kind, day)] for day in days] for kind in kinds}
    operations = total.sweeps + total.forgets
    failed = total.sweeps_failed + total.forgets_failed
    lifetime_kinds = sorted(set(total.ended) | set(total.open_at_end))
    return {
        "growth": {
            "days": [day * DAY_S for day in days],  # each day's start, virtual epoch s
            "per_day": per_day,
            "max_per_day": {kind: max(counts) for kind, counts in per_day.items()},
            "written": {kind: sum(counts) for kind, counts in per_day.items()},
        },
        "lifetime": {
            kind: {
                "ended": total.ended[kind],
                "mean_s": total.lifetime_s[kind] / total.ended[kind] if total.ended[kind] else None,
                "open_at_end": total.open_at_end[kind],
            }
            for kind in lifetime_kinds
        },
        "cleanup": {
            "sweeps": total.sweeps,
            "sweeps_failed": total.sweeps_failed,
            "forgets": total.forgets,
            "forgets_failed": total.forgets_failed,
            "success_rate": (operations - failed) / operations if operations else None,
            "total_s": round(total.cleanup_s, 6),
            "mean_s": round(total.cleanup_s / operations, 6) if operations else None,
            "max_s": round(total.cleanup_max_s, 6) if operations else None,
        },
        "retrieval": {
            "probes": total.needing_probes,
            "hits": total.hit_probes,
            "hit_rate": total.hit_probes / total.needing_probes if total.needing_probes else None,
        },
    }


__all__ = ["DAY_S", "Monitor", "MonitorTally", "figures", "kind_of"]

"""The reference's monitoring counters (R16 in docs/requirements.md) and their Prometheus text.

`MemoryCounters` is held by a `ForgettingEngine` (`engine.counters`) and counted where
the engine already is: a memory written (`ForgettingEngine.note_written`, one dict
increment on a turn), retrieval with or without a hit (`MemorySystem.turn` and `recall`,
one increment), sweeps (`Executor.sweep`: completed or raised, wall duration, and each
decision that ended a memory with its lifetime), forget commands and events (the
engine). Nothing is read from or written to a store to count.

`exposition(counters, labels)` renders them in Prometheus' text format with
`prometheus_client`, from a registry of its own (never the global one: one system's
figures never mix with another's, and tests do not collide):

- `memh_memories_written_total{layer,type}`: growth; per day is
  `increase(memh_memories_written_total[1d])`;
- `memh_memories_ended_total{layer,type,how}` (how: expire, archive, delete by a sweep;
  forget, event) and `memh_memory_lifetime_seconds{layer,type}` (a summary: `_sum` and
  `_count` of the lifetimes a sweep ended, from when the current value was written; the
  mean is `_sum / _count`; forget commands and events report ids or counts only, so
  their removals are counted without a lifetime);
- `memh_cleanups_total{operation,outcome}` (operation: sweep, forget, event; outcome:
  ok, failed: the call raised) and `memh_cleanup_seconds{operation}` (summary of wall
  durations), `memh_cleanup_max_seconds{operation}`, `memh_cleanup_success_ratio`;
- `memh_retrievals_total{hit}` (a turn's or a recall's retrieval returned at least one
  STM or LTM hit, or none) and `memh_retrieval_hit_ratio`. Without ground truth the
  reference cannot know whether a hit was the needed memory: the simulator's hit rate
  (`memharness.sim.monitoring`) counts probes that retrieved a needed fact.
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, SummaryMetricFamily
from prometheus_client.registry import Collector

from reference.clock import Clock
from reference.models import Fact, MemoryRecord
from reference.policy.decisions import Action

#: Sweep decisions that end a memory (an anonymised one lives on).
_ENDING = {Action.EXPIRE: "expire", Action.ARCHIVE: "archive", Action.DELETE: "delete"}


#: The counts `state` carries.
_STATE = (
    "written", "ended", "lifetime_s", "lifetimes", "cleanups", "cleanup_s", "cleanup_max_s",
    "retrievals",
)  # fmt: skip


class MemoryCounters:
    """Counters of one engine (see the module docstring); plain dicts, no lock: a lost
    increment under threads skews a figure by one, never corrupts it."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.written: Counter[tuple[str, str]] = Counter()  # (layer, type)
        self.ended: Counter[tuple[str, str, str]] = Counter()  # (layer, type, how)
        self.lifetime_s: defaultdict[tuple[str, str], float] = defaultdict(float)  # sum
        self.lifetimes: Counter[tuple[str, str]] = Counter()  # (layer, type): lifetimes summed
        self.cleanups: Counter[tuple[str, str]] = Counter()  # (operation, outcome)
        self.cleanup_s: defaultdict[str, float] = defaultdict(float)  # operation -> seconds
        self.cleanup_max_s: dict[str, float] = {}
        self.retrievals: Counter[bool] = Counter()  # hit -> count

    def cleanup(self, operation: str, *, ok: bool, seconds: float) -> None:
        self.cleanups[(operation, "ok" if ok else "failed")] += 1
        self.cleanup_s[operation] += seconds
        self.cleanup_max_s[operation] = max(self.cleanup_max_s.get(operation, 0.0), seconds)

    def swept(self, by_layer: Mapping[str, Any], seconds: float) -> None:
        """A completed sweep: its duration, and the memories its decisions ended."""
        self.cleanup("sweep", ok=True, seconds=seconds)
        now = self.clock.now()
        for layer in ("stm", "ltm"):
            stats = by_layer.get(layer)
            for decision in stats.decisions if stats is not None else ():
                how = _ENDING.get(decision.action)
                if how is not None:
                    self.ended[(layer, decision.kind, how)] += 1
                    self.lifetime_s[(layer, decision.kind)] += now - decision.written
                    self.lifetimes[(layer, decision.kind)] += 1

    def note_written(self, memory: MemoryRecord | Fact) -> None:
        if isinstance(memory, Fact):
            self.written[("ltm", memory.category.value)] += 1
        else:
            self.written[("stm", memory.type.value)] += 1

    @contextmanager
    def timed(self, operation: str) -> Iterator[None]:
        """Count the operation in the block: failed if it raises, with its wall time."""
        started = time.perf_counter()
        try:
            yield
        except Exception:  # counted as failed whatever it was, then re-raised
            self.cleanup(operation, ok=False, seconds=time.perf_counter() - started)
            raise
        self.cleanup(operation, ok=True, seconds=time.perf_counter() - started)

    def removed(self, how: str, *, stm: int, ltm: int) -> None:
        """Memories removed by a forget command or an event (its report has no types)."""
        for layer, n in (("stm", stm), ("ltm", ltm)):
            if n:
                self.ended[(layer, "any", how)] += n

    def state(self) -> dict[str, list[list[Any]]]:
        """The counts as JSON lists, `[*key, value]` each (a load worker sends them to the
        master, which adds them up with `add_state`)."""
        return {
            name: [
                [*(k if isinstance(k, tuple) else (k,)), v] for k, v in getattr(self, name).items()
            ]
            for name in _STATE
        }

    def add_state(self, state: Mapping[str, list[list[Any]]]) -> None:
        """Add another process's `state()`: counts and sums add up, longest times max."""
        for name in _STATE:
            mine = getattr(self, name)
            for *key, value in state.get(name) or []:
                k = tuple(key) if len(key) > 1 else key[0]
                if name == "cleanup_max_s":
                    mine[k] = max(mine.get(k, 0.0), value)
                else:
                    mine[k] += value

    def success_ratio(self) -> float | None:
        total = sum(self.cleanups.values())
        failed = sum(n for (_, outcome), n in self.cleanups.items() if outcome == "failed")
        return (total - failed) / total if total else None

    def hit_ratio(self) -> float | None:
        total = self.retrievals[True] + self.retrievals[False]
        return self.retrievals[True] / total if total else None


class CountersCollector(Collector):
    """A `prometheus_client` collector over one `MemoryCounters`, with constant labels
    (e.g. strategy and replica) on every sample."""

    def __init__(self, counters: MemoryCounters, labels: Mapping[str, str] | None = None):
        self.counters = counters
        self.labels = dict(labels or {})

    def collect(self) -> Iterator[Any]:
        c = self.counters
        names = list(self.labels)
        values = list(self.labels.values())

        def family(kind: Any, name: str, doc: str, extra: list[str]) -> Any:
            return kind(name, doc, labels=[*names, *extra])

        written = family(CounterMetricFamily, "memh_memories_written", "memories written", [
            "layer", "type"
        ])  # fmt: skip
        for (layer, kind), n in sorted(c.written.items()):
            written.add_metric([*values, layer, kind], n)
        yield written
        ended = family(CounterMetricFamily, "memh_memories_ended", "memories ended", [
            "layer", "type", "how"
        ])  # fmt: skip
        for (layer, kind, how), n in sorted(c.ended.items()):
            ended.add_metric([*values, layer, kind, how], n)
        yield ended
        lifetime = family(
            SummaryMetricFamily,
            "memh_memory_lifetime_seconds",
            "clock seconds from a value's write to the sweep that ended it",
            ["layer", "type"],
        )
        for key, n in sorted(c.lifetimes.items()):
            lifetime.add_metric([*values, *key], count_value=n, sum_value=c.lifetime_s[key])
        yield lifetime
        cleanups = family(CounterMetricFamily, "memh_cleanups", "cleanup operations", [
            "operation", "outcome"
        ])  # fmt: skip
        for (operation, outcome), n in sorted(c.cleanups.items()):
            cleanups.add_metric([*values, operation, outcome], n)
        yield cleanups
        seconds = family(
            SummaryMetricFamily, "memh_cleanup_seconds", "cleanup wall seconds", ["operation"]
        )
        longest = family(
            GaugeMetricFamily, "memh_cleanup_max_seconds", "longest cleanup", ["operation"]
        )
        for operation in sorted(c.cleanup_s):
            done = sum(n for (op, _), n in c.cleanups.items() if op == operation)
            seconds.add_metric([*values, operation], done, c.cleanup_s[operation])
            longest.add_metric([*values, operation], c.cleanup_max_s.get(operation, 0.0))
        yield seconds
        yield longest
        retrievals = family(CounterMetricFamily, "memh_retrievals", "retrievals", ["hit"])
        for hit in (True, False):
            retrievals.add_metric([*values, str(hit).lower()], c.retrievals[hit])
        yield retrievals
        for name, doc, ratio in (
            ("memh_cleanup_success_ratio", "cleanups that completed", c.success_ratio()),
            ("memh_retrieval_hit_ratio", "retrievals with a hit", c.hit_ratio()),
        ):
            gauge = family(GaugeMetricFamily, name, doc, [])
            if ratio is not None:
                gauge.add_metric(values, ratio)
            yield gauge


def exposition(counters: MemoryCounters, labels: Mapping[str, str] | None = None) -> str:
    """The counters in Prometheus' text format (0.0.4), from a registry of their own."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(CountersCollector(counters, labels))
    return generate_latest(registry).decode()


__all__ = ["CountersCollector", "MemoryCounters", "exposition"]

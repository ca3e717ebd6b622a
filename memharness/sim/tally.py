"""What a shard's replay counts: its tallies (`ShardResult`, which `metrics.merge` adds
up across shards) and the latencies of the reference's operations."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from hdrh.histogram import HdrHistogram

LAYERS = ("session", "stm", "ltm")
#: Operations whose latency a replay records (ms): a turn's parts, probes and sweeps.
LATENCY_OPS = ("session", "pii", "embed", "stm", "ltm", "promotion", "turn", "recall", "sweep")


def new_histogram() -> HdrHistogram:
    """Microseconds, 1 us to 1 h, 3 significant digits: mergeable across workers."""
    return HdrHistogram(1, 3_600_000_000, 3)


@dataclass
class ShardResult:
    """Raw tallies of one shard under one strategy; `metrics.merge` adds shards up."""

    turns: int = 0
    probes: int = 0
    events: int = 0
    needed: int = 0
    retrieved: int = 0
    retrieved_stm: int = 0  # needed facts in the top-k of STM (a fact both layers
    retrieved_ltm: int = 0  # return counts in each)
    missed: int = 0  # the verdicts of the needed facts not retrieved (probes.py)
    over_forgotten: int = 0
    unreachable: int = 0
    unstored: int = 0
    stale_probes: int = 0
    leaked: int = 0
    leaks: list[dict[str, Any]] = field(default_factory=list)  # the first few, to debug
    #: A record per probe that is not clean (`probes.py`), in replay order.
    probe_records: list[dict[str, Any]] = field(default_factory=list)
    #: The dense-search ceiling of the shard's probes (`ceiling.py`): the same under
    #: every strategy.
    ceiling_needed: int = 0
    ceiling_found: int = 0
    pii_residency_s: list[float] = field(default_factory=list)  # resolved items
    pii_open_s: list[float] = field(default_factory=list)  # still resident at the end
    footprint: dict[float, dict[str, tuple[int, int]]] = field(default_factory=dict)
    histograms: dict[str, str] = field(default_factory=dict)  # op -> encoded HDR
    wall_s: float = 0.0
    #: Wall time inside the reference memory (turns, events, probe recalls, sweeps): the
    #: rest of `wall_s` is the harness's own bookkeeping.
    inside_s: float = 0.0
    peak_rss_mb: float = 0.0  # of the process that replayed the shard, over its life


class Latencies:
    """Latencies of the operations in `LATENCY_OPS`, in whole microseconds, counted per
    value; the HDR histograms are built once at the end (recording each value as it
    comes costs more than the turn)."""

    def __init__(self) -> None:
        self.counts: dict[str, Counter[int]] = {op: Counter() for op in LATENCY_OPS}

    def record(self, op: str, ms: float) -> None:
        self.record_all({op: ms})

    def record_all(self, timings_ms: dict[str, float]) -> None:
        """Count each (op, milliseconds) of an op in `LATENCY_OPS`, in one call (a turn's
        timings; `record` is one)."""
        counts = self.counts
        for op, ms in timings_ms.items():
            if op in counts:
                counts[op][max(1, round(ms * 1000.0))] += 1

    def encoded(self) -> dict[str, str]:
        """op -> encoded HDR histogram (microseconds) of the latencies recorded."""
        out = {}
        for op, counts in self.counts.items():
            histogram = new_histogram()
            for micros, n in counts.items():
                histogram.record_value(micros, n)
            out[op] = histogram.encode().decode()
        return out


__all__ = ["LATENCY_OPS", "LAYERS", "Latencies", "ShardResult", "new_histogram"]

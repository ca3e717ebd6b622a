"""What a shard's replay counts: its tallies (`ShardResult`, which `metrics.merge` adds
up across shards) and the latencies of the reference's operations."""

from __future__ import annotations

import dataclasses
from array import array
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from hdrh.histogram import HdrHistogram

from memharness.sim.monitoring import MonitorTally

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
    #: PII (`metrics.py`): the statements whose values the script marks, and per item
    #: the time from the statement until no layer showed its values in plaintext
    #: (`pii_raw_s`), and, for items a layer held sealed, until none did
    #: (`pii_sealed_s`); items whose copy outlived the run are counted `..._at_end`
    #: instead. `pii_unmeasured`: statements marked sensitive with no value to follow.
    pii_items: int = 0
    pii_unmeasured: int = 0
    pii_raw_s: list[float] = field(default_factory=list)
    pii_raw_at_end: int = 0
    pii_sealed_items: int = 0
    pii_sealed_s: list[float] = field(default_factory=list)
    pii_sealed_at_end: int = 0
    #: The detector against the marks (`pii_scoring.py`): "<kind>.<count>" -> count.
    pii_detector: Counter[str] = field(default_factory=Counter)
    #: Per sample time, per layer (records, bytes): the series' samples, and those taken
    #: for the peak only (at probe moments, `plan.probe_times`).
    footprint: dict[float, dict[str, tuple[int, int]]] = field(default_factory=dict)
    peak_footprint: dict[float, dict[str, tuple[int, int]]] = field(default_factory=dict)
    histograms: dict[str, str] = field(default_factory=dict)  # op -> encoded HDR
    wall_s: float = 0.0
    #: Wall time inside the reference memory (turns, events, probe recalls, sweeps): the
    #: rest of `wall_s` is the harness's own bookkeeping.
    inside_s: float = 0.0
    peak_rss_mb: float = 0.0  # of the process that replayed the shard, over its life
    #: Growth, lifetime, cleanup and hit rate counts (`monitoring.py`).
    monitor: MonitorTally = field(default_factory=MonitorTally)
    #: A system under test: what it was asked and could not do ("delete (expiry)" -> n;
    #: `memharness/sim/peer_replay.py`). Empty for the reference.
    unsupported: Counter[str] = field(default_factory=Counter)
    #: A system under test: what it does natively (`Capabilities`, as plain data).
    capabilities: dict[str, Any] = field(default_factory=dict)


class Latencies:
    """Latencies of the operations in `LATENCY_OPS`, in milliseconds as measured, kept
    per op in a flat array; the HDR histograms (whole microseconds) are built once at the
    end: recording each value as it comes costs more than the turn, and binning it as it
    comes is about 3% of a replay (py-spy on `bench.shard_replay`)."""

    def __init__(self) -> None:
        self.values: dict[str, array[float]] = {op: array("d") for op in LATENCY_OPS}

    def record(self, op: str, ms: float) -> None:
        self.values[op].append(ms)

    def record_all(self, timings_ms: dict[str, float]) -> None:
        """Record each (op, milliseconds) of an op in `LATENCY_OPS`, in one call (a
        turn's timings)."""
        values = self.values
        for op, ms in timings_ms.items():
            if op in values:
                values[op].append(ms)

    def encoded(self) -> dict[str, str]:
        """op -> encoded HDR histogram (microseconds, at least 1) of the latencies
        recorded: each value rounded half to even, as `round` does."""
        out = {}
        for op, values in self.values.items():
            histogram = new_histogram()
            micros = np.maximum(np.rint(np.frombuffer(values, dtype=np.float64) * 1000.0), 1)
            for value, n in zip(*np.unique(micros, return_counts=True), strict=True):
                histogram.record_value(int(value), int(n))
            out[op] = histogram.encode().decode()
        return out


__all__ = ["LATENCY_OPS", "LAYERS", "Latencies", "ShardResult", "new_histogram"]


def join_cohorts(cohorts: list[ShardResult]) -> ShardResult:
    """One worker's cohorts, replayed one after another, as one shard's result: tallies,
    lists, footprints (per sample) and histograms add up, times add up, the peak RSS is
    the highest."""
    if len(cohorts) == 1:
        return cohorts[0]
    joined = ShardResult()
    for cohort in cohorts:
        for f in dataclasses.fields(ShardResult):
            mine, theirs = getattr(joined, f.name), getattr(cohort, f.name)
            if f.name == "peak_rss_mb":
                joined.peak_rss_mb = max(mine, theirs)
            elif f.name == "capabilities":
                joined.capabilities = theirs or mine
            elif f.name in ("footprint", "peak_footprint"):
                for at, layers in theirs.items():
                    point = mine.setdefault(at, {})
                    for layer, (records, size) in layers.items():
                        have = point.get(layer, (0, 0))
                        point[layer] = (have[0] + records, have[1] + size)
            elif f.name == "histograms":
                for op, encoded in theirs.items():
                    histogram = new_histogram()
                    for part in (mine.get(op), encoded):
                        if part is not None:
                            histogram.add(HdrHistogram.decode(part))
                    mine[op] = histogram.encode().decode()
            elif isinstance(mine, list):
                mine.extend(theirs)
            else:
                setattr(joined, f.name, mine + theirs)
    return joined

"""Per virtual day of a time-scaled load: each operation's latency and each layer's records.

Under `memharness load --time-scale N` the memory runs on a `ScaledClock`: a wall
second is N virtual seconds (4320: ten minutes are thirty days), so TTLs, sliding
windows, decay, consolidation and archival fire during the load. `VirtualDays` files
every timed operation under the virtual day its clock was in when it ended (day 0
starts when the test starts) and samples each layer's live records and payload bytes
through the stores' footprint path (`usage()`: a read that changes nothing) a few times
per virtual day. The report shows whether a strategy's latency drifts as its stores
grow (keep_all) or stays flat (a TTL strategy).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import astuple, dataclass, field
from typing import Any

from loadtests.hdr import OpHistograms
from reference.clock import Clock, SystemClock

__all__ = [
    "CLOCK_ORIGIN_ENV",
    "DAY_S",
    "TIME_SCALE_ENV",
    "WALL_ORIGIN_ENV",
    "VirtualDays",
    "clock_from_env",
    "format_days",
    "sample_interval_s",
]

DAY_S = 86_400.0
#: Read by the Locust process: the scale and the origins every process of the run shares.
TIME_SCALE_ENV = "MEMH_LOAD_TIME_SCALE"
CLOCK_ORIGIN_ENV = "MEMH_LOAD_CLOCK_ORIGIN"
WALL_ORIGIN_ENV = "MEMH_LOAD_WALL_ORIGIN"
#: Operations whose per-day percentiles are reported (the layers, the turn, the calls
#: a scenario adds); other operations are kept in the histograms only.
DAY_OPS = ("session", "embed", "stm", "ltm", "promotion", "turn", "recall", "event")


def clock_from_env(env: Mapping[str, str] = os.environ) -> tuple[Clock, float | None]:
    """The clock the run's memory runs on, and its virtual origin (None: the wall clock).

    With `MEMH_LOAD_TIME_SCALE` set: a `ScaledClock` at that scale from the origins in
    `MEMH_LOAD_CLOCK_ORIGIN` / `MEMH_LOAD_WALL_ORIGIN` (both default to now), the same
    ones the maintenance process is given, so both processes agree on "now".
    """
    text = env.get(TIME_SCALE_ENV, "").strip()
    if not text:
        return SystemClock(), None
    from reference.clock import ScaledClock

    origin = float(env[CLOCK_ORIGIN_ENV]) if env.get(CLOCK_ORIGIN_ENV) else None
    wall = float(env[WALL_ORIGIN_ENV]) if env.get(WALL_ORIGIN_ENV) else None
    clock = ScaledClock(float(text), origin=origin, wall_origin=wall)
    return clock, clock.origin


def sample_interval_s(scale: float) -> float:
    """Wall seconds between record samples: four per virtual day, within 1-10 s."""
    return min(10.0, max(1.0, DAY_S / scale / 4.0))


@dataclass
class VirtualDays:
    """Histograms and record samples keyed by virtual day (see the module docstring)."""

    clock: Clock
    origin: float
    hists: dict[int, OpHistograms] = field(default_factory=dict)
    #: (virtual day as a float, {layer: (records, bytes)}), in sampling order.
    samples: list[tuple[float, dict[str, tuple[int, int]]]] = field(default_factory=list)

    def restart(self) -> None:
        """Day 0 starts now, at the test's start (the build and warm-up before it take
        virtual days of their own at a high scale)."""
        self.origin = self.clock.now()
        self.hists.clear()
        self.samples.clear()

    def day(self) -> int:
        return max(0, math.floor((self.clock.now() - self.origin) / DAY_S))

    def record_ms(self, op: str, ms: float) -> None:
        day = self.day()
        hists = self.hists.get(day)
        if hists is None:
            hists = self.hists[day] = OpHistograms()
        hists.record_ms(op, ms)

    def sample(self, system: Any) -> None:
        """Each layer's live records and bytes now (a read through `usage()`)."""
        at = (self.clock.now() - self.origin) / DAY_S
        usage = {
            layer: astuple(getattr(system, layer).usage()) for layer in ("session", "stm", "ltm")
        }
        self.samples.append((at, usage))

    def document(self) -> list[dict[str, Any]]:
        """One entry per virtual day: each operation's count and p50/p95/p99 (ms), and the
        records and bytes per layer at the day's last sample (None: no sample that day)."""
        last: dict[int, dict[str, tuple[int, int]]] = {}
        for at, usage in self.samples:
            last[max(0, math.floor(at))] = usage
        days = sorted(set(self.hists) | set(last))
        out = []
        for day in days:
            hists = self.hists.get(day, OpHistograms())
            ops = {}
            for op in DAY_OPS:
                if op in hists:
                    summary = hists.summary(op)
                    ops[op] = {
                        "count": summary.count,
                        "p50_ms": _ms(summary.p50_ms),
                        "p95_ms": _ms(summary.p95_ms),
                        "p99_ms": _ms(summary.p99_ms),
                    }
            day_usage = last.get(day)
            out.append(
                {
                    "day": day,
                    "ops": ops,
                    "records": _layers(day_usage, 0),
                    "bytes": _layers(day_usage, 1),
                }
            )
        return out


def _layers(usage: Mapping[str, tuple[int, int]] | None, index: int) -> dict[str, int] | None:
    return None if usage is None else {layer: value[index] for layer, value in usage.items()}


def _ms(value: float) -> float | None:
    return None if math.isnan(value) else round(value, 3)


def format_days(days: list[dict[str, Any]]) -> str:
    """The end-of-run table: per virtual day, turn p95 and each layer's p95 and records."""
    head = f"{'day':>4}{'turns':>8}{'turn p95':>10}{'stm p95':>9}{'ltm p95':>9}"
    head += f"{'recall p95':>11}{'sessions':>10}{'stm recs':>10}{'ltm recs':>10}"
    lines = ["Per virtual day (p95 in ms; records at the day's last sample):", head]
    for entry in days:
        ops, records = entry["ops"], entry["records"] or {}

        def p95(op: str, width: int, ops: dict[str, Any] = ops) -> str:
            value = (ops.get(op) or {}).get("p95_ms")
            return f"{value:>{width}.1f}" if value is not None else f"{'-':>{width}}"

        def n(layer: str, records: dict[str, int] = records) -> str:
            return f"{records[layer]:>10}" if layer in records else f"{'-':>10}"

        turns = (ops.get("turn") or {}).get("count", 0)
        lines.append(
            f"{entry['day']:>4}{turns:>8}{p95('turn', 10)}{p95('stm', 9)}{p95('ltm', 9)}"
            f"{p95('recall', 11)}{n('session')}{n('stm')}{n('ltm')}"
        )
    return "\n".join(lines)

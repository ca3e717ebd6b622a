"""Rate steps: open-loop arrivals at R1, R2, ... turns/s, each for a fixed time, recorded per step.

The capacity plan needs the system at several offered rates, from light load to past
saturation (CAPACITY.md: at least 6 points for a Universal Scalability Law fit). One run
holds a timeline of steps: `SteppedSchedule` hands out intended starts at step k's rate
while the timeline is in step k, and none after the last step. Each turn belongs to the
step of its *intended* start (the latency a caller arriving then sees, queueing
included); throughput is counted by *finish* time within each step's window; the CPU of
every process is sampled at each boundary (`loadtests.procstats`). `StepRecorder`
writes it all to `steps.json`.

`auto` rates: the locust process plays a few turns after its warm-up (one at a time),
takes the CPU seconds they cost every process of the system under test (D), X_max =
cores / D (the utilisation law), and offers `AUTO_SHARES` of it
(`memharness.load_contract`): a spread below the safe utilisation and around X_max, on a
fast or a slow machine alike. `--repeats N` plays every
rate N times, in rounds of alternating direction (`interleave`), so a plan gets an
interval per rate and a drift of the machine falls on every rate alike.

Per step the recorder also keeps the share of intended turns never started
(`dropped_share`) and the turn's service time in the first and last thirds of the step
(`drift`: a system that slows as it runs).
"""

from __future__ import annotations

import json
import math
import os
import statistics
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loadtests.generator import SendLag
from loadtests.hdr import OpHistograms
from loadtests.procstats import ProcessSample
from memharness.verdict.histograms import TURN_INTENDED, check_slas, failed
from memharness.verdict.limits import Sla

__all__ = [
    "DRIFT_LIMIT",
    "StepRecorder",
    "SteppedSchedule",
    "drift",
    "format_steps",
    "interleave",
    "parse_rates",
    "step_verdicts",
]

#: Drift: a step whose last third's median service time is this much over its first's.
DRIFT_LIMIT = 1.25


def parse_rates(text: str) -> tuple[float, ...] | None:
    """Rates from "2,4,8.5"; None for "auto". Raises ValueError naming the bad part."""
    text = text.strip()
    if text == "auto":
        return None
    rates = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        try:
            rate = float(part)
        except ValueError:
            raise ValueError(f"rate {part!r}: expected turns per second, e.g. 2,4,8") from None
        if not (math.isfinite(rate) and rate > 0):
            raise ValueError(f"rate {part!r}: must be > 0")
        rates.append(rate)
    if not rates:
        raise ValueError("rates: at least one rate, or 'auto'")
    return tuple(rates)


def interleave(rates: Sequence[float], repeats: int) -> tuple[float, ...]:
    """`rates` played `repeats` times, each round once through them, in alternating
    directions (light to heavy, then heavy to light: A B C C B A A B C): every rate sits
    at the same mean time in the run, so a drift of the machine spreads evenly over the
    rates, and a saturated step's backlog spills into at most one lighter step per
    round (the plan sets such a step apart)."""
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1 (got {repeats})")
    ordered = sorted(rates)
    out: list[float] = []
    for k in range(repeats):
        out.extend(ordered if k % 2 == 0 else reversed(ordered))
    return tuple(out) if repeats > 1 else tuple(rates)


def drift(first_ms: Sequence[float], last_ms: Sequence[float]) -> dict[str, Any] | None:
    """The median service time of a step's last third over its first's (None when a
    third has no turn)."""
    if not first_ms or not last_ms:
        return None
    first, last = statistics.median(first_ms), statistics.median(last_ms)
    ratio = last / first if first > 0 else math.inf
    return {
        "first_third_p50_ms": round(first, 3),
        "last_third_p50_ms": round(last, 3),
        "turns": [len(first_ms), len(last_ms)],
        "ratio": round(ratio, 4) if math.isfinite(ratio) else None,
        "drifts": bool(ratio > DRIFT_LIMIT),
    }


class SteppedSchedule:
    """Intended starts at `rates[k]` per second during step k, each `step_s` long.

    The timeline starts at the first claim; `claim` returns None once it is past the last
    step. Arrivals are evenly spaced within a step (a step boundary restarts the spacing).
    A claim made after its step ended moves on to the step of `now`: the intended starts
    left behind are dropped (`dropped_share` in steps.json), not served late.
    """

    def __init__(self, rates: Sequence[float], step_s: float) -> None:
        if not rates or step_s <= 0:
            raise ValueError("a stepped schedule needs rates and a step duration > 0")
        self.rates = tuple(rates)
        self.step_s = step_s
        self.start: float | None = None
        self._next: float | None = None
        self._step = 0
        self.claimed = [0] * len(self.rates)

    def boundary(self, k: int) -> float:
        """Clock time at which step k starts (k = len(rates): the end)."""
        assert self.start is not None
        return self.start + k * self.step_s

    def claim(self, now: float) -> tuple[float, int] | None:
        """The next intended start and its step, or None when the timeline is over."""
        if self.start is None:
            self.start = self._next = now
        assert self._next is not None
        n = len(self.rates)
        current = int((now - self.start) // self.step_s)
        if current >= n:
            return None  # the timeline is over; what was never started is dropped
        if current > self._step:
            # The steps behind ended before their intended starts could be claimed (every
            # user was busy): those are dropped, as k6 drops iterations, so a saturated
            # step's backlog never becomes the next step's load.
            self._step = current
            self._next = max(self._next, self.boundary(current))
        while self._step < n and self._next >= self.boundary(self._step + 1):
            self._step += 1  # a new step: its spacing starts at its boundary
            if self._step < n:
                self._next = self.boundary(self._step)
        if self._step >= len(self.rates):
            return None
        intended, step = self._next, self._step
        self._next += 1.0 / self.rates[step]
        self.claimed[step] += 1
        return intended, step

    def over(self, now: float) -> bool:
        return self.start is not None and now >= self.boundary(len(self.rates))


@dataclass
class StepRecorder:
    """Per-step histograms, completions and process samples of one stepped run."""

    schedule: SteppedSchedule
    hists: list[OpHistograms] = field(default_factory=list)
    completed: list[int] = field(default_factory=list)
    failed: list[int] = field(default_factory=list)
    #: Per step: failed operations by name (they are not in `hists`).
    errors: list[dict[str, int]] = field(default_factory=list)
    late_completions: int = 0
    samples: list[dict[str, ProcessSample]] = field(default_factory=list)
    sample_times: list[float] = field(default_factory=list)
    cache: list[tuple[int, int]] = field(default_factory=list)
    in_flight: int = 0
    #: Per step: service times (ms) of the turns intended in its first and last thirds.
    thirds: list[tuple[list[float], list[float]]] = field(default_factory=list)
    #: Per step: each turn's send time against its intended one (`loadtests.generator`).
    sends: list[SendLag] = field(default_factory=list)
    #: The cores the system under test shares (the utilisation law's numerator).
    cores: int = field(default_factory=lambda: len(os.sched_getaffinity(0)))

    def __post_init__(self) -> None:
        n = len(self.schedule.rates)
        self.thirds = [([], []) for _ in range(n)]
        self.sends = [SendLag() for _ in range(n)]
        self.hists = [OpHistograms() for _ in range(n)]
        self.completed = [0] * n
        self.failed = [0] * n
        self.errors = [{} for _ in range(n)]

    def record_ms(self, step: int, op: str, ms: float) -> None:
        self.hists[step].record_ms(op, ms)

    def record_service(self, step: int, intended: float, ms: float) -> None:
        """A turn's service time, kept when its intended start is in the step's first or
        last third (for `drift`)."""
        if self.schedule.start is None:
            return
        third = int((intended - self.schedule.boundary(step)) * 3 // self.schedule.step_s)
        if third == 0:
            self.thirds[step][0].append(ms)
        elif third == 2:
            self.thirds[step][1].append(ms)

    def record_error(self, step: int, op: str) -> None:
        self.errors[step][op] = self.errors[step].get(op, 0) + 1

    def finished(self, at: float, *, ok: bool, step: int) -> None:
        """A turn ended at clock time `at`: counted in the step whose window holds `at`."""
        if not ok:
            self.failed[step] += 1
        start = self.schedule.start
        if start is None:
            return
        index = int((at - start) // self.schedule.step_s)
        if 0 <= index < len(self.completed):
            self.completed[index] += ok
        else:
            self.late_completions += ok

    def step_title(self, k: int) -> str:
        """Step k's progress title: its place, offered rate and duration."""
        schedule = self.schedule
        return (
            f"rate step {k + 1}/{len(schedule.rates)}: {schedule.rates[k]:g} turns/s "
            f"for {schedule.step_s:g} s"
        )

    def step_so_far(self, k: int) -> str:
        """Step k's figures at the end of its window, for its progress line: the achieved
        rate (final: counted by finish time within the window) and the p95 from intended
        start of the turns finished so far (a backlog may still finish later)."""
        claimed = self.schedule.claimed[k]
        achieved = self.completed[k] / self.schedule.step_s
        turn = self.hists[k].summary(TURN_INTENDED)
        p95 = f"p95 {turn.p95_ms:.1f} ms" if turn.count else "p95 -"
        return (
            f"achieved {achieved:.2f} turns/s, {p95} from intended start "
            f"({turn.count} of {claimed} turns finished)"
        )

    def sample(
        self, at: float, processes: Mapping[str, ProcessSample], cache: tuple[int, int]
    ) -> None:
        self.sample_times.append(at)
        self.samples.append(dict(processes))
        self.cache.append(cache)

    def document(
        self,
        meta: Mapping[str, Any],
        *,
        slas: Sequence[Sla] = (),
        measure_as: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """What `steps.json` holds: the run's meta, then one entry per step, each with its
        SLA verdicts (errors counted) when `slas` are given: `sla_held` tells whether the
        step's offered rate held every SLA (the `ci` gate)."""
        schedule = self.schedule
        steps = []
        for k, rate in enumerate(schedule.rates):
            hists = self.hists[k]
            expected = max(rate * schedule.step_s, 1.0)
            turn = hists.summary("turn") if "turn" in hists else None
            entry: dict[str, Any] = {
                "step": k,
                "offered_rate": rate,
                "duration_s": schedule.step_s,
                "intended": schedule.claimed[k],
                "completed_in_window": self.completed[k],
                "failed": self.failed[k],
                "errors": dict(self.errors[k]),
                "achieved_rate": round(self.completed[k] / schedule.step_s, 4),
                "dropped_share": round(max(0.0, 1.0 - schedule.claimed[k] / expected), 4),
                "drift": drift(*self.thirds[k]),
                "ops": {op: _clean(hists.summary(op).as_dict()) for op in hists.ops},
                "histograms": hists.encode(),
            }
            if slas:
                verdicts = check_slas(hists, slas, measure_as=measure_as, errors=self.errors[k])
                entry["slas"] = [v.as_dict() for v in verdicts]
                entry["sla_held"] = not failed(verdicts)
            if turn is not None and turn.count:
                # Little's law: turns in progress = throughput x time in the turn.
                entry["concurrency"] = round(entry["achieved_rate"] * turn.mean_ms / 1000.0, 4)
            if k + 1 < len(self.samples):
                entry["processes"] = _process_delta(self.samples[k], self.samples[k + 1])
                hits = self.cache[k + 1][0] - self.cache[k][0]
                misses = self.cache[k + 1][1] - self.cache[k][1]
                entry["embedding_cache"] = {"hits": hits, "misses": misses}
                entry["window_s"] = round(self.sample_times[k + 1] - self.sample_times[k], 3)
            generator = entry.get("processes", {}).get("generator")
            entry["generator"] = {
                **self.sends[k].as_dict(),
                "cpu_s": generator["cpu_s"] if generator else None,
            }
            steps.append(entry)
        return {
            **meta,
            "kind": "step-load",
            "rates": list(schedule.rates),
            "step_s": schedule.step_s,
            "cores": self.cores,
            "late_completions": self.late_completions,
            "steps": steps,
        }

    def write(self, run_dir: Path, document: Mapping[str, Any]) -> Path:
        """Write `document` (from `document()`) to RUN_DIR/steps.json."""
        run_dir.mkdir(parents=True, exist_ok=True)
        path = run_dir / "steps.json"
        path.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
        return path


def format_steps(document: Mapping[str, Any]) -> str:
    """The end-of-run table: offered vs achieved rate, turn@intended percentiles, CPU/turn."""
    lines = [
        "Rate steps (turns/s; turn@intended ms; CPU s per turn):",
        f"{'step':>4}{'offered':>9}{'achieved':>10}{'p50':>9}{'p95':>9}{'p99':>9}  cpu/turn",
    ]
    for entry in document["steps"]:
        op = entry["ops"].get("turn@intended") or {}
        done = max(entry["completed_in_window"], 1)
        cpu = ", ".join(
            f"{role} {figures['cpu_s'] / done * 1000:.1f}ms"
            for role, figures in (entry.get("processes") or {}).items()
        )
        lines.append(
            f"{entry['step']:>4}{entry['offered_rate']:>9.2f}{entry['achieved_rate']:>10.2f}"
            f"{_ms(op.get('p50_ms'))}{_ms(op.get('p95_ms'))}{_ms(op.get('p99_ms'))}  {cpu}"
        )
    return "\n".join(lines)


def step_verdicts(document: Mapping[str, Any]) -> tuple[list[str], bool]:
    """What the SLA verdicts per step of `document` (steps.json) say, in plain notes, and
    whether any step held every SLA. A capacity run offers rates past the knee on purpose
    (`AUTO_FRACTIONS` reaches 170 % of the calibrated capacity): a step above the highest
    rate that held is expected to break an SLA; one below it is noted as such."""
    steps = [s for s in document["steps"] if "sla_held" in s]
    held = [float(s["offered_rate"]) for s in steps if s["sla_held"]]
    if not held:
        return [], not steps  # no verdicts (no SLA given) fail nothing
    knee = max(held)
    notes = []
    for step in steps:
        if step["sla_held"]:
            continue
        rate = float(step["offered_rate"])
        if rate > knee:
            notes.append(f"step at {rate:g} turns/s past saturation: expected, it finds the knee")
        else:
            notes.append(
                f"step at {rate:g} turns/s broke an SLA although a higher rate held them "
                f"({knee:g} turns/s): its verdicts are in steps.json"
            )
    return notes, True


def _ms(value: object) -> str:
    return f"{value:>9.1f}" if isinstance(value, int | float) else f"{'-':>9}"


def _process_delta(
    before: Mapping[str, ProcessSample], after: Mapping[str, ProcessSample]
) -> dict[str, dict[str, Any]]:
    """CPU seconds each role spent between two samples, and its RSS at the second."""
    out = {}
    for role, end in after.items():
        start = before.get(role)
        out[role] = {
            "cpu_s": round(end.cpu_s - (start.cpu_s if start else 0.0), 4),
            "rss_mb": round(end.rss_bytes / 2**20, 2),
            "pids": len(end.pids),
        }
    return out


def _clean(data: dict[str, object]) -> dict[str, object]:
    return {
        key: None if isinstance(value, float) and math.isnan(value) else value
        for key, value in data.items()
    }


def now() -> float:
    """The clock every stepped timestamp is on."""
    return time.perf_counter()

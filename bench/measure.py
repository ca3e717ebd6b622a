"""Running a measured operation, collecting its raw timings, and the run's report.

Every operation is timed per call: `benchmark.pedantic` with one iteration per round, so
pytest-benchmark's raw data (`benchmark.stats.stats.data`) is one sample per call, not a
mean over a calibrated loop, and the SLA check sees the real tail. Per-round inputs
(fresh texts, new ids) come from a `setup` function, which pytest-benchmark runs outside
the timed region.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.machine import Reference, slowdown
from memharness.verdict.intervals import CONFIDENCE, RESAMPLES, SEED
from memharness.verdict.limits import SLA_MS
from memharness.verdict.samples import MIN_SAMPLES, GateOutcome, SlaCheck, check_sla, gate

Setup = Callable[[], tuple[tuple[Any, ...], dict[str, Any]]]
#: The `measure` fixture: `measure(op, layer, target, case=..., setup=..., params=...)`.
Measure = Callable[..., "OpSamples"]


@dataclass(slots=True)
class OpSamples:
    """Raw timings of one operation on one backend, in milliseconds."""

    op: str  # e.g. "session.get", "stm.query[uncached]"
    layer: str  # picks the SLA: session | stm | ltm | turn; others have none
    backend: str  # "real" or "null"
    samples_ms: list[float]
    params: dict[str, Any] = field(default_factory=dict)
    #: The machine probe's timings right before and after the samples (`bench.machine`).
    probe_ms: list[float] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.op if self.backend == "real" else f"{self.op} [{self.backend}]"


class Recorder:
    """Collects every operation's samples during a bench session; evaluates the gate,
    each operation at the reference machine's speed when its probes say the machine ran
    slower (`bench.machine`; `machine_key` is set by the bench's probe)."""

    def __init__(self, reference: Reference | None = None) -> None:
        self.ops: list[OpSamples] = []
        self.reference = reference
        self.machine_key: dict[str, Any] | None = None

    def add(self, samples: OpSamples) -> None:
        self.ops.append(samples)

    def evaluate(
        self,
        *,
        min_samples: int = MIN_SAMPLES,
        resamples: int = RESAMPLES,
        confidence: float = CONFIDENCE,
        seed: int = SEED,
        slas: dict[str, float] | None = None,
    ) -> GateOutcome:
        slas = SLA_MS if slas is None else slas
        checks = []
        for ops in self.ops:
            factor, machine = slowdown(ops.probe_ms, self.reference, self.machine_key)
            checks.append(
                check_sla(
                    ops.name,
                    ops.samples_ms,
                    layer=ops.layer,
                    sla_ms=slas.get(ops.layer),
                    min_samples=min_samples,
                    resamples=resamples,
                    confidence=confidence,
                    seed=seed,
                    slowdown=factor,
                    machine=machine,
                )
            )
        return gate(checks)


def time_calls(
    target: Callable[..., object],
    *,
    rounds: int,
    warmup: int = 0,
    setup: Setup | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> list[float]:
    """Per-call timings (ms) without pytest-benchmark, with `pedantic`'s semantics; `clock`
    (seconds) is what times each call."""
    samples: list[float] = []
    for index in range(warmup + rounds):
        args, kwargs = setup() if setup is not None else ((), {})
        start = clock()
        target(*args, **kwargs)
        elapsed = clock() - start
        if index >= warmup:
            samples.append(elapsed * 1000.0)
    return samples


def run_pedantic(
    benchmark: Any,
    target: Callable[..., object],
    *,
    rounds: int,
    warmup: int,
    setup: Setup | None = None,
) -> list[float]:
    """Run `target` under pytest-benchmark, one call per round; its raw timings in ms."""
    benchmark.pedantic(target, setup=setup, rounds=rounds, warmup_rounds=warmup, iterations=1)
    return [float(seconds) * 1000.0 for seconds in benchmark.stats.stats.data]


# --------------------------------------------------------------------------- report


def report(
    outcome: GateOutcome, recorder: Recorder, *, run: dict[str, Any], gate_params: dict[str, Any]
) -> dict[str, Any]:
    """The bench.json document: the run, the gate's rule, and per operation its figures,
    the null backend's figures for the same operation (harness overhead) and raw samples."""
    by_name = {ops.name: ops for ops in recorder.ops}
    null = {ops.op: ops for ops in recorder.ops if ops.backend == "null"}
    checks = {check.op: check for check in outcome.checks}
    rows: list[dict[str, Any]] = []
    for check in outcome.checks:
        ops = by_name[check.op]
        row = check.as_dict()
        row.update(op=ops.op, name=ops.name, backend=ops.backend, params=ops.params)
        twin = null.get(ops.op) if ops.backend == "real" else None
        if twin is not None:
            twin_check = checks[twin.name]
            row["null_p50_ms"] = round(twin_check.p50_ms, 6)
            row["null_p95_ms"] = round(twin_check.p95_ms, 6)
        row["samples_ms"] = [round(value, 4) for value in ops.samples_ms]
        row["probe_ms"] = [round(value, 4) for value in ops.probe_ms]
        rows.append(row)
    reference = recorder.reference
    return {
        **run,
        "machine_key": recorder.machine_key,
        "machine_reference": None
        if reference is None
        else {
            "probe_p50_ms": reference.probe_p50_ms,
            "recorded_at": reference.recorded_at,
            "same_key": reference.key == recorder.machine_key,
        },
        "gate": {"passed": outcome.passed, **gate_params},
        "ops": rows,
    }


def write_report(path: Path, document: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=1, allow_nan=False) + "\n", encoding="utf-8")
    return path


def table(checks: list[SlaCheck]) -> list[str]:
    """A fixed-width table of the checks (the pytest terminal summary)."""
    head = (
        f"{'operation':44}{'n':>6}{'p50':>9}{'p95':>9}{'p99':>9}"
        f"{'p95 CI':>19}{'SLA':>7}{'headroom':>10}{'slowdown':>9}  verdict"
    )
    lines = [head + "   (ms)", "-" * len(head)]
    for check in checks:
        sla = "-" if check.sla_ms is None else f"{check.sla_ms:g}"
        headroom = check.headroom
        room = "-" if headroom is None else "inf" if math.isinf(headroom) else f"{headroom:.1f}x"
        ci = f"{check.p95_ci.low:.2f}-{check.p95_ci.high:.2f}"
        lines.append(
            f"{check.op:44}{check.n:>6}{check.p50_ms:>9.3f}{check.p95_ms:>9.3f}"
            f"{check.p99_ms:>9.3f}{ci:>19}{sla:>7}{room:>10}{check.slowdown:>8.2f}x"
            f"  {check.verdict.value}"
        )
    return lines

"""The SLA gate of `memharness bench`: p95/p99 with bootstrap confidence intervals over raw
per-call timings.

Pure functions of the samples, no I/O. pytest-benchmark's own gates see only mean and
median, so this is the p95 gate of DESIGN.md ("Measuring latency").

The rule: an operation FAILS only when the *lower* bound of the confidence interval of
its p95 is over the SLA (`intervals.decide`), i.e. we are confident (95% by default) that
the true p95 breaches it. A noisy machine then widens the interval instead of failing the
build. With fewer than `min_samples` samples the check says INSUFFICIENT, which fails
too: a gate that cannot see the tail must not pass. An operation measured on a machine
running `slowdown` times slower than the reference (`bench.machine`) is judged at the
reference's speed: its interval divided by the slowdown.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from memharness.verdict.intervals import (
    CONFIDENCE,
    RESAMPLES,
    SEED,
    Interval,
    Verdict,
    bootstrap_cis,
    decide,
    fmt_ms,
    percentiles,
)

MIN_SAMPLES = 200


@dataclass(frozen=True, slots=True)
class SlaCheck:
    """The outcome of checking one operation's timings against its layer's SLA."""

    op: str
    layer: str
    sla_ms: float | None
    n: int
    p50_ms: float
    p95_ms: float
    p99_ms: float
    p95_ci: Interval
    p99_ci: Interval
    confidence: float
    verdict: Verdict
    message: str
    #: How much slower than the reference the machine ran beside this operation (>= 1);
    #: the verdict is on the p95 interval divided by it (`bench.machine`).
    slowdown: float = 1.0

    @property
    def passed(self) -> bool:
        return self.verdict in (Verdict.PASS, Verdict.INFO)

    @property
    def headroom(self) -> float | None:
        """SLA / p95 at the reference's speed: how many times slower the operation could
        get before breaching."""
        if self.sla_ms is None or math.isnan(self.p95_ms):
            return None
        return math.inf if self.p95_ms <= 0 else self.sla_ms * self.slowdown / self.p95_ms

    def as_dict(self) -> dict[str, Any]:
        return {
            "op": self.op,
            "layer": self.layer,
            "n": self.n,
            "p50_ms": _num(self.p50_ms),
            "p95_ms": _num(self.p95_ms),
            "p99_ms": _num(self.p99_ms),
            "p95_ci_ms": [_num(self.p95_ci.low), _num(self.p95_ci.high)],
            "p99_ci_ms": [_num(self.p99_ci.low), _num(self.p99_ci.high)],
            "confidence": self.confidence,
            "sla_ms": self.sla_ms,
            "headroom": _num(self.headroom),
            "verdict": self.verdict.value,
            "message": self.message,
            "slowdown": round(self.slowdown, 4),
        }


def check_sla(
    op: str,
    samples_ms: Sequence[float] | np.ndarray,
    *,
    layer: str,
    sla_ms: float | None,
    min_samples: int = MIN_SAMPLES,
    resamples: int = RESAMPLES,
    confidence: float = CONFIDENCE,
    seed: int = SEED,
    slowdown: float = 1.0,
    machine: str = "",
) -> SlaCheck:
    """Check one operation's raw timings (milliseconds) against `sla_ms` at p95.

    FAIL only when the p95 interval's lower bound, divided by `slowdown` (>= 1: how much
    slower than the reference the machine ran, `machine` says how that was measured), is
    over the SLA; INSUFFICIENT (a failure) below `min_samples`; INFO when `sla_ms` is
    None. The message gives p95, its interval, the SLA, n, p99 and any slowdown.
    """
    if not (slowdown >= 1.0 and math.isfinite(slowdown)):
        raise ValueError(f"slowdown must be a finite factor >= 1, got {slowdown}")
    data = np.asarray(samples_ms, dtype=np.float64)
    n = int(data.size)
    p50, p95, p99 = percentiles(data, (50, 95, 99))
    ci95, ci99 = bootstrap_cis(
        data, (95, 99), resamples=resamples, confidence=confidence, seed=seed
    )
    level = f"{confidence:.0%} CI"
    figures = f"p95 {fmt_ms(p95)} ms ({level} {ci95}), p99 {fmt_ms(p99)} ms ({level} {ci99}), n={n}"
    low = ci95.low / slowdown  # at the reference machine's speed
    if slowdown > 1.0:
        figures += (
            f"; measured on a machine {slowdown:.2f}x slower than the reference ({machine}): "
            f"p95 {fmt_ms(p95 / slowdown)} ms, lower bound {fmt_ms(low)} ms at reference speed"
        )
    verdict: Verdict
    if sla_ms is None:
        verdict, message = Verdict.INFO, f"{op}: no SLA; {figures}"
    elif n < min_samples:
        verdict = Verdict.INSUFFICIENT
        message = (
            f"{op}: INSUFFICIENT samples for the {layer} SLA of {fmt_ms(sla_ms)} ms: "
            f"n={n} < {min_samples}; {figures}"
        )
    elif decide(low, ci95.high / slowdown, sla_ms) is Verdict.FAIL:
        verdict = Verdict.FAIL
        message = (
            f"{op}: FAIL: the {layer} SLA of {fmt_ms(sla_ms)} ms at p95 is breached: "
            f"p95 {fmt_ms(p95 / slowdown)} ms, {level} lower bound {fmt_ms(low)} ms > "
            f"{fmt_ms(sla_ms)} ms; {figures}"
        )
    else:
        verdict = Verdict.PASS
        headroom = math.inf if p95 <= 0 else sla_ms * slowdown / p95  # as `headroom`
        message = (
            f"{op}: PASS: within the {layer} SLA of {fmt_ms(sla_ms)} ms, "
            f"headroom {headroom:.1f}x; {figures}"
        )
        if p95 / slowdown > sla_ms:
            message += (
                "; inconclusive: p95 is over the SLA but its interval reaches below it "
                "(run more rounds)"
            )
        elif p95 > sla_ms:
            message += "; p95 over the SLA as measured, within it at the reference's speed"
    return SlaCheck(
        op=op,
        layer=layer,
        sla_ms=sla_ms,
        n=n,
        p50_ms=p50,
        p95_ms=p95,
        p99_ms=p99,
        p95_ci=ci95,
        p99_ci=ci99,
        confidence=confidence,
        verdict=verdict,
        message=message,
        slowdown=slowdown,
    )


@dataclass(frozen=True, slots=True)
class GateOutcome:
    """All checks of a run, and whether the run passes."""

    checks: list[SlaCheck]

    @property
    def failures(self) -> list[SlaCheck]:
        return [check for check in self.checks if not check.passed]

    @property
    def passed(self) -> bool:
        return not self.failures

    def summary(self) -> str:
        if self.passed:
            return f"SLA gate PASSED: {len(self.checks)} operations within their SLAs"
        lines = [f"SLA gate FAILED: {len(self.failures)} of {len(self.checks)} operations"]
        lines += [f"  {check.message}" for check in self.failures]
        return "\n".join(lines)


def gate(checks: Iterable[SlaCheck]) -> GateOutcome:
    """Combine checks: the gate fails when any check FAILs or is INSUFFICIENT."""
    return GateOutcome(checks=list(checks))


def _num(value: float | None) -> float | None:
    """JSON-safe: NaN and infinity become None."""
    if value is None or math.isnan(value) or math.isinf(value):
        return None
    return round(value, 6)

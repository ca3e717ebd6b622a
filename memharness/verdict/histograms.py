"""The SLA verdicts of `memharness load`, from HDR histograms: which SLA is broken, by how
much, with what confidence.

An SLA is a limit on one percentile of one operation (DESIGN.md: session 5 ms, STM 50 ms,
LTM 200 ms, a whole turn 300 ms, at p95). The noisy machines this runs on call for a
gate on the confidence interval, not on a single number: an SLA is *broken* only when the
lower bound of the 95 % interval of its percentile is over the limit; a point estimate
over the limit whose interval still reaches under it is *marginal* (reported, and fatal
only under the `point` gate). An SLA with no samples is broken: a gate that passes on no
data gates nothing.

In open-loop mode the turn SLA is checked on the response time measured from each
turn's intended start (`turn@intended`), which includes the time a turn waited behind
slower ones; with serialised turns (--serial) in closed loop, on `turn+queue`. Layer SLAs
stay on the layers' own timings, since layers are not queued separately.

**Errors count as infinitely slow.** An SLA "p95 < 50 ms" promises that 95 % of the
calls are *answered* within 50 ms; a call that raised was not answered at all. So a
failed call is ranked above every success: the percentile is read over successes and
failures together, and when it falls among the failures its value is infinite and the
SLA is broken. In practice a layer whose error rate is over 5 % breaks its p95 SLA
whatever its successes' latency (over 1 % for a p99 SLA), and a lower error rate moves
the percentile up the successes' tail (2 % errors: p95 is the successes' p96.9).
The confidence interval uses the same ranks, so a rate near 5 % on few calls is
*marginal*, not broken. The alternative, a separate error-rate threshold, needs a
second number per layer that nobody would know how to pick; and timing a failure as
the time it took to raise would reward a dead server that refuses fast.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from memharness.verdict.intervals import Verdict, decide, order_statistic_ranks
from memharness.verdict.limits import DEFAULT_SLAS, Sla

#: Names of the operations the load test records beside the layers and "turn".
TURN_INTENDED = "turn@intended"  # open loop: from the intended start to the end
QUEUE = "queue"  # --serial: waiting for the process's one turn at a time
QUEUE_INTENDED = "queue@intended"  # open loop: from the intended start to the actual start
TURN_QUEUED = "turn+queue"  # --serial: from ready to the end
Gate = Literal["ci", "point"]
Status = Literal["ok", "marginal", "broken", "no data"]


class Histogram(Protocol):
    """What a verdict reads of an HDR histogram (`hdrh.histogram.HdrHistogram`)."""

    def get_total_count(self) -> int: ...

    def get_value_at_percentile(self, percentile: float) -> float: ...


class Histograms(Protocol):
    """Histograms by operation name (`loadtests.hdr.OpHistograms`)."""

    def __contains__(self, op: str) -> bool: ...

    def histogram(self, op: str) -> Histogram: ...


def quantile_ci(hist: Histogram, q: float, z: float = 1.96) -> tuple[float, float] | None:
    """Distribution-free confidence interval of the q-quantile, in the histogram's unit
    (`intervals.order_statistic_ranks`); None when there are too few samples to bound it."""
    n = hist.get_total_count()
    ranks = order_statistic_ranks(n, q, z)
    if ranks is None:
        return None
    return (
        float(hist.get_value_at_percentile(100.0 * ranks[0] / n)),
        float(hist.get_value_at_percentile(100.0 * ranks[1] / n)),
    )


@dataclass(frozen=True, slots=True)
class SlaVerdict:
    """The check of one SLA: the operation measured, its percentile, and the status."""

    sla: Sla
    measured_op: str
    status: Status
    count: int
    value_ms: float
    ci_ms: tuple[float, float] | None
    #: Failed calls of the measured operation; `count` holds successes and failures.
    errors: int = 0

    @property
    def message(self) -> str:
        measured = f" (measured as {self.measured_op})" if self.measured_op != self.sla.op else ""
        if self.status == "no data":
            return f"SLA {self.sla}{measured}: no samples"
        ci = (
            f", 95% CI {_ms(self.ci_ms[0])}-{_ms(self.ci_ms[1])} ms"
            if self.ci_ms
            else ", too few samples for a CI"
        )
        errors = (
            f", {self.errors} failed ({100.0 * self.errors / self.count:.2f}%)"
            if self.errors
            else ""
        )
        value = "a failed call" if math.isinf(self.value_ms) else f"{self.value_ms:.3f} ms"
        figures = f"p{self.sla.percentile:g} = {value} (n={self.count}{errors}{ci})"
        word = {"ok": "met", "marginal": "marginal", "broken": "BROKEN"}[self.status]
        return f"SLA {self.sla}{measured} {word}: {figures}"

    def as_dict(self) -> dict[str, object]:
        return {
            "sla": str(self.sla),
            "op": self.sla.op,
            "percentile": self.sla.percentile,
            "limit_ms": self.sla.limit_ms,
            "measured_op": self.measured_op,
            "status": self.status,
            "count": self.count,
            "value_ms": self.value_ms if math.isfinite(self.value_ms) else None,
            "value_is_failure": math.isinf(self.value_ms),
            "ci_ms": [_json_ms(v) for v in self.ci_ms] if self.ci_ms else None,
            "errors": self.errors,
            "message": self.message,
        }


def check_slas(
    hists: Histograms,
    slas: Sequence[Sla] = DEFAULT_SLAS,
    *,
    measure_as: Mapping[str, str] | None = None,
    errors: Mapping[str, int] | None = None,
) -> list[SlaVerdict]:
    """One verdict per SLA; `measure_as` judges an SLA's op on another histogram.

    Open loop passes {"turn": "turn@intended"}: the turn SLA is about what a caller
    arriving on schedule waits, not about the service time alone. `errors` holds the
    failed calls per operation (not in `hists`): each counts as infinitely slow.
    """
    rename = measure_as or {}
    fails = errors or {}
    return [
        _verdict(sla, op, hists, fails.get(op, 0))
        for sla, op in ((sla, rename.get(sla.op, sla.op)) for sla in slas)
    ]


def failed(verdicts: Sequence[SlaVerdict], *, gate: Gate = "ci") -> list[SlaVerdict]:
    """The verdicts that fail the gate: broken and no data; marginal too under `point`."""
    fatal: set[str] = {"broken", "no data"} | ({"marginal"} if gate == "point" else set())
    return [verdict for verdict in verdicts if verdict.status in fatal]


def _verdict(sla: Sla, op: str, hists: Histograms, errors: int = 0) -> SlaVerdict:
    hist = hists.histogram(op) if op in hists else None
    ok = hist.get_total_count() if hist is not None else 0
    n = ok + errors
    if n == 0:
        return SlaVerdict(sla, op, "no data", 0, math.nan, None)
    q = sla.percentile / 100.0

    def at_rank(rank: int) -> float:
        """The rank-th smallest call in ms (1-based); failures rank above every success."""
        if rank > ok or hist is None:
            return math.inf
        return hist.get_value_at_percentile(100.0 * rank / ok) / 1000.0

    if errors == 0:
        assert hist is not None
        value_ms = hist.get_value_at_percentile(sla.percentile) / 1000.0
        ci_us = quantile_ci(hist, q)
        ci_ms = (ci_us[0] / 1000.0, ci_us[1] / 1000.0) if ci_us else None
    else:
        value_ms = at_rank(max(1, math.ceil(q * n)))
        ranks = order_statistic_ranks(n, q)
        ci_ms = (at_rank(ranks[0]), at_rank(ranks[1])) if ranks else None
    if value_ms <= sla.limit_ms:
        status: Status = "ok"
    elif ci_ms is None or decide(ci_ms[0], ci_ms[1], sla.limit_ms) is Verdict.FAIL:
        # Without an interval the point estimate is all there is; it is over the limit.
        status = "broken"
    else:
        status = "marginal"
    return SlaVerdict(sla, op, status, n, value_ms, ci_ms, errors)


def _ms(value: float) -> str:
    return "inf" if math.isinf(value) else f"{value:.3f}"


def _json_ms(value: float) -> float | None:
    return value if math.isfinite(value) else None

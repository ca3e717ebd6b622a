"""SLA verdicts from HDR histograms: which SLA is broken, by how much, with what confidence.

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
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from loadtests.hdr import OpHistograms, quantile_ci

__all__ = [
    "DEFAULT_SLAS",
    "QUEUE",
    "TURN_INTENDED",
    "TURN_QUEUED",
    "Sla",
    "SlaVerdict",
    "check_slas",
    "failed",
    "parse_slas",
]

#: Names of the operations the load test records beside the layers and "turn".
TURN_INTENDED = "turn@intended"  # open loop: from the intended start to the end
QUEUE = "queue"  # --serial: waiting for the process's one turn at a time
TURN_QUEUED = "turn+queue"  # --serial: from ready to the end
Gate = Literal["ci", "point"]
Status = Literal["ok", "marginal", "broken", "no data"]


@dataclass(frozen=True, slots=True)
class Sla:
    """A limit in milliseconds on one percentile of one operation."""

    op: str
    limit_ms: float
    percentile: float = 95.0

    def __str__(self) -> str:
        return f"{self.op} p{self.percentile:g} < {self.limit_ms:g} ms"


DEFAULT_SLAS: tuple[Sla, ...] = (
    Sla("session", 5.0),
    Sla("stm", 50.0),
    Sla("ltm", 200.0),
    Sla("turn", 300.0),
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

    @property
    def message(self) -> str:
        measured = f" (measured as {self.measured_op})" if self.measured_op != self.sla.op else ""
        if self.status == "no data":
            return f"SLA {self.sla}{measured}: no samples"
        ci = (
            f", 95% CI {self.ci_ms[0]:.3f}-{self.ci_ms[1]:.3f} ms"
            if self.ci_ms
            else ", too few samples for a CI"
        )
        figures = f"p{self.sla.percentile:g} = {self.value_ms:.3f} ms (n={self.count}{ci})"
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
            "value_ms": None if math.isnan(self.value_ms) else self.value_ms,
            "ci_ms": list(self.ci_ms) if self.ci_ms else None,
            "message": self.message,
        }


def parse_slas(text: str) -> tuple[Sla, ...]:
    """SLAs from "op=ms[@pNN],...", e.g. "session=5,stm=50,turn=300@p99"."""
    slas = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        op, sep, rest = part.partition("=")
        limit, _, pct = rest.partition("@p")
        try:
            if not sep or not op.strip():
                raise ValueError
            sla = Sla(op.strip(), float(limit), float(pct) if pct else 95.0)
        except ValueError:
            raise ValueError(f"SLA {part!r}: expected op=milliseconds[@pNN]") from None
        if not (sla.limit_ms > 0 and 0 < sla.percentile < 100):
            raise ValueError(f"SLA {part!r}: limit must be > 0 and percentile in (0, 100)")
        slas.append(sla)
    return tuple(slas)


def check_slas(
    hists: OpHistograms,
    slas: Sequence[Sla] = DEFAULT_SLAS,
    *,
    measure_as: Mapping[str, str] | None = None,
) -> list[SlaVerdict]:
    """One verdict per SLA; `measure_as` judges an SLA's op on another histogram.

    Open loop passes {"turn": "turn@intended"}: the turn SLA is about what a caller
    arriving on schedule waits, not about the service time alone.
    """
    rename = measure_as or {}
    return [_verdict(sla, rename.get(sla.op, sla.op), hists) for sla in slas]


def failed(verdicts: Sequence[SlaVerdict], *, gate: Gate = "ci") -> list[SlaVerdict]:
    """The verdicts that fail the gate: broken and no data; marginal too under `point`."""
    fatal: set[str] = {"broken", "no data"} | ({"marginal"} if gate == "point" else set())
    return [verdict for verdict in verdicts if verdict.status in fatal]


def _verdict(sla: Sla, op: str, hists: OpHistograms) -> SlaVerdict:
    if op not in hists or hists.histogram(op).get_total_count() == 0:
        return SlaVerdict(sla, op, "no data", 0, math.nan, None)
    hist = hists.histogram(op)
    value_ms = hist.get_value_at_percentile(sla.percentile) / 1000.0
    ci_us = quantile_ci(hist, sla.percentile / 100.0)
    ci_ms = (ci_us[0] / 1000.0, ci_us[1] / 1000.0) if ci_us else None
    if value_ms <= sla.limit_ms:
        status: Status = "ok"
    elif ci_ms is None or ci_ms[0] > sla.limit_ms:
        # Without an interval the point estimate is all there is; it is over the limit.
        status = "broken"
    else:
        status = "marginal"
    return SlaVerdict(sla, op, status, hist.get_total_count(), value_ms, ci_ms)

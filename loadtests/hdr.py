"""HDR histograms per operation: sub-millisecond latency that survives distribution.

Locust's own statistics round every response time under 100 ms to a whole millisecond,
which hides exactly the range the session SLA (5 ms) lives in. Each process keeps one
HDR histogram per operation name, in microseconds with 3 significant digits (a value is
known to within 0.1 %), from 1 us to 1 h. A worker sends what it recorded since its last
report as `HdrHistogram.encode()` text and starts afresh; the master adds the decoded
deltas into its own histograms, so the master's histograms are the union of all samples.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass

from hdrh.histogram import HdrHistogram

from memharness.verdict.histograms import quantile_ci

__all__ = [
    "HIGHEST_US",
    "LOWEST_US",
    "SIG_FIGS",
    "OpHistograms",
    "OpSummary",
    "new_histogram",
]

LOWEST_US = 1
HIGHEST_US = 3_600_000_000  # one hour: anything slower is clamped, and still counted
SIG_FIGS = 3


def new_histogram() -> HdrHistogram:
    """An empty histogram with the layout every process must share to merge."""
    return HdrHistogram(LOWEST_US, HIGHEST_US, SIG_FIGS)


@dataclass(frozen=True, slots=True)
class OpSummary:
    """Latency of one operation from its HDR histogram, in milliseconds.

    `p95_ci_ms` is a distribution-free 95 % confidence interval of the p95 (the order
    statistics whose ranks bracket n*0.95 by 1.96 binomial standard deviations); None when
    there are too few samples to bound it above.
    """

    op: str
    count: int
    min_ms: float
    mean_ms: float
    p50_ms: float
    p90_ms: float
    p95_ms: float
    p99_ms: float
    p999_ms: float
    max_ms: float
    p95_ci_ms: tuple[float, float] | None

    def as_dict(self) -> dict[str, object]:
        data = asdict(self)
        data["p95_ci_ms"] = list(self.p95_ci_ms) if self.p95_ci_ms else None
        return data


class OpHistograms:
    """One HDR histogram per operation name, recorded in microseconds."""

    def __init__(self) -> None:
        self._hists: dict[str, HdrHistogram] = {}

    def __contains__(self, op: str) -> bool:
        return op in self._hists

    @property
    def ops(self) -> list[str]:
        return list(self._hists)

    def histogram(self, op: str) -> HdrHistogram:
        hist = self._hists.get(op)
        if hist is None:
            hist = self._hists[op] = new_histogram()
        return hist

    def record_ms(self, op: str, ms: float) -> None:
        """Record one latency given in (fractional) milliseconds."""
        us = round(ms * 1000.0) if math.isfinite(ms) else HIGHEST_US
        self.histogram(op).record_value(min(max(us, LOWEST_US), HIGHEST_US))

    def total_count(self) -> int:
        return sum(hist.get_total_count() for hist in self._hists.values())

    def reset(self) -> None:
        self._hists.clear()

    def encode(self) -> dict[str, str]:
        """Every non-empty histogram as compressed base64 text (what a worker sends)."""
        return {
            op: hist.encode().decode("ascii")
            for op, hist in self._hists.items()
            if hist.get_total_count()
        }

    def take_encoded(self) -> dict[str, str]:
        """`encode`, then start afresh: the delta since the last report."""
        encoded = self.encode()
        self.reset()
        return encoded

    def merge_encoded(self, encoded: Mapping[str, str | bytes]) -> None:
        """Add histograms produced by `encode` in this or another process."""
        for op, text in encoded.items():
            self.histogram(op).add(HdrHistogram.decode(text))

    def merge(self, other: OpHistograms) -> None:
        for op in other.ops:
            self.histogram(op).add(other.histogram(op))

    def summary(self, op: str) -> OpSummary:
        hist = self._hists.get(op) or new_histogram()
        count = hist.get_total_count()

        def ms(value_us: float) -> float:
            return value_us / 1000.0

        if count == 0:
            nan = math.nan
            return OpSummary(op, 0, nan, nan, nan, nan, nan, nan, nan, nan, None)
        return OpSummary(
            op=op,
            count=count,
            min_ms=ms(hist.get_min_value()),
            mean_ms=ms(hist.get_mean_value()),
            p50_ms=ms(hist.get_value_at_percentile(50)),
            p90_ms=ms(hist.get_value_at_percentile(90)),
            p95_ms=ms(hist.get_value_at_percentile(95)),
            p99_ms=ms(hist.get_value_at_percentile(99)),
            p999_ms=ms(hist.get_value_at_percentile(99.9)),
            max_ms=ms(hist.get_max_value()),
            p95_ci_ms=_ms_pair(quantile_ci(hist, 0.95)),
        )

    def summaries(self, ops: Iterable[str] | None = None) -> list[OpSummary]:
        return [self.summary(op) for op in (self.ops if ops is None else ops)]


def _ms_pair(pair: tuple[float, float] | None) -> tuple[float, float] | None:
    return (pair[0] / 1000.0, pair[1] / 1000.0) if pair else None

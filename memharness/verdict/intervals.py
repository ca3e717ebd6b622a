"""Percentiles, confidence intervals, and the rule that turns an interval into a verdict.

Pure functions of the samples. Three estimators, one per gate's data:

- Order statistics (`percentiles`, numpy's "higher" method: always an observed sample,
  never interpolated below it) with a seeded percentile bootstrap (`bootstrap_cis`), for
  raw per-call timings (the SLA gate of `memharness bench`).
- Distribution-free ranks (`order_statistic_ranks`): the order statistics at ranks
  n*q -/+ z*sqrt(n*q*(1-q)) bracket the true q-quantile with ~95 % confidence (z = 1.96)
  whatever the distribution; for HDR histograms (`memharness load`).
- Harrell–Davis quantiles (`hd_quantiles`): a Beta-weighted mean of all order statistics
  (`scipy.stats.mstats.hdquantiles`), smoother and less variable than one order
  statistic, for the A/B gate's ratios. The weights depend only on n and p, so
  `hd_weights` computes them once and a bootstrap of equal-sized resamples is one sort
  and one matrix product (proven equal to scipy's in the tests).

`decide` is the rule of every gate: a figure is over its limit only when the whole
interval is, under it only when the whole interval is, and otherwise unproven.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache
from typing import Final

import numpy as np
from scipy.stats import beta  # type: ignore[import-untyped]

#: The SLA gate's bootstrap: resamples, two-sided confidence, seed.
RESAMPLES = 2000
CONFIDENCE = 0.95
SEED = 20_260_101
PERCENTILE_METHOD: Final = "higher"
#: Bound on the size of one bootstrap block (resamples x samples), to cap memory.
_BLOCK_ELEMENTS = 2_000_000


class Verdict(StrEnum):
    PASS = "PASS"  # within the limit (the A/B gate: the whole interval is under 1 + T)
    FAIL = "FAIL"  # the whole interval is over the limit
    INCONCLUSIVE = "INCONCLUSIVE"  # the interval straddles the limit (measure more)
    WARN = "WARN"  # A/B: still inconclusive after the extra rounds: reported, not failed
    NEW = "NEW"  # A/B: the baseline cannot run the operation: not judged
    INSUFFICIENT = "INSUFFICIENT"  # SLA gate: too few samples to see the tail (a failure)
    INFO = "INFO"  # SLA gate: no SLA for this measurement (e.g. the embedding share)


def decide(low: float, high: float, limit: float) -> Verdict:
    """FAIL when the whole interval is over `limit`, PASS when it is under, else
    INCONCLUSIVE (an interval that touches the limit makes no claim)."""
    if low > limit:
        return Verdict.FAIL
    if high < limit:
        return Verdict.PASS
    return Verdict.INCONCLUSIVE


@dataclass(frozen=True, slots=True)
class Interval:
    """A two-sided confidence interval, in milliseconds."""

    low: float
    high: float

    def __str__(self) -> str:
        return f"[{fmt_ms(self.low)}, {fmt_ms(self.high)}]"


_NAN_INTERVAL = Interval(math.nan, math.nan)


def percentiles(samples: Sequence[float] | np.ndarray, qs: Sequence[float]) -> list[float]:
    """The `qs` percentiles (0-100) of the samples, as observed order statistics."""
    data = np.asarray(samples, dtype=np.float64)
    if data.size == 0:
        return [math.nan for _ in qs]
    values = np.percentile(data, list(qs), method=PERCENTILE_METHOD)
    return [float(v) for v in np.atleast_1d(values)]


def bootstrap_cis(
    samples: Sequence[float] | np.ndarray,
    qs: Sequence[float],
    *,
    resamples: int = RESAMPLES,
    confidence: float = CONFIDENCE,
    seed: int = SEED,
) -> list[Interval]:
    """Percentile-bootstrap confidence intervals of the `qs` percentiles, one per q.

    Seeded: the same samples give the same intervals. Resamples are drawn in blocks so
    memory stays bounded for large sample counts.
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, got {resamples}")
    data = np.asarray(samples, dtype=np.float64)
    n = data.size
    if n == 0:
        return [_NAN_INTERVAL for _ in qs]
    rng = np.random.default_rng(seed)
    estimates = np.empty((len(qs), resamples))
    block = max(1, _BLOCK_ELEMENTS // n)
    for start in range(0, resamples, block):
        rows = min(block, resamples - start)
        drawn = data[rng.integers(0, n, size=(rows, n))]
        estimates[:, start : start + rows] = np.percentile(
            drawn, list(qs), axis=1, method=PERCENTILE_METHOD
        )
    alpha = (1.0 - confidence) / 2.0
    bounds = np.quantile(estimates, [alpha, 1.0 - alpha], axis=1)
    return [Interval(float(bounds[0, i]), float(bounds[1, i])) for i in range(len(qs))]


def order_statistic_ranks(n: int, q: float, z: float = 1.96) -> tuple[int, int] | None:
    """The 1-based ranks of the order statistics that bracket the q-quantile of n samples
    (n*q -/+ z binomial standard deviations); None when a rank falls outside the sample,
    i.e. there are too few samples to bound the quantile."""
    spread = z * math.sqrt(n * q * (1.0 - q))
    low_rank, high_rank = math.floor(n * q - spread), math.ceil(n * q + spread)
    if low_rank < 1 or high_rank > n:
        return None
    return low_rank, high_rank


@lru_cache(maxsize=256)
def hd_weights(n: int, p: float) -> np.ndarray:
    """The Harrell–Davis weights of the n order statistics for quantile p (0 < p < 1)."""
    if n < 1:
        raise ValueError(f"need at least one sample, got n={n}")
    if not 0.0 < p < 1.0:
        raise ValueError(f"p must be in (0, 1), got {p}")
    cdf = beta.cdf(np.arange(n + 1) / n, (n + 1) * p, (n + 1) * (1 - p))
    weights = np.diff(cdf)
    weights.flags.writeable = False
    return weights


def hd_quantiles(samples: np.ndarray, probs: Sequence[float]) -> np.ndarray:
    """Harrell–Davis quantiles along the last axis: shape `samples.shape[:-1] + (len(probs),)`."""
    data = np.sort(np.asarray(samples, dtype=np.float64), axis=-1)
    n = data.shape[-1]
    weights = np.stack([hd_weights(n, float(p)) for p in probs], axis=1)  # (n, probs)
    result: np.ndarray = data @ weights
    return result


def pooled(rounds: Sequence[np.ndarray]) -> np.ndarray:
    return np.concatenate([np.asarray(r, dtype=np.float64) for r in rounds])


def fmt_ms(value: float) -> str:
    """Milliseconds for a message: 3 decimals under 100, 1 above; "nan" for no figure."""
    if math.isnan(value):
        return "nan"
    return f"{value:.3f}" if value < 100 else f"{value:.1f}"

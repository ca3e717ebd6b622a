"""The A/B gate's statistics: a paired bootstrap over rounds of the ratio of Harrell–Davis
quantiles (`intervals.hd_quantiles`), the decision rule (`intervals.decide` against 1 + T),
and a label-swap false-alarm estimate. Pure functions of the samples.

Samples come as one array per round per arm (`rounds[r]` = the timings of one operation
in round r's block of that arm, milliseconds). Round r of the baseline and round r of the
candidate ran back to back on the same machine, so they share that moment's load: the
bootstrap resamples *round indices* and applies the same indices to both arms, which
keeps that pairing (a busy minute slows both arms of its rounds, and the ratio cancels
most of it).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from memharness.verdict.intervals import Verdict, decide, hd_quantiles, pooled

RESAMPLES = 5000
FAMILY_ALPHA = 0.05
SEED = 20_260_212
SWAPS = 1000


def paired_bootstrap(
    base: Sequence[np.ndarray],
    cand: Sequence[np.ndarray],
    probs: Sequence[float],
    *,
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> np.ndarray:
    """log(candidate HD quantile / baseline HD quantile) for `resamples` resamples of the
    rounds (the same round indices for both arms): shape (resamples, len(probs))."""
    if len(base) != len(cand) or not base:
        raise ValueError(f"need the same number of rounds per arm, got {len(base)}, {len(cand)}")
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(base), size=(resamples, len(base)))
    return np.log(_resampled(cand, picks, probs)) - np.log(_resampled(base, picks, probs))


def _resampled(
    rounds: Sequence[np.ndarray], picks: np.ndarray, probs: Sequence[float]
) -> np.ndarray:
    sizes = {len(r) for r in rounds}
    if len(sizes) == 1:
        # Every round the same size: one (rounds, k) matrix; a resample is a row gather.
        matrix = np.stack([np.asarray(r, dtype=np.float64) for r in rounds])
        drawn = matrix[picks].reshape(picks.shape[0], -1)
        return hd_quantiles(drawn, probs)
    return np.stack([hd_quantiles(pooled([rounds[i] for i in row]), probs) for row in picks])


@dataclass(frozen=True, slots=True)
class Comparison:
    """One operation at one quantile: both arms' HD estimates, the ratio, its interval."""

    op: str
    quantile: float  # 0.5, 0.95
    base_ms: float
    cand_ms: float
    ratio: float  # cand / base
    low: float  # the interval of the ratio
    high: float
    threshold: float  # T: FAIL when low > 1 + T
    confidence: float  # of the two-sided interval, when both bounds share a level
    verdict: Verdict
    #: One-sided level of `high` (PASS when under 1 + T); of `low`: 1 - (1 - confidence) / 2.
    upper_confidence: float | None = None

    @property
    def label(self) -> str:
        return f"p{round(self.quantile * 100)}"


def compare(
    op: str,
    base: Sequence[np.ndarray],
    cand: Sequence[np.ndarray],
    thresholds: dict[float, float],
    *,
    comparisons: int,
    pass_comparisons: int | None = None,
    family_alpha: float = FAMILY_ALPHA,
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> list[Comparison]:
    """Compare one operation at each quantile of `thresholds` ({p: T}).

    The lower bound (FAIL when over 1 + T) is Bonferroni over `comparisons` (operations x
    quantiles x looks): the `family_alpha / comparisons` quantile of the bootstrap
    distribution, so the chance that any operation FAILs while truly within its threshold
    is at most `family_alpha`. The upper bound (PASS when under 1 + T) is the
    `family_alpha / pass_comparisons` quantile from the top (default: `comparisons`, a
    (1 - 2 alpha/m) two-sided interval). The gate passes only when every gated operation
    PASSes: an intersection-union test (Berger 1982), whose level is that of each
    operation's own test, so the upper bound needs no correction over operations, only
    over the looks (`pass_comparisons` = looks).
    """
    probs = sorted(thresholds)
    alpha = family_alpha / comparisons
    upper_alpha = family_alpha / (pass_comparisons or comparisons)
    boot = paired_bootstrap(base, cand, probs, resamples=resamples, seed=seed)
    lows = np.exp(np.quantile(boot, alpha, axis=0))
    highs = np.exp(np.quantile(boot, 1.0 - upper_alpha, axis=0))
    base_q = hd_quantiles(pooled(base), probs)
    cand_q = hd_quantiles(pooled(cand), probs)
    out = []
    for i, p in enumerate(probs):
        ratio = float(cand_q[i] / base_q[i])
        out.append(
            Comparison(
                op=op,
                quantile=p,
                base_ms=float(base_q[i]),
                cand_ms=float(cand_q[i]),
                ratio=ratio,
                low=float(lows[i]),
                high=float(highs[i]),
                threshold=thresholds[p],
                confidence=1.0 - 2.0 * alpha,
                verdict=decide(float(lows[i]), float(highs[i]), 1.0 + thresholds[p]),
                upper_confidence=None if pass_comparisons is None else 1.0 - upper_alpha,
            )
        )
    return out


#: The quantile whose interval must be under 1 + T for an operation to PASS. The others
#: (p95) FAIL an operation when their whole interval is over 1 + T, and are reported
#: otherwise: on a shared machine their intervals span +-20-50 %, so requiring them to be
#: decided would leave almost every run undecided (WARN) without failing more slowdowns.
PASS_QUANTILE = 0.5


def op_verdict(comparisons: Sequence[Comparison], *, final: bool) -> Verdict:
    """An operation's verdict: FAIL if any quantile fails; PASS when the p50 comparison
    PASSes; else inconclusive (WARN when `final`)."""
    verdicts = {c.verdict for c in comparisons}
    if Verdict.FAIL in verdicts:
        return Verdict.FAIL
    if all(c.verdict is Verdict.PASS for c in comparisons if c.quantile == PASS_QUANTILE):
        return Verdict.PASS
    return Verdict.WARN if final else Verdict.INCONCLUSIVE


def looks(rounds: int, every: int, extra_rounds: int) -> list[int]:
    """The rounds after which the gate looks at its intervals and stops once every gated
    operation is decided: every `every` rounds up to `rounds`, then `rounds + extra_rounds`
    (the extra look, taken only for a suspected slowdown). Each look spends its own share
    of the family-wise error (Bonferroni over looks: valid whatever the looks' dependence),
    so stopping at the first look where all is decided keeps the 5 % family-wise bound."""
    marks = [*range(every, rounds, every), rounds]
    return marks + ([rounds + extra_rounds] if extra_rounds > 0 else [])


def suspected(comparisons: Sequence[Comparison]) -> bool:
    """A slowdown beyond T is suspected but not proven: an inconclusive comparison whose
    point estimate is over 1 + T, in an operation that does not already FAIL. Only these
    earn the extra rounds: for an inconclusive ratio under 1 + T more rounds could at best
    turn a WARN into a PASS, and a FAIL is already a verdict."""
    if any(c.verdict is Verdict.FAIL for c in comparisons):
        return False
    return any(
        c.verdict is Verdict.INCONCLUSIVE and c.ratio > 1.0 + c.threshold for c in comparisons
    )


def label_swap_false_alarms(
    base: Sequence[np.ndarray],
    cand: Sequence[np.ndarray],
    comparison: Comparison,
    *,
    swaps: int = SWAPS,
    seed: int = SEED,
) -> tuple[float, float]:
    """A free estimate of the rule's false-alarm rate on this run's own noise.

    Swapping the arm labels inside half of the rounds (chosen at random; balanced, so a
    real difference between the arms cancels out instead of leaking into the swaps) gives
    two "arms" with no difference between them but this run's noise. Each swap's ratio is
    judged with the observed interval's lower half-width (in log space: a swap has the
    same noise, so about the same width). Returns the share of swaps that would FAIL, and
    the 95th percentile of the swapped ratios' distance from 1 (max of r and 1/r): how far
    apart two halves of the same noise can look.
    """
    rng = np.random.default_rng(seed)
    p = comparison.quantile
    rounds = len(base)
    half = math.log(comparison.ratio) - math.log(comparison.low)
    limit = math.log(1.0 + comparison.threshold)
    logs = np.empty(swaps)
    for s in range(swaps):
        flip = np.zeros(rounds, dtype=bool)
        flip[rng.choice(rounds, size=rounds // 2, replace=False)] = True
        left = [c if f else b for b, c, f in zip(base, cand, flip, strict=True)]
        right = [b if f else c for b, c, f in zip(base, cand, flip, strict=True)]
        (ql,) = hd_quantiles(pooled(left), (p,))
        (qr,) = hd_quantiles(pooled(right), (p,))
        logs[s] = math.log(qr / ql)
    alarms = float(np.mean(logs - half > limit))
    spread = float(np.exp(np.quantile(np.abs(logs), 0.95)))
    return alarms, spread

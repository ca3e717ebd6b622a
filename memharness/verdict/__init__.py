"""Verdicts on latency: the SLA limits, percentiles, confidence intervals and the rule
that turns an interval into a verdict, for the three gates (docs/latency.md).

- `limits`: the SLAs (one definition: session 5 ms, STM 50 ms, LTM 200 ms, a turn 300 ms,
  at p95), and their parsing from "op=ms[@pNN]".
- `intervals`: order-statistic percentiles, bootstrap and distribution-free intervals,
  Harrell–Davis quantiles and the paired bootstrap over rounds, and `decide`, the one
  rule every gate applies: over a limit only when the whole interval is.
- `samples`: the SLA gate of `memharness bench`, on raw per-call timings.
- `histograms`: the SLA verdicts of `memharness load`, on HDR histograms and error counts.
- `ab`: the A/B gate of `memharness bench --ab`, on the ratio of two arms.
"""

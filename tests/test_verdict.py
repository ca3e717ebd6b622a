"""The verdict module (`memharness/verdict/`): known samples give known intervals and
verdicts, and the boundaries of every gate's rule hold: a lower bound exactly at the
limit is no breach, too few samples are no pass, no samples are a failure."""

from __future__ import annotations

import math

import numpy as np
import pytest

from loadtests.hdr import OpHistograms
from memharness.verdict.histograms import check_slas, failed, quantile_ci
from memharness.verdict.intervals import (
    Verdict,
    bootstrap_cis,
    decide,
    hd_weights,
    order_statistic_ranks,
    percentiles,
)
from memharness.verdict.limits import DEFAULT_SLAS, SLA_MS, Sla
from memharness.verdict.samples import MIN_SAMPLES, check_sla


def _hists(op: str, values_ms: list[float]) -> OpHistograms:
    hists = OpHistograms()
    for ms in values_ms:
        hists.record_ms(op, ms)
    return hists


def test_one_definition_of_the_slas() -> None:
    assert SLA_MS == {"session": 5.0, "stm": 50.0, "ltm": 200.0, "turn": 300.0}
    assert all(sla.percentile == 95.0 for sla in DEFAULT_SLAS)


def test_the_rule_claims_only_what_the_whole_interval_shows() -> None:
    assert decide(5.01, 9.0, 5.0) is Verdict.FAIL
    assert decide(1.0, 4.99, 5.0) is Verdict.PASS
    assert decide(4.0, 6.0, 5.0) is Verdict.INCONCLUSIVE
    assert decide(5.0, 9.0, 5.0) is Verdict.INCONCLUSIVE  # low exactly at the limit
    assert decide(1.0, 5.0, 5.0) is Verdict.INCONCLUSIVE  # high exactly at the limit


def test_known_samples_give_known_percentiles_and_intervals() -> None:
    samples = [float(v) for v in range(1, 101)]  # 1..100 ms
    # Order statistics, never interpolated below an observed sample: rank ceil(99q) + 1.
    assert percentiles(samples, (50, 95, 99)) == [51.0, 96.0, 100.0]
    (constant,) = bootstrap_cis([3.0] * 300, (95,))
    assert (constant.low, constant.high) == (3.0, 3.0)
    (ci,) = bootstrap_cis(samples, (95,))
    assert ci.low <= 95.0 <= ci.high and ci.low >= 85.0 and ci.high <= 100.0
    assert bootstrap_cis(samples, (95,)) == [ci]  # seeded


def test_the_sla_gate_at_its_boundaries() -> None:
    at_limit = check_sla("session.get", [5.0] * MIN_SAMPLES, layer="session", sla_ms=5.0)
    assert at_limit.p95_ci.low == 5.0 and at_limit.verdict is Verdict.PASS
    over = check_sla("session.get", [5.0] * MIN_SAMPLES, layer="session", sla_ms=4.999)
    assert over.verdict is Verdict.FAIL
    few = check_sla("session.get", [0.1] * (MIN_SAMPLES - 1), layer="session", sla_ms=5.0)
    assert few.verdict is Verdict.INSUFFICIENT and not few.passed
    assert "n=199 < 200" in few.message
    # Twice as slow a machine: the same timings judged at the reference's speed.
    slowed = check_sla(
        "stm.add", [80.0] * MIN_SAMPLES, layer="stm", sla_ms=50.0, slowdown=2.0, machine="probe"
    )
    assert slowed.verdict is Verdict.PASS and slowed.headroom == pytest.approx(1.25)
    info = check_sla("embed", [1.0] * 10, layer="turn", sla_ms=None)
    assert info.verdict is Verdict.INFO and info.passed


def test_distribution_free_ranks() -> None:
    # 200 samples, p95: 190 -/+ 1.96 * sqrt(200 * 0.95 * 0.05) = 190 -/+ 6.04.
    assert order_statistic_ranks(200, 0.95) == (183, 197)
    assert order_statistic_ranks(10, 0.95) is None  # 10 samples cannot bound a p95
    hist = _hists("stm", [float(v) for v in range(1, 201)]).histogram("stm")
    assert quantile_ci(hist, 0.95) == pytest.approx((183_000.0, 197_000.0), rel=1e-3)


def test_the_load_verdicts_at_their_boundaries() -> None:
    # p95 (rank 190 of 200) is 60 ms; the interval's lower bound (rank 183) reads 10 ms as
    # the histogram stores it. A limit exactly at that bound: marginal, not broken.
    hists = _hists("stm", [10.0] * 183 + [60.0] * 17)
    (probe,) = check_slas(hists, [Sla("stm", 1.0)])
    assert probe.ci_ms is not None and probe.ci_ms[0] == pytest.approx(10.0, rel=1e-3)
    (verdict,) = check_slas(hists, [Sla("stm", probe.ci_ms[0])])
    assert verdict.value_ms == pytest.approx(60.0, rel=1e-3)
    assert verdict.status == "marginal" and failed([verdict]) == []
    assert failed([verdict], gate="point") == [verdict]
    (just_over,) = check_slas(hists, [Sla("stm", probe.ci_ms[0] * 0.999)])
    assert just_over.status == "broken"
    limit = Sla("stm", 50.0)
    # Over the limit with too few samples for an interval: broken on the point estimate.
    (few,) = check_slas(_hists("stm", [60.0] * 10), [limit])
    assert few.ci_ms is None and few.status == "broken"
    (none,) = check_slas(_hists("ltm", [1.0]), [limit])
    assert none.status == "no data" and failed([none]) == [none]


def test_harrell_davis_weights_are_a_distribution() -> None:
    weights = hd_weights(50, 0.95)
    assert math.isclose(float(np.sum(weights)), 1.0) and bool(np.all(weights >= 0))
    assert int(np.argmax(weights)) in range(45, 50)

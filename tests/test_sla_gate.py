"""The SLA gate of bench/: the statistics of bench/sla.py, and the gate failing on a
deliberately slowed null backend (in process, and end to end through `pytest bench`).

Fast and deterministic: bootstrap intervals are seeded, samples are synthetic or come
from null stores that do nothing but (when slowed) busy-wait a fixed time.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from bench.measure import OpSamples, Recorder, report, time_calls, write_report
from bench.null_backend import build_null_system
from bench.sla import SLA_MS, Verdict, bootstrap_cis, check_sla, gate, percentiles

ROOT = Path(__file__).resolve().parents[1]


def _exponential(n: int, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).exponential(1.0, size=n)


# --------------------------------------------------------------------------- sla.py


def test_bootstrap_interval_brackets_the_estimate_and_the_true_percentile() -> None:
    samples = _exponential(2000)
    (p95,) = percentiles(samples, (95,))
    (ci,) = bootstrap_cis(samples, (95,))
    true_p95 = -math.log(0.05)  # of Exp(1): 2.996
    assert ci.low <= p95 <= ci.high
    assert ci.low <= true_p95 <= ci.high
    assert ci.high - ci.low < 0.6


def test_bootstrap_is_seeded_and_narrows_with_more_samples() -> None:
    few, many = _exponential(200), _exponential(5000)
    assert bootstrap_cis(few, (95, 99)) == bootstrap_cis(few, (95, 99))
    (ci_few,) = bootstrap_cis(few, (95,))
    (ci_many,) = bootstrap_cis(many, (95,))
    assert ci_many.high - ci_many.low < ci_few.high - ci_few.low


def test_bootstrap_of_a_constant_is_that_constant() -> None:
    (ci,) = bootstrap_cis([3.0] * 300, (99,))
    assert (ci.low, ci.high) == (3.0, 3.0)


def test_fewer_samples_than_the_minimum_is_insufficient_and_fails() -> None:
    check = check_sla("session.get", [0.1] * 199, layer="session", sla_ms=5.0)
    assert check.verdict is Verdict.INSUFFICIENT
    assert not check.passed
    assert "n=199 < 200" in check.message
    assert not gate([check]).passed


def test_fails_only_when_the_lower_bound_is_over_the_sla() -> None:
    # p95 is 6 ms (over 5) in both; with 14 slow calls in 200 a resample often has
    # fewer than 10 and a p95 of 1 ms, so the interval reaches below the SLA: PASS.
    straddling = [1.0] * 186 + [6.0] * 14
    check = check_sla("session.get", straddling, layer="session", sla_ms=5.0)
    assert check.p95_ms == 6.0
    assert check.p95_ci.low <= 5.0 < check.p95_ci.high
    assert check.verdict is Verdict.PASS
    assert "inconclusive" in check.message
    # With 30 slow calls every resample's p95 is 6 ms: the lower bound is over: FAIL.
    breaching = [1.0] * 170 + [6.0] * 30
    check = check_sla("session.get", breaching, layer="session", sla_ms=5.0)
    assert check.verdict is Verdict.FAIL
    assert check.p95_ci.low == 6.0
    for figure in ("p95 6.000 ms", "lower bound 6.000 ms", "session SLA of 5.000 ms", "n=200"):
        assert figure in check.message


def test_headroom_and_no_sla() -> None:
    check = check_sla("ltm.get", [2.0] * 250, layer="ltm", sla_ms=200.0)
    assert check.verdict is Verdict.PASS
    assert check.headroom == pytest.approx(100.0)
    info = check_sla("turn.embed", [2.0] * 10, layer="embed", sla_ms=None)
    assert info.verdict is Verdict.INFO and info.passed and info.headroom is None


# --------------------------------------------------------------------------- null backend


def test_the_null_backend_runs_every_measured_operation() -> None:
    """The null stores keep up with the layer interfaces (an ABC change breaks this)."""
    system = build_null_system()
    system.session.create(user_id="u1", session_id="s1")
    assert system.session.get(user_id="u1", session_id="s1") is not None
    assert system.session.append_message(user_id="u1", session_id="s1", message_id="m1") == ["m1"]
    added = system.stm.add(user_id="u1", session_id="s1", text="Please book a seat", force=True)
    assert added.accepted
    assert system.stm.query(user_id="u1", session_id="s1", text="seat") == []
    fact = system.ltm.upsert(
        user_id="u1", category="preference", key="seat", value={}, text="aisle seat"
    )
    assert fact.version == 1
    assert system.ltm.get(user_id="u1", category="preference", key="seat") is None
    assert system.ltm.query(user_id="u1", text="seat") == []
    result = system.turn(user_id="u1", session_id="s1", text="I always prefer the aisle seat")
    assert set(result.timings_ms) >= {"session", "stm", "ltm", "embed", "turn"}


def _session_samples(delay_ms: float) -> Recorder:
    system = build_null_system(session_delay_ms=delay_ms)
    recorder = Recorder()
    samples = time_calls(
        system.session.get,
        rounds=200,
        warmup=5,
        setup=lambda: ((), {"user_id": "u1", "session_id": "s1"}),
    )
    recorder.add(OpSamples("session.get", "session", "null", samples))
    return recorder


def test_a_healthy_null_backend_passes() -> None:
    outcome = _session_samples(0.0).evaluate()
    assert outcome.passed, outcome.summary()
    (check,) = outcome.checks
    assert check.p95_ms < 1.0  # the harness's own cost of a session call


def test_a_slowed_null_backend_fails_the_gate_naming_the_session_sla(tmp_path: Path) -> None:
    recorder = _session_samples(6.0)
    outcome = recorder.evaluate()
    assert not outcome.passed
    (check,) = outcome.failures
    assert check.verdict is Verdict.FAIL
    assert check.p95_ci.low >= 6.0
    assert f"session SLA of {SLA_MS['session']:.3f} ms" in check.message
    assert "session" in outcome.summary() and "FAILED" in outcome.summary()

    path = write_report(tmp_path / "bench.json", report(outcome, recorder, run={}, gate_params={}))
    (row,) = json.loads(path.read_text())["ops"]
    assert row["verdict"] == "FAIL" and row["sla_ms"] == 5.0 and row["n"] == 200
    assert row["headroom"] < 1.0 and row["p95_ci_ms"][0] >= 6.0


def test_pytest_bench_exits_non_zero_on_a_breach(tmp_path: Path) -> None:
    """End to end: the gate hook in bench/conftest.py fails the run and writes the report."""
    command = [
        *(sys.executable, "-m", "pytest", "bench", "-p", "no:cacheprovider", "-q"),
        *("-k", "test_session_get and null", "--bench-rounds", "200"),
        *("--bench-null-delay-ms", "6", "--benchmark-disable-gc"),
        *("--bench-report-dir", str(tmp_path), "--bench-run-id", "slowed"),
    ]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "SLA gate FAILED" in done.stdout
    assert "session SLA of 5.000 ms" in done.stdout
    document = json.loads((tmp_path / "slowed" / "bench.json").read_text())
    assert document["gate"]["passed"] is False
    assert [row["name"] for row in document["ops"]] == ["session.get [null]"]


def test_memharness_bench_on_a_breach_says_the_sla_broke_not_that_suites_failed(
    tmp_path: Path,
) -> None:
    """Every test passed and an SLA was breached: exit 1, the verdict, no claim that the
    run measured only part of what it should."""
    command = [
        *(sys.executable, "-m", "memharness.cli", "bench", "--rounds", "200"),
        *("--report-dir", str(tmp_path), "--run-id", "slowed", "--"),
        *("-k", "test_session_get and null", "--bench-null-delay-ms", "6"),
    ]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "SLA gate FAILED" in done.stdout
    assert "did not all pass" not in done.stderr, done.stderr

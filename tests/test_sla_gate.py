"""The SLA gate of bench/: the statistics of memharness/verdict/, the gate failing on a
deliberately slowed null backend (in process, and end to end through `pytest bench`),
`--strategy` (bench.json names it; a wrong one is a usage error), and the background
operations doing their work each sample (on the in-memory stores).

Fast and deterministic: bootstrap intervals are seeded, samples are synthetic or come
from null stores that do nothing but (when slowed) busy-wait a fixed time.
"""

from __future__ import annotations

import itertools
import json
import math
import random
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from pydantic import SecretStr

from bench.machine import MachineProbe, Reference, load_reference, record, slowdown
from bench.measure import OpSamples, Recorder, report, time_calls, write_report
from bench.null_backend import build_null_system
from memharness.ab.background import EVENT_MEMORIES, SESSION_RECORDS, Background, event_rule
from memharness.cli import main
from memharness.verdict.intervals import Verdict, bootstrap_cis, percentiles
from memharness.verdict.limits import SLA_MS
from memharness.verdict.samples import check_sla, gate
from reference.crypto import generate_key
from reference.factory import build_memory_system
from reference.models import Category
from reference.policy.loading import load_strategy
from reference.settings import Settings
from reference.system import MemorySystem

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


def test_a_slowed_machine_is_judged_at_the_reference_speed() -> None:
    # p95 6 ms, every resample too: over a 5 ms SLA as measured.
    breaching = [1.0] * 170 + [6.0] * 30
    # The probes say the machine ran 1.5x slower than the reference: 4 ms there: PASS.
    check = check_sla(
        "session.get", breaching, layer="session", sla_ms=5.0, slowdown=1.5, machine="probe"
    )
    assert check.verdict is Verdict.PASS and check.slowdown == 1.5
    assert check.p95_ms == 6.0  # the figures stay as measured
    assert check.headroom == pytest.approx(5.0 * 1.5 / 6.0)
    for figure in ("1.50x slower than the reference (probe)", "p95 4.000 ms", "as measured"):
        assert figure in check.message
    # 1.1x slower is not enough: 5.45 ms at the reference's speed is still over: FAIL.
    check = check_sla("session.get", breaching, layer="session", sla_ms=5.0, slowdown=1.1)
    assert check.verdict is Verdict.FAIL
    assert "lower bound 5.455 ms > 5.000 ms" in check.message
    # A faster machine is not a slowdown below 1: it is judged as measured.
    for bad in (0.9, math.inf, math.nan):
        with pytest.raises(ValueError, match="slowdown"):
            check_sla("session.get", breaching, layer="session", sla_ms=5.0, slowdown=bad)


def test_the_slowdown_is_the_probes_median_over_the_reference_never_below_one() -> None:
    key = {"embedder": "minilm", "versions": {"chromadb": "1"}}
    reference = Reference(key=key, probe_p50_ms=20.0, recorded_at="now", runs=[])
    factor, why = slowdown([30.0, 40.0, 50.0], reference, key)
    assert factor == 2.0 and "probe p50 40.00 ms vs 20.00 ms" in why
    assert slowdown([10.0, 12.0], reference, key)[0] == 1.0  # faster: as measured
    assert slowdown([], reference, key) == (1.0, "no probes")
    factor, why = slowdown([40.0], None, key)
    assert factor == 1.0 and "no machine reference" in why
    other = {"embedder": "minilm", "versions": {"chromadb": "2"}}  # a new library version
    factor, why = slowdown([40.0], reference, other)
    assert factor == 1.0 and "another key" in why


def test_the_recorder_judges_each_operation_by_its_own_probes() -> None:
    key = {"embedder": "hashing"}
    recorder = Recorder(Reference(key=key, probe_p50_ms=10.0, recorded_at="now", runs=[]))
    recorder.machine_key = key
    breaching = [1.0] * 170 + [6.0] * 30
    recorder.add(OpSamples("session.get", "session", "real", breaching, probe_ms=[15.0] * 20))
    recorder.add(OpSamples("session.create", "session", "real", breaching, probe_ms=[10.0] * 20))
    recorder.add(OpSamples("session.get", "session", "null", breaching))
    checks = {c.op: c for c in recorder.evaluate().checks}
    assert checks["session.get"].verdict is Verdict.PASS  # 6 / 1.5 = 4 ms
    assert checks["session.create"].verdict is Verdict.FAIL  # the machine ran at reference
    assert checks["session.get [null]"].verdict is Verdict.FAIL  # no probes: as measured


def test_the_report_says_how_the_machine_ran_against_which_reference() -> None:
    from memharness.bench_report import format_report

    key = {"embedder": "hashing"}
    recorder = Recorder(Reference(key=key, probe_p50_ms=10.0, recorded_at="then", runs=[]))
    recorder.machine_key = key
    recorder.add(OpSamples("session.get", "session", "real", [1.0] * 200, probe_ms=[20.0] * 4))
    document = report(recorder.evaluate(), recorder, run={}, gate_params={})
    assert document["ops"][0]["probe_ms"] == [20.0] * 4 and document["ops"][0]["slowdown"] == 2
    lines = "\n".join(format_report(document))
    assert "machine probe: p50 20.00 ms over 4; reference 10.00 ms (recorded then)" in lines
    assert "2.00x" in lines  # the operation's slowdown, in its row
    recorder.machine_key = {"embedder": "minilm"}  # not the reference's
    document = report(recorder.evaluate(), recorder, run={}, gate_params={})
    assert document["ops"][0]["slowdown"] == 1
    assert "another key" in "\n".join(format_report(document))


def test_a_machine_reference_is_recorded_from_bench_runs_and_read_back(tmp_path: Path) -> None:
    key = {"embedder": "hashing", "versions": {"chromadb": "1"}}
    runs = []
    for i, probes in enumerate(([10.0, 11.0, 30.0], [12.0, 13.0])):
        run = tmp_path / f"run{i}.json"
        run.write_text(json.dumps({"machine_key": key, "ops": [{"probe_ms": probes}]}))
        runs.append(run)
    path = tmp_path / "machine.json"
    recorded = record(runs, path)
    assert recorded.probe_p50_ms == 12.0  # the median of all five probes
    assert load_reference(path) == recorded
    assert load_reference(tmp_path / "none.json") is None
    other = tmp_path / "other.json"
    other.write_text(
        json.dumps({"machine_key": {"embedder": "minilm"}, "ops": [{"probe_ms": [1]}]})
    )
    with pytest.raises(ValueError, match="different keys"):
        record([*runs, other], path)
    path.write_text(json.dumps({"probe_p50_ms": 0, "key": key, "recorded_at": "", "runs": []}))
    with pytest.raises(ValueError, match="must be positive"):
        load_reference(path)


def test_the_machine_probe_repeats_one_fixed_piece_of_work_and_cleans_up(tmp_path: Path) -> None:
    from reference.embedding import HashingEmbedder
    from reference.stm.chroma_client import make_chroma_client

    client = make_chroma_client(None, tmp_path)
    probe = MachineProbe(HashingEmbedder(), client, "bench-probe-test")
    timings = probe.sample(3)
    assert len(timings) == 3 and all(t > 0 for t in timings)
    assert probe.collection.count() == 201  # 200 records and the probe's own, rewritten
    probe.close()
    assert "bench-probe-test" not in [c.name for c in client.list_collections()]


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


def _session_samples(delay_ms: float, clock: Callable[[], float] = time.perf_counter) -> Recorder:
    system = build_null_system(session_delay_ms=delay_ms)
    recorder = Recorder()
    samples = time_calls(
        system.session.get,
        rounds=200,
        warmup=5,
        setup=lambda: ((), {"user_id": "u1", "session_id": "s1"}),
        clock=clock,
    )
    recorder.add(OpSamples("session.get", "session", "null", samples))
    return recorder


def test_a_healthy_null_backend_passes() -> None:
    ticks = itertools.count()
    outcome = _session_samples(0.0, clock=lambda: next(ticks) * 0.0002).evaluate()
    assert outcome.passed, outcome.summary()
    (check,) = outcome.checks
    assert check.n == 200  # the 5 warm-up calls are not samples
    assert check.p95_ms == pytest.approx(0.2)  # each call read as one 0.2 ms tick
    assert check.p95_ci.low == pytest.approx(0.2) and check.verdict is Verdict.PASS


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


# --------------------------------------------------------------------------- strategy


def test_bench_json_names_the_strategy_and_its_fingerprint(tmp_path: Path) -> None:
    """`--bench-strategy` reaches the suites, and bench.json says what ran (contract:
    `strategy` and `strategy_fingerprint` at top level)."""
    command = [
        *(sys.executable, "-m", "pytest", "bench", "-p", "no:cacheprovider", "-q"),
        *("-k", "test_session_get and null", "--bench-rounds", "200"),
        *("--bench-strategy", "keep_all"),
        *("--bench-report-dir", str(tmp_path), "--bench-run-id", "kept"),
    ]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    document = json.loads((tmp_path / "kept" / "bench.json").read_text())
    assert document["strategy"] == "keep_all"
    assert document["strategy_fingerprint"] == load_strategy("keep_all").fingerprint()


def test_bench_measures_hybrid_unless_told(tmp_path: Path) -> None:
    command = [
        *(sys.executable, "-m", "memharness.cli", "bench", "--rounds", "200"),
        *("--report-dir", str(tmp_path), "--run-id", "default", "--"),
        *("-k", "test_session_get and null"),
    ]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "strategy=hybrid" in done.stdout
    document = json.loads((tmp_path / "default" / "bench.json").read_text())
    assert document["strategy"] == "hybrid"
    assert document["strategy_fingerprint"] == load_strategy("hybrid").fingerprint()


def test_an_unknown_strategy_is_named_with_the_choices_and_the_nearest(tmp_path: Path) -> None:
    runner = CliRunner()
    typo = runner.invoke(main, ["bench", "--strategy", "hybird", "--report-dir", str(tmp_path)])
    assert typo.exit_code == 2
    assert "--strategy" in typo.output and "no strategy named 'hybird'" in typo.output
    assert "did you mean 'hybrid'?" in typo.output and "keep_all" in typo.output
    missing = tmp_path / "mine.yaml"
    gone = runner.invoke(main, ["bench", "--strategy", str(missing)])
    assert gone.exit_code == 2 and "--strategy" in gone.output and "mine.yaml" in gone.output
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: broken\ndescription: x\nttl:\n  default_s: -5\n")
    bad = runner.invoke(main, ["bench", "--strategy", str(broken)])
    assert bad.exit_code == 2 and "broken.yaml:4" in bad.output, bad.output
    ab = runner.invoke(main, ["bench", "--ab", "HEAD", "--strategy", "keep_all"])
    assert ab.exit_code == 2 and "A/B gate runs hybrid" in ab.output
    assert not list(tmp_path.glob("bench-*")), "a usage error starts no run"


def test_the_ab_backends_are_named_as_everywhere_else() -> None:
    runner = CliRunner()
    old = runner.invoke(main, ["bench", "--ab", "HEAD", "--backend", "real"])
    assert old.exit_code == 2 and "'embedded'" in old.output and "'null'" in old.output
    alone = runner.invoke(main, ["bench", "--backend", "null"])
    assert alone.exit_code == 2 and "belong to the A/B gate" in alone.output


# --------------------------------------------------------------------------- background


@pytest.fixture
def hybrid_system() -> Iterator[MemorySystem]:
    settings = Settings(
        backend="memory", embedder="hashing", encryption_key=SecretStr(generate_key())
    )
    system = build_memory_system(settings, strategy="hybrid")
    yield system
    system.drop()


def test_every_sweep_sample_expires_one_whole_batch(hybrid_system: MemorySystem) -> None:
    work = Background(hybrid_system)
    batch = work.strategy.sweep_batch_size
    rng = random.Random(1)
    for index in range(3):
        call = work.sweep_setup(rng, index)
        assert hybrid_system.stm.count() == 0  # due records are not live
        stats = call()
        assert stats.by_layer["stm"].expired == batch
        assert hybrid_system.stm.scan_due(now=hybrid_system.clock.now()).records == []


def test_a_consolidation_sample_writes_its_session_as_episodes(
    hybrid_system: MemorySystem,
) -> None:
    work = Background(hybrid_system)
    rng = random.Random(2)
    for index in range(2):
        done = work.consolidation_setup(rng, index)()
        assert len(done.episodes) == SESSION_RECORDS
        assert {e.category for e in done.episodes} == {Category.EPISODE}
        assert hybrid_system.stm.count() == 0  # the ended session left STM
    assert hybrid_system.ltm.count() == 2 * SESSION_RECORDS


def test_an_event_sample_invalidates_the_matching_half(hybrid_system: MemorySystem) -> None:
    work = Background(hybrid_system)
    rule = event_rule(work.strategy)
    assert rule is not None and rule.match_on
    half = EVENT_MEMORIES // 2
    done = work.event_setup(random.Random(3), 0)()
    assert done.event == rule.event
    assert (done.stm_removed, done.ltm_deleted + done.ltm_archived) == (half, half)
    assert hybrid_system.stm.count() == EVENT_MEMORIES - half
    assert hybrid_system.ltm.count() == EVENT_MEMORIES - half


def test_background_operations_need_the_rules_they_exercise() -> None:
    settings = Settings(backend="memory", embedder="hashing")
    settings = settings.model_copy(update={"encryption_key": SecretStr(generate_key())})
    rules = Background(build_memory_system(settings, strategy="hybrid_rules"))
    with pytest.raises(ValueError, match="does not consolidate"):
        rules.consolidation_setup(random.Random(1), 0)
    kept = Background(build_memory_system(settings, strategy="keep_all"))
    with pytest.raises(ValueError, match="no match_on event rule"):
        kept.event_setup(random.Random(1), 0)
    with pytest.raises(ValueError, match="forgetting engine"):
        Background(build_null_system())

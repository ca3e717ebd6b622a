"""Capacity planning: the formulas against known values, the target loader's errors, and
`memharness capacity` / `memharness compare` end to end on tiny synthetic run files."""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from loadtests.hdr import OpHistograms
from loadtests.steps import (
    SteppedSchedule,
    StepRecorder,
    drift,
    interleave,
    parse_rates,
    step_verdicts,
)
from memharness.capacity import (
    allen_cunneen_wait,
    erlang_c,
    fit_usl,
    parse_target,
    response_quantile,
    sqrt_staffing,
    usl_throughput,
)
from memharness.capacity.inputs import find_runs
from memharness.capacity.queueing import SQRT_STAFFING_Q
from memharness.capacity.target import TargetError
from memharness.cli import main
from memharness.load_contract import auto_rates
from memharness.verdict.limits import Sla

EXAMPLE = Path(__file__).resolve().parent.parent / "capacity" / "example-target.yaml"


# ----------------------------------------------------------------------------- USL
def test_usl_fit_recovers_known_coefficients() -> None:
    lam, sigma, kappa = 100.0, 0.05, 0.002
    n = np.array([1, 2, 4, 8, 16, 24, 32, 48, 64], dtype=float)
    noise = 1 + np.random.default_rng(3).normal(0, 0.01, len(n))
    fit = fit_usl(n, usl_throughput(n, lam, sigma, kappa) * noise, bootstrap=100)
    assert fit.lam == pytest.approx(lam, rel=0.05)
    assert fit.sigma == pytest.approx(sigma, abs=0.015)
    assert fit.kappa == pytest.approx(kappa, rel=0.25)
    assert fit.sigma_ci[0] <= sigma <= fit.sigma_ci[1]
    assert fit.kappa_ci[0] <= kappa <= fit.kappa_ci[1]
    # Gunther: N* = floor(sqrt((1 - σ)/κ)), X_max = X(N*), ceiling λ/σ.
    assert fit.n_star == math.floor(math.sqrt((1 - fit.sigma) / fit.kappa))
    assert fit.x_max == pytest.approx(usl_throughput(fit.n_star, fit.lam, fit.sigma, fit.kappa))
    assert fit.ceiling == pytest.approx(fit.lam / fit.sigma)


def test_usl_fit_keeps_coefficients_non_negative() -> None:
    # Superlinear points: an unconstrained fit would want σ < 0.
    n = np.array([1, 2, 4, 8, 16, 32], dtype=float)
    x = 10 * n**1.1
    fit = fit_usl(n, x, bootstrap=20)
    assert fit.sigma >= 0 and fit.kappa >= 0
    assert min(fit.sigma_ci) >= 0 and min(fit.kappa_ci) >= 0


def test_usl_fit_needs_three_points() -> None:
    with pytest.raises(ValueError, match="at least 3"):
        fit_usl([1, 2], [1, 2])


# ----------------------------------------------------------------------------- queues
def test_erlang_c_known_values() -> None:
    assert erlang_c(1, 0.7) == pytest.approx(0.7)  # M/M/1: P(wait) = ρ
    assert erlang_c(2, 1.0) == pytest.approx(1 / 3)  # (a²/2·2/(2−a)) / (1 + a + that)
    # The textbook call-centre case: 10 agents, 8 Erlangs -> 40.9 % of calls wait.
    assert erlang_c(10, 8.0) == pytest.approx(0.4092, abs=5e-4)
    assert erlang_c(5, 6.0) == 1.0  # unstable: everyone waits
    assert erlang_c(500, 450.0) < 1.0  # no overflow at large c


def test_allen_cunneen_reduces_to_exact_single_server_results() -> None:
    # M/M/1 (c_s² = 1): Wq = ρ/(μ − λ) = 1 at λ = 0.5, S = 1.
    assert allen_cunneen_wait(1, 0.5, 1.0, 1.0, 1.0) == pytest.approx(1.0)
    # M/D/1 (c_s² = 0): Pollaczek–Khinchine gives ρ/(2μ(1 − ρ)) = 0.5.
    assert allen_cunneen_wait(1, 0.5, 1.0, 1.0, 0.0) == pytest.approx(0.5)
    assert allen_cunneen_wait(2, 3.0, 1.0, 1.0, 1.0) == math.inf


def test_response_quantile_matches_mm1() -> None:
    # M/M/1 response time is exponential with rate μ − λ: p95 = ln 20 / (μ − λ).
    service = np.random.default_rng(1).exponential(1.0, 200_000)
    p95 = response_quantile(
        0.95, c=1, lam=0.5, occupancy_s=float(service.mean()), latency_s=service, draws=100_000
    )
    assert p95 == pytest.approx(math.log(20) / 0.5, rel=0.05)
    assert response_quantile(0.95, c=1, lam=2.0, occupancy_s=1.0, latency_s=service) == math.inf


def test_square_root_staffing() -> None:
    assert sqrt_staffing(100) == pytest.approx(100 + SQRT_STAFFING_Q * 10)
    # Halfin–Whitt: staffing a + 1.761·√a leaves about a 5 % chance of waiting.
    for a in (50.0, 200.0, 800.0):
        assert 0.03 < erlang_c(math.ceil(sqrt_staffing(a)), a) < 0.065


# ----------------------------------------------------------------------------- target
def test_example_target_loads() -> None:
    target = parse_target(EXAMPLE.read_text(), source=str(EXAMPLE))
    assert target.peak_turns_per_s == pytest.approx(
        target.users * target.turns_per_user_per_day * target.peak_factor / 86_400
    )
    node, given = target.node("stm")
    assert given and node == target.nodes["default"]


@pytest.mark.parametrize(
    ("text", "line", "field"),
    [
        ("users: 10\nturns_per_user_per_day: 5\npeak_factor: 0.5\n", 3, "peak_factor"),
        ("users: 10\nturns_per_user_per_day: 5\nslo_ms:\n  turn: -1\n", 4, "slo_ms.turn"),
        ("users: 10\nturns_per_user_per_day: 5\nslo_ms:\n  trun: 3\n", 4, "slo_ms.trun"),
        ("users: 10\n", 1, "turns_per_user_per_day"),
        (
            "users: 10\nturns_per_user_per_day: 5\nnodes:\n  gpu: {cores: 1, ram_gb: 1, "
            "disk_gb: 1}\n",
            3,
            "nodes",
        ),
        ("users: 10\nusers: 11\nturns_per_user_per_day: 5\n", 2, "users"),
        ("users: [10\n", 2, "(yaml)"),
    ],
)
def test_bad_targets_name_file_line_and_field(text: str, line: int, field: str) -> None:
    with pytest.raises(TargetError) as info:
        parse_target(text, source="t.yaml")
    problem = info.value.problems[0]
    assert (problem.file, problem.line, problem.field) == ("t.yaml", line, field)
    assert str(problem).startswith(f"t.yaml:{line}: {field}")


# ----------------------------------------------------------------------------- steps
def test_parse_rates() -> None:
    assert parse_rates("2, 4,8.5") == (2.0, 4.0, 8.5)
    assert parse_rates("auto") is None
    for bad in ("", "2,x", "0,1", "-1"):
        with pytest.raises(ValueError):
            parse_rates(bad)


def test_auto_rates_spread_below_and_around_x_max() -> None:
    rates = auto_rates(40.0)
    assert rates == (4.0, 10.0, 16.0, 22.0, 28.0, 34.0, 40.0, 48.0)
    assert sum(r <= 0.8 * 40.0 for r in rates) >= 5  # below the safe utilisation
    assert rates[-1] > 40.0  # and past X_max
    assert auto_rates(0.3)[0] == 0.05  # never below 0.05/s
    for bad in (0.0, -1.0, math.inf, math.nan):
        with pytest.raises(ValueError, match="X_max"):
            auto_rates(bad)


def test_interleave_plays_every_rate_once_per_round_in_alternating_directions() -> None:
    assert interleave((3.0, 1.0, 2.0), 3) == (1.0, 2.0, 3.0, 3.0, 2.0, 1.0, 1.0, 2.0, 3.0)
    assert interleave((3.0, 1.0), 1) == (3.0, 1.0)  # one round: as given
    with pytest.raises(ValueError):
        interleave((1.0,), 0)


def test_drift_compares_the_first_and_last_thirds() -> None:
    flat = drift([10.0, 11.0, 12.0], [10.0, 12.0, 11.0])
    assert flat is not None and flat["ratio"] == 1.0 and not flat["drifts"]
    slow = drift([10.0, 10.0, 10.0], [30.0, 33.4, 36.0])
    assert slow is not None and slow["ratio"] == pytest.approx(3.34) and slow["drifts"]
    assert drift([], [1.0]) is None


def test_a_claim_after_its_step_ended_drops_the_starts_left_behind() -> None:
    schedule = SteppedSchedule((4.0, 2.0, 2.0), step_s=1.0)
    assert schedule.claim(0.0) == (0.0, 0)
    # Every user was busy until 1.6 s: step 0's other 3 starts are dropped, not served in
    # step 1; step 1's starts from its boundary on are served (late: queueing).
    assert schedule.claim(1.6) == (1.0, 1)
    assert schedule.claim(1.6) == (1.5, 1)
    assert schedule.claim(2.1) == (2.0, 2)
    assert schedule.claimed == [1, 2, 1]
    assert schedule.claim(3.0) is None  # the timeline is over


def test_recorder_keeps_service_times_by_third_and_the_dropped_share() -> None:
    schedule = SteppedSchedule((3.0,), step_s=3.0)
    claims = [schedule.claim(0.0) for _ in range(2)]  # 2 of the 9 intended turns started
    recorder = StepRecorder(schedule, cores=2)
    recorder.record_service(0, 0.5, 10.0)  # first third
    recorder.record_service(0, 1.5, 99.0)  # middle: not kept
    recorder.record_service(0, 2.5, 20.0)  # last third
    (entry,) = recorder.document({})["steps"]
    assert claims[0] is not None and entry["drift"]["ratio"] == 2.0
    assert entry["dropped_share"] == pytest.approx(1 - 2 / 9, abs=1e-4)
    assert recorder.document({})["cores"] == 2


def test_stepped_schedule_and_recorder_attribute_turns_to_steps() -> None:
    schedule = SteppedSchedule((2.0, 4.0), step_s=1.0)
    claims = []
    while (claim := schedule.claim(100.0)) is not None:
        claims.append(claim)
    assert [step for _, step in claims] == [0, 0, 1, 1, 1, 1]
    assert [t for t, _ in claims] == [100.0, 100.5, 101.0, 101.25, 101.5, 101.75]
    assert schedule.over(102.0) and not schedule.over(101.9)
    recorder = StepRecorder(schedule)
    for intended, step in claims:
        recorder.record_ms(step, "turn", 10.0)
        recorder.finished(intended + 0.6, ok=True, step=step)  # counted where it ends
    document = recorder.document({"run_id": "x"})
    assert [s["intended"] for s in document["steps"]] == [2, 4]
    assert [s["completed_in_window"] for s in document["steps"]] == [1, 3]
    assert document["late_completions"] == 2
    assert document["steps"][1]["ops"]["turn"]["count"] == 4


def test_a_rate_steps_progress_line_says_what_is_final_and_what_is_so_far() -> None:
    schedule = SteppedSchedule((2.0, 4.0), step_s=1.0)
    claims = []
    while (claim := schedule.claim(100.0)) is not None:
        claims.append(claim)
    recorder = StepRecorder(schedule)
    for intended, step in claims[:4]:  # step 1's last turn has not finished
        recorder.record_ms(step, "turn@intended", 10.0 * (step + 1))
        recorder.finished(intended + 0.1, ok=True, step=step)
    assert recorder.step_title(1) == "rate step 2/2: 4 turns/s for 1 s"
    assert recorder.step_so_far(0) == (
        "achieved 2.00 turns/s, p95 10.0 ms from intended start (2 of 2 turns finished)"
    )
    assert recorder.step_so_far(1).endswith(
        "p95 20.0 ms from intended start (2 of 4 turns finished)"
    )


def test_steps_past_the_knee_are_expected_and_a_run_with_none_held_fails() -> None:
    def steps(*held: bool) -> dict[str, Any]:
        rates = (5.0, 12.5, 23.0, 33.25)[: len(held)]
        return {
            "steps": [{"offered_rate": r, "sla_held": h} for r, h in zip(rates, held, strict=True)]
        }

    notes, any_held = step_verdicts(steps(True, True, False, False))
    assert any_held and notes == [
        "step at 23 turns/s past saturation: expected, it finds the knee",
        "step at 33.25 turns/s past saturation: expected, it finds the knee",
    ]
    notes, any_held = step_verdicts(steps(True, False, True, False))
    assert any_held and notes[0].startswith("step at 12.5 turns/s broke an SLA although a higher")
    assert step_verdicts(steps(False, False, False, False)) == ([], False)
    assert step_verdicts({"steps": [{"offered_rate": 5.0}]}) == ([], True)  # no SLA: no verdict
    recorder = StepRecorder(SteppedSchedule((2.0,), step_s=1.0))
    judged = recorder.document({}, slas=(Sla("turn", 300.0),))  # no turn at all: no data
    assert step_verdicts(judged) == ([], False)


# ----------------------------------------------------------------------------- end to end
def _hist(rng: np.random.Generator, mean_ms: float, n: int) -> str:
    hists = OpHistograms()
    for value in rng.exponential(mean_ms, n) + 0.2 * mean_ms:
        hists.record_ms("x", float(value))
    return hists.encode()["x"]


def _write_load(
    run_dir: Path,
    x_max: float = 20.0,
    turn_ms: float = 30.0,
    stm_ms: float = 15.0,
    *,
    strategy: str | None = "hybrid",
    maintenance_cpu: float | None = None,
    repeats: int = 1,
) -> None:
    """A step-load run of an M/M/1-like service: latency grows as load nears x_max.

    `strategy` None writes a run whose file names no strategy (no strategy keys);
    `maintenance_cpu` (CPU s per turn) adds the maintenance figures of contract 4."""
    rng = np.random.default_rng(0)
    shares = [0.1, 0.25, 0.45, 0.65, 0.85, 1.2]
    rates = [share * x_max for _ in range(repeats) for share in shares]
    steps = []
    for k, rate in enumerate(rates):
        # The load process's CPU per turn is 1 / x_max (one process: X_max = x_max), with a
        # little noise from step to step so D has an interval.
        cpu_turn = (1.0 / x_max) * (1.0 + 0.01 * (k % 3 - 1))
        achieved = min(rate, x_max * (1 - 0.02 * (k % len(shares))))
        rho = min(achieved / x_max, 0.95)
        response = turn_ms / (1 - rho)
        n = max(int(achieved * 10), 20)
        layer_ms = {"session": 1.0, "embed": 8.0, "stm": stm_ms, "ltm": 2.0, "turn": turn_ms}
        hist = {op: _hist(rng, ms, n) for op, ms in layer_ms.items()}
        hist["turn@intended"] = _hist(rng, response, n)
        ops = {op: {"count": n, "mean_ms": ms, "p50_ms": ms, "p95_ms": 3 * ms, "p99_ms": 4 * ms}
               for op, ms in layer_ms.items()}  # fmt: skip
        ops["turn@intended"] = {"count": n, "mean_ms": response, "p50_ms": response,
                                "p95_ms": 3 * response, "p99_ms": 4.6 * response}  # fmt: skip
        done = int(achieved * 10)
        steps.append({
            "step": k, "offered_rate": rate, "duration_s": 10.0, "intended": int(rate * 10),
            "completed_in_window": done, "failed": 0, "achieved_rate": achieved,
            "concurrency": achieved * response / 1000, "ops": ops, "histograms": hist,
            "processes": {"load": {"cpu_s": done * cpu_turn, "rss_mb": 600.0, "pids": 1},
                          "redis": {"cpu_s": done * 0.0003, "rss_mb": 5.0, "pids": 1},
                          "postgres": {"cpu_s": done * 0.001, "rss_mb": 80.0, "pids": 6}},
            "embedding_cache": {"hits": done // 2, "misses": done - done // 2},
        })  # fmt: skip
    run_dir.mkdir(parents=True)
    document: dict[str, Any] = {
        "run_id": run_dir.name,
        "kind": "step-load",
        "rates": rates,
        "cores": 2,
        "steps": steps,
    }
    if strategy is not None:
        document.update({"strategy": strategy, "strategy_fingerprint": f"fp-{strategy}",
                         "time_scale": None, "maintenance": None})  # fmt: skip
    if maintenance_cpu is not None:
        document["maintenance"] = {
            "kind": "maintenance", "strategy": strategy, "cpu_s": 1.0, "wall_s": 60.0,
            "event_lag_ms": {"p50": 4.0, "p95": 40.0, "p99": 80.0, "max": 120.0},
        }  # fmt: skip
        per_turn = {"load": 0.04, "redis": 0.0003, "postgres": 0.001, "chroma": 0.0}
        document["cpu_s_per_turn"] = {**per_turn, "maintenance": maintenance_cpu}
    (run_dir / "steps.json").write_text(json.dumps(document))


def _write_sim(run_dir: Path, users: int) -> None:
    """A simulator run: footprint proportional to the users, two strategies."""
    days = 30
    strategies = []
    for label, keep in (("hybrid", 0.5), ("keep_all", 1.0)):
        series = [
            {"at": 1e9 + d * 86_400, "session": [users // 10, users * 20],
             "stm": [users * d // 3, int(users * d * 1600 * keep)],
             "ltm": [users * d // 5, int(users * d * 1500 * keep)]}
            for d in range(days)
        ]  # fmt: skip
        strategies.append({
            "label": label, "status": "ok", "metrics": {"recall_at_k": keep},
            "footprint": {"series": series, "peak": {}}, "latency_ms": {},
        })  # fmt: skip
    run_dir.mkdir(parents=True)
    scenario = {
        "name": f"gen-{users}",
        "users": users,
        "turns": users * 5,
        "strategies": strategies,
    }
    document = {"run_id": run_dir.name, "status": "complete", "scenarios": [scenario]}
    (run_dir / "results.json").write_text(json.dumps(document))


@pytest.fixture
def reports(tmp_path: Path) -> Path:
    _write_load(tmp_path / "load-a")
    _write_sim(tmp_path / "sim-small", 100)
    _write_sim(tmp_path / "sim-large", 1000)
    return tmp_path


def _capacity(reports: Path, *args: str) -> Any:
    return CliRunner().invoke(
        main, ["capacity", "--target", str(EXAMPLE), "--reports", str(reports), *args]
    )


def test_capacity_end_to_end(reports: Path) -> None:
    out = reports / "plan"
    result = _capacity(reports, "--out", str(out))
    assert result.exit_code == 0, result.output
    assert f"hybrid: using load: {reports / 'load-a'} (newest under" in result.output
    assert "sim-small" in result.output and "sim-large" in result.output
    document = json.loads((out / "capacity.json").read_text())
    assert document["strategies"] == ["hybrid"] and document["currency"] == "USD"
    (plan,) = document["plans"]
    assert plan["strategy"] == "hybrid"
    layers = {row["layer"]: row for row in plan["sizing"]}
    assert set(layers) == {"session", "stm", "ltm", "embedder", "turn"}  # no maintenance figures
    assert any("maintenance process not sized" in note for note in plan["notes"])
    for row in layers.values():
        by = {k: row[f"instances_by_{k}"] for k in ("cpu", "memory", "disk")}
        assert row["instances"] == max(1, *by.values())
        assert by[row["bound_by"]] == max(by.values())
        assert row["monthly_cost"] == pytest.approx(row["instances"] * _price(row["layer"]) * 730)
    (answer,) = document["answer"]
    assert answer["instances"] == sum(r["instances"] for r in layers.values())
    assert answer["monthly_cost"] == pytest.approx(sum(r["monthly_cost"] for r in layers.values()))
    # The bottleneck is the layer with the largest service demand (operational laws).
    assert plan["bottleneck"]["layer"] == max(layers, key=lambda k: layers[k]["demand_ms"])
    assert answer["bottleneck"].startswith(plan["bottleneck"]["layer"])
    assert layers["stm"]["ram_gb"] > 0 and layers["ltm"]["disk_gb"] > 0
    # The plan opens with X_max = cores / D and whether the validation held.
    load_cpu = 1.0 / 20.0  # _write_load: the load process, one core, 1 / x_max per turn
    assert plan["capacity"]["x_max"] == pytest.approx(1.0 / load_cpu, rel=0.02)
    assert plan["capacity"]["bound_by"] == "1 / D of the load process (one Python process: the GIL)"
    assert document["headline"][0].startswith("hybrid: X_max = 20 turns/s (95% CI")
    assert document["headline"][1].startswith("hybrid: validation ")
    # Every other rate is held out, interleaved with the fitting steps; a step past the
    # safe rate gets no p95 ("saturated"), and is not judged on it.
    validation = plan["validation"]
    held = validation["holdout"]
    assert [h["held_out_step"] for h in held] == [1, 3, 5]
    assert validation["fitted_on_steps"] == [0, 2, 4]
    saturated = held[-1]
    assert saturated["p95"]["predicted_ms"] is None and saturated["p95"]["holds"] is None
    assert saturated["position"].startswith("saturated")
    for h in held:
        for figure in ("throughput", "p95"):
            j = h[figure]
            if j["holds"] is not None:
                assert j["holds"] == (abs(j["error"]) <= j["limit"])
    judged = [h[f]["holds"] for h in held for f in ("throughput", "p95")]
    assert validation["holds"] == all(j is not False for j in judged)
    # Footprint proportional to users: extrapolation 100 -> 1000 users is exact.
    assert all(abs(row["mean_error"]) < 1e-9 for row in plan["validation"]["footprint"])
    kinds = {row["kind"] for row in plan["inputs"]}
    assert kinds == {"measured", "assumed"}
    page = (out / "capacity.html").read_text()
    images = re.findall(r"<img [^>]*src='data:image/png;base64,([A-Za-z0-9+/=]+)'", page)
    assert len(images) == 5 and all(len(i) > 1000 for i in images)
    assert page.index("id='answer'") < page.index('id="sizing-hybrid"')
    assert "monthly cost (USD)" in page and "lambda_peak_per_s" not in page
    assert "http" not in page.replace("http-equiv", "")
    markdown = (out / "capacity.md").read_text()
    assert markdown.startswith("# Capacity plan") and "### hybrid: sizing" in markdown
    head = markdown.split("## Instances per layer")[0]
    assert "USD per month" in head
    off = any(h[f]["holds"] is False for h in held for f in ("throughput", "p95"))
    assert ("off by more than" in head) == off
    assert markdown.index("X_max = ") < markdown.index("validation ") < markdown.index("Target:")
    assert page.index("X_max = ") < page.index("Target:")


def _price(layer: str) -> float:
    target = parse_target(EXAMPLE.read_text())
    price = target.node(layer)[0].price_per_hour
    assert price is not None
    return price


def test_capacity_warns_at_the_top_when_a_held_out_step_is_outside_its_interval(
    tmp_path: Path,
) -> None:
    _write_load(tmp_path / "load-a")
    data = json.loads((tmp_path / "load-a" / "steps.json").read_text())
    data["steps"][-1]["achieved_rate"] *= 3  # the held-out step did 3x what the fit allows
    (tmp_path / "load-a" / "steps.json").write_text(json.dumps(data))
    result = _capacity(tmp_path, "--out", str(tmp_path / "plan"))
    assert result.exit_code == 0, result.output
    markdown = (tmp_path / "plan" / "capacity.md").read_text()
    head = markdown.split("## Instances per layer")[0]
    assert "WARNING: held-out throughput off by more than ±15%" in head
    assert "memory not planned for hybrid: no simulator run" in head  # no sim: no memory plan


def test_strategies_side_by_side_with_the_maintenance_process(tmp_path: Path) -> None:
    _write_load(tmp_path / "load-h", strategy="hybrid", maintenance_cpu=0.004)
    _write_load(tmp_path / "load-k", strategy="keep_all", maintenance_cpu=0.001)
    _write_sim(tmp_path / "sim-small", 100)
    _write_sim(tmp_path / "sim-large", 1000)
    out = tmp_path / "plan"
    result = _capacity(tmp_path, "--strategy", "all", "--out", str(out))
    assert result.exit_code == 0, result.output
    document = json.loads((out / "capacity.json").read_text())
    assert document["strategies"] == ["hybrid", "keep_all"]
    target = parse_target(EXAMPLE.read_text())
    for plan, cpu in zip(document["plans"], (0.004, 0.001), strict=True):
        layers = {row["layer"]: row for row in plan["sizing"]}
        maintenance = layers["maintenance"]
        # cores = CPU s per turn x turns/s at peak / the utilisation ceiling
        offered = cpu * target.peak_turns_per_s
        assert maintenance["offered_cores"] == pytest.approx(offered)
        assert maintenance["cores"] == max(1, math.ceil(offered / target.utilisation_ceiling))
        assert maintenance["ram_gb"] == pytest.approx(104.0 / 1024)  # the measured constant
        assert maintenance["monthly_cost"] == pytest.approx(
            maintenance["instances"] * _price("maintenance") * 730
        )
    memory = {row["strategy"]: row["memory_gb"] for row in document["answer"]}
    assert memory["keep_all"] > memory["hybrid"]  # keep_all keeps twice the STM/LTM bytes
    page = (out / "capacity.html").read_text()
    assert 'id="sizing-hybrid"' in page and 'id="sizing-keep_all"' in page


def test_the_newest_run_of_the_strategy_is_chosen_not_the_newest(tmp_path: Path) -> None:
    _write_load(tmp_path / "load-h", strategy="hybrid")
    _write_load(tmp_path / "load-k", strategy="keep_all")
    os.utime(tmp_path / "load-k" / "steps.json", (2e9, 2e9))  # the newest
    result = _capacity(tmp_path, "--out", str(tmp_path / "plan"))
    assert result.exit_code == 0, result.output
    assert f"using load: {tmp_path / 'load-h'} (newest under {tmp_path}/ with strategy hybrid)" in (
        result.output
    )


def test_a_load_run_of_another_strategy_is_refused_naming_both(tmp_path: Path) -> None:
    _write_load(tmp_path / "load-k", strategy="keep_all")
    result = _capacity(tmp_path, "--load", str(tmp_path / "load-k"))
    assert result.exit_code != 0
    message = " ".join(result.output.split())
    assert "strategy mismatch" in message
    assert f"the target ({EXAMPLE}: strategy) asks for 'hybrid'" in message
    assert f"--load gives {tmp_path / 'load-k'} (keep_all)" in message
    assert "--strategy keep_all" in message and "memharness load --strategy hybrid" in message


def test_a_strategy_no_run_has_names_the_option_and_the_strategies_there(tmp_path: Path) -> None:
    _write_load(tmp_path / "load-h", strategy="hybrid")
    _write_load(tmp_path / "load-old", strategy=None)
    result = _capacity(tmp_path, "--strategy", "typed_ttl")
    assert result.exit_code != 0
    message = " ".join(result.output.split())
    assert "no step-load run with strategy 'typed_ttl'" in message
    assert "the load runs there have: hybrid, store_defaults" in message
    assert "--load RUN" in message and "memharness load --strategy typed_ttl" in message


def test_a_run_without_strategy_keys_is_taken_as_the_stores_defaults(tmp_path: Path) -> None:
    _write_load(tmp_path / "load-old", strategy=None)
    refused = _capacity(tmp_path)
    assert refused.exit_code != 0
    assert "the load runs there have: store_defaults" in " ".join(refused.output.split())
    out = tmp_path / "plan"
    result = _capacity(tmp_path, "--strategy", "store_defaults", "--out", str(out))
    assert result.exit_code == 0, result.output
    assert "records no strategy: it ran the stores' defaults (store_defaults)" in result.output
    page = (out / "capacity.md").read_text()
    assert "records no strategy" in page


def test_a_simulator_run_without_the_strategy_is_refused(tmp_path: Path) -> None:
    _write_load(tmp_path / "load-h", strategy="typed_ttl")
    _write_sim(tmp_path / "sim", 100)  # hybrid and keep_all only
    result = _capacity(tmp_path, "--strategy", "typed_ttl", "--sim", str(tmp_path / "sim"))
    assert result.exit_code != 0
    message = " ".join(result.output.split())
    assert f"--sim {tmp_path / 'sim'} has hybrid, keep_all" in message
    assert "memharness run --strategy typed_ttl" in message


def test_a_load_and_a_simulator_run_of_different_settings_are_refused(tmp_path: Path) -> None:
    _write_load(tmp_path / "load-h", strategy="hybrid")  # fingerprint fp-hybrid
    _write_sim(tmp_path / "sim", 100)
    results = tmp_path / "sim" / "results.json"
    document = json.loads(results.read_text())
    for entry in document["scenarios"][0]["strategies"]:
        entry["fingerprint"] = f"other-{entry['label']}"
    results.write_text(json.dumps(document))
    result = _capacity(tmp_path, "--sim", str(tmp_path / "sim"))
    assert result.exit_code != 0
    message = " ".join(result.output.split())
    assert f"load run {tmp_path / 'load-h'} ran it with other settings" in message
    assert f"simulator run {tmp_path / 'sim'} (other-hybrid)" in message
    assert not list(tmp_path.glob("capacity-*"))


@pytest.mark.parametrize("option", ["--load", "--sim", "--bench"])
def test_a_directory_that_is_not_a_run_is_refused(tmp_path: Path, option: str) -> None:
    _write_load(tmp_path / "load-h")
    empty = tmp_path / "empty"
    empty.mkdir()
    result = _capacity(tmp_path, option, str(empty))
    assert result.exit_code != 0
    assert f"{option} {empty}: not a" in " ".join(result.output.split())


def test_a_multi_strategy_load_directory_gives_each_strategy_its_run(tmp_path: Path) -> None:
    for strategy in ("hybrid", "keep_all"):
        _write_load(tmp_path / f"grid-{strategy}", strategy=strategy)
    listing = {"kind": "load_strategies", "runs": [
        {"strategy": s, "dir": f"grid-{s}", "p95_ms": {}, "sustainable_rate": None,
         "maintenance": None} for s in ("hybrid", "keep_all")]}  # fmt: skip
    (tmp_path / "grid").mkdir()
    (tmp_path / "grid" / "load_strategies.json").write_text(json.dumps(listing))
    args = ["--load", str(tmp_path / "grid"), "--strategy", "keep_all", "--strategy", "hybrid"]
    result = _capacity(tmp_path, *args, "--out", str(tmp_path / "plan"))
    assert result.exit_code == 0, result.output
    assert f"keep_all: using load: {tmp_path / 'grid-keep_all'} (given)" in result.output
    assert f"hybrid: using load: {tmp_path / 'grid-hybrid'} (given)" in result.output


def test_a_failed_report_leaves_the_earlier_one_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _write_load(tmp_path / "load-h")
    out = tmp_path / "plan"
    assert _capacity(tmp_path, "--out", str(out)).exit_code == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    import memharness.capacity.render as render

    def broken(_: Any) -> str:
        raise RuntimeError("rendering failed")

    monkeypatch.setattr(render, "_html", broken)
    failed = _capacity(tmp_path, "--out", str(out))
    assert failed.exit_code != 0 and isinstance(failed.exception, RuntimeError)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_the_target_currency_is_shown_with_every_cost(tmp_path: Path) -> None:
    _write_load(tmp_path / "load-h")
    target = tmp_path / "eur.yaml"
    target.write_text(EXAMPLE.read_text().replace("currency: USD", "currency: EUR"))
    out = tmp_path / "plan"
    args = ["capacity", "--target", str(target), "--reports", str(tmp_path), "--out", str(out)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    page = re.sub(r"base64,[A-Za-z0-9+/=]+", "", (out / "capacity.html").read_text())
    assert "monthly cost (EUR)" in page and "EUR per month" in page and "USD" not in page
    bad = tmp_path / "bad.yaml"
    bad.write_text(EXAMPLE.read_text().replace("currency: USD", "currency: '<b>'"))
    refused = CliRunner().invoke(main, ["capacity", "--target", str(bad)])
    assert refused.exit_code != 0 and f"{bad}:9: currency" in refused.output


def test_capacity_refuses_a_bad_target_naming_file_and_line(reports: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("users: 10\nturns_per_user_per_day: 5\nutilisation_ceiling: 2\n")
    result = CliRunner().invoke(main, ["capacity", "--target", str(bad), "--reports", str(reports)])
    assert result.exit_code != 0
    assert f"{bad}:3: utilisation_ceiling" in result.output


def test_capacity_without_a_load_run_says_how_to_make_one(tmp_path: Path) -> None:
    result = _capacity(tmp_path)
    assert (
        result.exit_code != 0 and "memharness load --strategy hybrid --rates auto" in result.output
    )


def test_compare_two_runs(reports: Path, tmp_path: Path) -> None:
    written = tmp_path / "compare-sim-small.md"
    result = CliRunner().invoke(
        main,
        ["compare", str(reports / "sim-small"), str(reports / "sim-large"), "--out", str(written)],
    )
    assert result.exit_code == 0, result.output
    assert written.is_file() and written.with_suffix(".csv").is_file()
    assert "recall_at_k" in written.read_text()
    assert not list((reports / "sim-large").glob("compare-*"))  # only where --out says
    # Different populations: matched by strategy, and said so.
    assert "no scenario in common: strategies are matched across them" in result.stderr
    plans = []
    for name, users in (("a", 50_000), ("b", 100_000)):
        target = tmp_path / f"{name}.yaml"
        target.write_text(EXAMPLE.read_text().replace("users: 50000", f"users: {users}"))
        out = tmp_path / f"plan-{name}"
        args = ["--target", str(target), "--reports", str(reports), "--out", str(out)]
        run = CliRunner().invoke(main, ["capacity", *args])
        assert run.exit_code == 0, run.output
        plans.append(out)
    result = CliRunner().invoke(main, ["compare", str(plans[0]), str(plans[1])])
    assert result.exit_code == 0, result.output
    header = result.stdout.splitlines()[2].split()
    assert header == ["strategy", "layer", "figure", "A", "B", "change"]
    mixed = CliRunner().invoke(main, ["compare", str(plans[0]), str(reports / "sim-large")])
    assert mixed.exit_code != 0 and "different kinds" in mixed.output


def test_the_newest_bench_run_slowed_on_purpose_is_not_used(tmp_path: Path) -> None:
    def bench(name: str, params: dict[str, Any]) -> Path:
        run = tmp_path / name
        run.mkdir()
        op = {"op": "stm.query[cached]", "backend": "real", "params": params}
        (run / "bench.json").write_text(json.dumps({"ops": [op]}), encoding="utf-8")
        return run

    honest = bench("bench-1", {"k": 5})
    slowed = bench("bench-2", {"k": 5, "injected_delay_ms": 60.0})
    os.utime(slowed / "bench.json", (2e9, 2e9))  # the newest
    assert find_runs(tmp_path, "bench") == [honest]


@pytest.mark.parametrize(("stm_ms", "warned"), [(80.0, True), (5.0, False)])
def test_capacity_warns_when_no_core_count_meets_an_slo(
    tmp_path: Path, stm_ms: float, warned: bool
) -> None:
    _write_load(tmp_path / "load-a", stm_ms=stm_ms)
    result = _capacity(tmp_path, "--out", str(tmp_path / "plan"))
    assert result.exit_code == 0, result.output
    head = (tmp_path / "plan" / "capacity.md").read_text().split("## Sizing")[0]
    assert ("stm: no number of cores meets its p95 SLO of 50 ms" in head) is warned


def test_the_validation_script_reports_each_run_and_held_out_step(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import importlib.util

    path = Path(__file__).resolve().parent.parent / "scripts" / "capacity_validation.py"
    spec = importlib.util.spec_from_file_location("capacity_validation", path)
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    runs = []
    for k in range(3):
        _write_load(tmp_path / f"val-{k}", x_max=20.0 + k)
        runs.append(str(tmp_path / f"val-{k}"))
    out = tmp_path / "validation.md"
    code = script.main([*runs, "--out", str(out)])
    printed = capsys.readouterr().out
    document = json.loads(out.with_suffix(".json").read_text())
    assert len(document["rows"]) == 9  # three held-out steps per run
    assert [r["step"].split(" ")[0] for r in document["rows"][:3]] == ["1", "3", "5"]
    holding = sum(r["holds"] for r in document["runs"])
    assert document["verdict"].startswith(f"{holding} of 3 runs hold")
    assert "X_max spread 1.10x (within 1.3x)" in document["verdict"]
    assert code == (0 if holding == 3 else 1)
    assert printed == out.read_text()
    # A run of several strategies (`memharness load --strategy ...`) stands for each of its runs.
    both = tmp_path / "both"
    both.mkdir()
    listing = {"kind": "load_strategies", "runs": [{"dir": runs[0]}, {"dir": runs[1]}]}
    (both / "load_strategies.json").write_text(json.dumps(listing))
    script.main([str(both), "--out", str(out)])
    capsys.readouterr()
    document = json.loads(out.with_suffix(".json").read_text())
    assert {r["run"] for r in document["rows"]} == {runs[0], runs[1]}


# ----------------------------------------------------------------------------- demand
def _steps(rows: list[tuple[float, float, int, float]], **extra: Any) -> Any:
    """A step table as `inputs.read_load` makes it: (offered, achieved, completed, CPU s of
    the load process per turn); Redis spends 1 ms per turn."""
    import pandas as pd

    return pd.DataFrame(
        [
            {
                "step": k, "offered": offered, "achieved": achieved, "completed": done,
                "concurrency": 0.5, "cpu.load": cpu * done, "cpu.redis": 0.001 * done,
                **{key: values[k] for key, values in extra.items()},
            }
            for k, (offered, achieved, done, cpu) in enumerate(rows)
        ]
    )  # fmt: skip


def test_t_interval_and_bootstrap_median_interval() -> None:
    from memharness.capacity.demand import bootstrap_median_ci, t_interval

    low, high = t_interval(np.array([1.0, 2.0, 3.0]))
    # mean 2, s = 1, t(0.975, 2) = 4.3027: 2 ± 4.3027 / √3
    assert (low, high) == pytest.approx((2 - 2.4841, 2 + 2.4841), abs=1e-4)
    values = np.arange(1.0, 101.0)
    low, high = bootstrap_median_ci(values)
    assert low < 50.5 < high and high - low < 25
    assert bootstrap_median_ci(values) == (low, high)  # seeded
    assert bootstrap_median_ci(np.array([7.0, 7.0, 7.0])) == (7.0, 7.0)


def test_service_demand_gives_x_max_as_cores_over_d_or_the_single_core_bound() -> None:
    from memharness.capacity.demand import service_demand

    # D = 0.030 + 0.001 s per turn on 2 cores: cores / D = 64.5/s, but the load process
    # alone is one core at 0.030 s: 33.3/s binds.
    rows = [(2.0, 2.0, 40, 0.030), (4.0, 4.0, 80, 0.029), (6.0, 6.0, 120, 0.031),
            (30.0, 20.0, 400, 0.030)]  # fmt: skip
    demand = service_demand(_steps(rows), cores=2)
    assert demand.d_s == pytest.approx(0.031)
    assert demand.steps == [0, 1, 2]  # the saturated step is not light
    assert demand.bound_role == "load" and demand.x_max == pytest.approx(1 / 0.030)
    assert demand.x_max_ci is not None and demand.x_max_ci[0] < demand.x_max < demand.x_max_ci[1]
    assert demand.safe_rate == pytest.approx(0.8 * demand.x_max_ci[0])
    assert demand.x_sustained == 6.0
    assert demand.headline().startswith("X_max = 33.3 turns/s (95% CI")
    # On one core, the cores bind: X_max = 1 / D.
    one = service_demand(_steps(rows), cores=1)
    assert one.bound_role is None and one.x_max == pytest.approx(1 / 0.031)
    assert one.predict_quantile(0.95, 0.9 * one.x_max, np.array([0.05])) is None  # saturated
    p = one.predict_quantile(0.95, 0.2 * one.x_max, np.array([0.05]))
    assert p is not None and 0.05 <= p < 0.1


def test_steps_with_no_turn_or_a_generator_that_fell_behind_are_set_apart() -> None:
    from memharness.capacity.demand import service_demand, valid_steps

    rows = [(2.0, 2.0, 40, 0.030), (4.0, 4.0, 80, 0.029), (6.0, 0.0, 0, 0.0),
            (8.0, 8.0, 160, 0.031), (9.0, 9.0, 180, 0.5)]  # fmt: skip
    steps = _steps(rows, dropped_share=[0.0, 0.0, 0.0, 0.005, 0.02])
    valid, excluded = valid_steps(steps)
    assert list(valid["step"]) == [0, 1, 3]
    assert excluded[2].startswith("no turn completed")
    assert "dropped 2.0% of its intended turns" in excluded[4]
    demand = service_demand(steps, cores=2)
    assert any("step 4 set apart" in note for note in demand.notes)
    # A lighter step right after a saturated one starts behind its backlog: set apart.
    after = _steps([(2.0, 2.0, 40, 0.03), (40.0, 30.0, 600, 0.03), (4.0, 9.0, 180, 0.03)])
    assert valid_steps(after)[1] == {
        2: "it started behind the backlog of the saturated step before it (step 1)"
    }
    with pytest.raises(ValueError, match=r"no step of the load run can be used.*no turn completed"):
        service_demand(_steps([(6.0, 0.0, 0, 0.0)]), cores=2)


def test_rates_all_past_saturation_or_too_few_say_which_rates_to_add() -> None:
    from memharness.capacity.demand import check_rates, service_demand

    saturated = _steps([(50.0, 30.0, 600, 0.030), (80.0, 31.0, 620, 0.030)])
    with pytest.raises(ValueError, match=r"every step is past saturation .* --rates 3\.3,8\.3,"):
        service_demand(saturated, cores=2)
    one = _steps([(5.0, 5.0, 100, 0.030)])
    demand = service_demand(one, cores=2)
    assert demand.d_ci is None and any("no interval" in n for n in demand.notes)
    with pytest.raises(ValueError, match=r"1 usable step\(s\) at 1 rate\(s\) \(5 turns/s\)") as err:
        check_rates(one, demand)
    assert "Add rates 3.3,8.3,13,18,23,28,33,40" in str(err.value)
    assert "--rates 3.3,5,8.3,13" in str(err.value)  # the run's own rate is kept


def test_usl_is_rejected_with_the_reason_when_it_cannot_be_trusted() -> None:
    from memharness.capacity.queueing import usl_rejections

    n = np.array([1.0, 2, 4, 8, 16, 32])
    fit = fit_usl(n, usl_throughput(n, 10.0, 0.05, 0.001), bootstrap=50)
    assert usl_rejections(fit, levels=6) == []
    assert usl_rejections(fit, levels=4) == ["4 load levels; the USL needs at least 6"]
    with pytest.raises(ValueError, match="past 2x the largest measured concurrency"):
        fit.predict(65.0)
    assert fit.predict(64.0) > 0
    # Linear scaling: σ and κ at 0, their bound; no level at N = 1.
    linear = fit_usl(n + 2, 10.0 * (n + 2), bootstrap=20)
    reasons = usl_rejections(linear, levels=6)
    assert any(
        r.startswith("σ = ") and r.endswith("sits at its bound (0 ≤ σ ≤ 1)") for r in reasons
    )
    assert any(r.startswith("no level at N = 1") for r in reasons)
    # Every point past the knee: λ/σ known to no better than ±15 %.
    rng = np.random.default_rng(1)
    flat = fit_usl(n, 50.0 * (1 + 0.2 * rng.standard_normal(6)), bootstrap=50)
    assert any("λ/σ" in r for r in usl_rejections(flat, levels=6))


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ("one rate", "1 usable step(s) at 1 rate(s)"),
        ("all saturated", "every step is past saturation"),
        ("no turns", "no step of the load run can be used"),
    ],
)
def test_capacity_on_bad_rates_says_what_to_do_without_a_traceback(
    tmp_path: Path, edit: str, message: str
) -> None:
    _write_load(tmp_path / "load-a")
    path = tmp_path / "load-a" / "steps.json"
    data = json.loads(path.read_text())
    if edit == "one rate":
        data["steps"] = data["steps"][1:2]
    for step in data["steps"]:
        if edit == "all saturated":
            step["achieved_rate"] = step["offered_rate"] * 0.5
        if edit == "no turns":
            step["completed_in_window"] = 0
    path.write_text(json.dumps(data))
    result = _capacity(tmp_path, "--out", str(tmp_path / "plan"))
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert message in result.output and (
        "--rates" in result.output or "steps.json" in result.output
    )

"""The load generator apart from the system under test: its send lag per step, steps where
it lagged or dropped turns set apart, and its own process never counted in D."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pandas as pd
import pytest

from loadtests.generator import SendLag
from memharness.load_contract import LATE_MS, generator_problem


def _lagged(late: int, of: int, lag_s: float = 0.05) -> SendLag:
    """`of` sends with a user free in time, `late` of them `lag_s` late, the rest on time."""
    lag = SendLag()
    for k in range(of):
        intended = float(k)
        lag.record(
            intended=intended,
            claimed=intended - 0.2,
            sent=intended + (lag_s if k < late else 0.001),
        )
    return lag


def test_send_lag_tells_the_generators_lateness_from_the_servers_queueing() -> None:
    lag = _lagged(late=0, of=100)
    # 20 more turns claimed after their intended time (every user busy): queueing, not lag.
    for k in range(20):
        lag.record(intended=200.0 + k, claimed=200.5 + k, sent=200.5 + k)
    figures = lag.as_dict()
    assert figures["sent"] == 120
    assert figures["late_share"] == 0.0
    assert figures["queued_share"] == pytest.approx(20 / 120, abs=1e-4)
    assert figures["lag_ms"]["max"] == pytest.approx(500.0)  # every turn's lag is reported
    assert figures["own_lag_ms"]["max"] == pytest.approx(1.0)
    assert generator_problem(figures, 0.0) is None


def test_a_step_where_the_generator_lagged_or_dropped_turns_is_invalid_with_its_reason() -> None:
    late = _lagged(late=5, of=100).as_dict()  # 5 % over LATE_MS late, a user free
    assert late["late_share"] == pytest.approx(0.05)
    assert late["own_lag_ms"]["max"] == pytest.approx(50.0)
    reason = generator_problem(late, 0.0)
    assert reason is not None and reason.startswith("the generator lagged: 5.0% of its sends")
    assert f"over {LATE_MS:g} ms late" in reason
    assert generator_problem(_lagged(late=1, of=100).as_dict(), 0.0) is None  # 1 %: the limit
    dropped = generator_problem(None, 0.02)
    assert dropped is not None and "dropped 2.0% of its intended turns" in dropped


def test_the_plan_sets_apart_a_step_with_injected_generator_lag() -> None:
    from memharness.capacity.demand import service_demand, valid_steps

    rows = [(2.0, 2.0, 40), (4.0, 4.0, 80), (6.0, 6.0, 120), (8.0, 8.0, 160)]
    steps = pd.DataFrame(
        [
            {
                "step": k, "offered": offered, "achieved": achieved, "completed": done,
                "concurrency": 0.5, "cpu.service": 0.03 * done, "cpu.generator": 0.5 * done,
                "dropped_share": 0.0, "generator_late_share": 0.2 if k == 2 else 0.0,
                "generator_lag_p99_ms": 80.0 if k == 2 else 1.0,
                "generator_lag_max_ms": 95.0 if k == 2 else 2.0,
            }
            for k, (offered, achieved, done) in enumerate(rows)
        ]
    )  # fmt: skip
    valid, excluded = valid_steps(steps)
    assert list(valid["step"]) == [0, 1, 3]
    assert excluded[2].startswith("the generator lagged: 20.0% of its sends")
    assert "p99 80.0 ms, max 95.0 ms" in excluded[2]
    demand = service_demand(steps, cores=2)
    assert any(n.startswith("step 2 set apart: the generator lagged") for n in demand.notes)
    # The generator's own CPU (0.5 s per turn) is not the system under test's.
    assert demand.roles == ["service"]
    assert demand.d_s == pytest.approx(0.03)


def test_the_recorder_writes_each_steps_send_lag_and_the_generators_cpu() -> None:
    from loadtests.procstats import ProcessSample
    from loadtests.steps import SteppedSchedule, StepRecorder

    recorder = StepRecorder(SteppedSchedule((2.0,), 10.0))
    recorder.schedule.claim(100.0)
    recorder.sends[0].record(intended=100.0, claimed=99.0, sent=100.2)
    for at, cpu in ((100.0, 1.0), (110.0, 1.4)):
        processes = {
            "service": ProcessSample("service", (1,), cpu * 10, 0),
            "generator": ProcessSample("generator", (2,), cpu, 0),
        }
        recorder.sample(at, processes, (0, 0))
    entry = recorder.document({})["steps"][0]
    assert entry["generator"]["cpu_s"] == pytest.approx(0.4)
    assert entry["generator"]["sent"] == 1
    assert entry["generator"]["late_share"] == 1.0
    assert entry["generator"]["own_lag_ms"]["p99"] == pytest.approx(200.0)


def test_apart_the_generator_is_its_own_role_outside_the_services_process_tree(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from loadtests.procstats import _tree, generator_apart_roles
    from memharness.load_contract import SERVICE_PID_ENV

    for name in ("MEMH_REDIS_URL", "MEMH_PG_URL", "MEMH_CHROMA_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv(SERVICE_PID_ENV, raising=False)
    roles, notes = generator_apart_roles()
    assert roles == {"generator": os.getpid()} and "service" in notes
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE
    )
    try:
        monkeypatch.setenv(SERVICE_PID_ENV, str(child.pid))
        roles, _ = generator_apart_roles()
        assert roles == {"generator": os.getpid(), "service": child.pid}
        assert os.getpid() not in _tree(roles["service"])
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait()


def test_apart_needs_a_strategy_and_refuses_a_target() -> None:
    from click.testing import CliRunner

    from memharness.cli import main

    result: Any = CliRunner().invoke(main, ["load", "--apart", "--rates", "1,2"])
    assert result.exit_code == 2 and "--apart goes with --strategy" in result.output


def test_a_plan_from_an_apart_run_counts_the_service_not_the_generator(tmp_path: Any) -> None:
    """A `--apart` run's steps name `service` and `generator`: the plan's D and its app
    tier come from the service; a step where the generator lagged is set apart."""
    import json

    from tests.test_capacity import _capacity, _write_load, _write_sim

    _write_load(tmp_path / "load-a")
    path = tmp_path / "load-a" / "steps.json"
    data = json.loads(path.read_text())
    for step in data["steps"]:
        processes = step["processes"]
        processes["service"] = processes.pop("load")
        processes["generator"] = {"cpu_s": 5.0 * processes["service"]["cpu_s"], "pids": 1}
        step["generator"] = {"late_share": 0.0, "own_lag_ms": {"p99": 1.0, "max": 2.0}}
    data["steps"][1]["generator"] = {"late_share": 0.3, "own_lag_ms": {"p99": 50.0, "max": 90.0}}
    path.write_text(json.dumps(data))
    _write_sim(tmp_path / "sim-small", 100)
    _write_sim(tmp_path / "sim-large", 1000)
    result = _capacity(tmp_path, "--out", str(tmp_path / "plan"))
    assert result.exit_code == 0, result.output
    plan = json.loads((tmp_path / "plan" / "capacity.json").read_text())
    text = json.dumps(plan)
    assert "step 1 set apart: the generator lagged: 30.0% of its sends" in text
    assert "service-process CPU s / turn" in text
    # D is the service's 50 ms and the servers' 1.3 ms per turn: X_max = 2 cores / D, about
    # 39/s; the generator's 250 ms per turn counted in D would make it 6.6/s.
    assert "D = 51.2 " in plan["headline"][0] and "X_max = 39.1 " in plan["headline"][0]

"""A worker process that dies in the middle of a replay (`memharness run --fault
worker:kill@P%`): its strategy is recorded as failed with the error, the strategies
after it run on a replacement worker, nothing finished is lost, and `--resume` completes
the run with the figures of a run that was never interrupted."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import ray
from click.testing import CliRunner, Result

from memharness.cli import main
from memharness.sim.plan import SpecError, parse_fault
from tests.fixtures import run_results

STRATEGIES = ("keep_all", "typed_ttl", "hybrid")
#: Figures that depend on the machine, not on what was replayed.


@pytest.fixture(scope="module")
def ray_session() -> Iterator[None]:
    yield
    ray.shutdown()


def _invoke(tmp_path: Path, *args: str) -> Result:
    return CliRunner().invoke(main, list(args), env={"MEMH_DATA_DIR": str(tmp_path / "data")})


def _run(tmp_path: Path, scenario: Path, *args: str) -> Result:
    strategies = [a for name in STRATEGIES for a in ("--strategy", name)]
    return _invoke(
        tmp_path, "run", "--scenario", str(scenario), *strategies, "--backend", "memory",
        "--embedder", "hashing", "--workers", "2", "--no-progress", *args,
    )  # fmt: skip


def test_a_killed_worker_fails_its_strategy_only_and_resume_completes_the_run(
    ray_session: None, tmp_path: Path
) -> None:
    scenario = tmp_path / "population.yaml"
    made = _invoke(tmp_path, "scenarios", "generate", "--domain", "ecommerce", "--users",
                   "200", "--seed", "3", "-o", str(scenario))  # fmt: skip
    assert made.exit_code == 0, made.output
    runs = tmp_path / "runs"

    faulty = _run(tmp_path, scenario, "--out", str(runs), "--run-id", "faulty",
                  "--fault", "worker:kill@20%")  # fmt: skip
    assert faulty.exit_code == 0, faulty.output  # a failed strategy is a result
    entries = run_results.entries(runs / "faulty")
    # Worker 0 takes the first strategy; it dies, a new worker takes the ones after it.
    assert entries["keep_all"]["status"] == "failed"
    assert "died" in entries["keep_all"]["error"].lower()
    assert [entries[s]["status"] for s in STRATEGIES[1:]] == ["ok", "ok"]
    kept = {s: (runs / "faulty" / entries[s]["file"]).read_bytes() for s in STRATEGIES[1:]}

    resumed = _run(tmp_path, scenario, "--resume", str(runs / "faulty"))  # the same command
    assert resumed.exit_code == 0, resumed.output
    assert {
        s: e["status"] for s, e in run_results.entries(runs / "faulty").items()
    } == dict.fromkeys(STRATEGIES, "ok")
    for label, before in kept.items():  # finished results are kept as they were
        assert (
            runs / "faulty" / run_results.entries(runs / "faulty")[label]["file"]
        ).read_bytes() == before

    clean = _run(tmp_path, scenario, "--out", str(runs), "--run-id", "clean")
    assert clean.exit_code == 0, clean.output
    for label in STRATEGIES:
        assert run_results.figures(runs / "faulty", label) == run_results.figures(
            runs / "clean", label
        ), label


@pytest.mark.parametrize("text", ["worker:kill", "worker:kill@0%", "worker:kill@100%",
                                  "mysql:kill@30%", "worker:pause@30%"])  # fmt: skip
def test_a_fault_it_cannot_inject_is_refused_naming_the_option(text: str) -> None:
    with pytest.raises(SpecError, match="--fault"):
        parse_fault(text)
    assert parse_fault("worker:kill@30%").share == pytest.approx(0.3)

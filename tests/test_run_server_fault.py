"""`memharness run --fault pg|redis:ACTION@P%`: a worker's embedded server dies (or
pauses) in the middle of a replay. That strategy is recorded as failed with the layer's
error, the strategies after it run (the worker brings its server back), every finished
result is kept, and `--resume` completes the run with the figures of a run that was
never interrupted. Real servers (the embedded ones); small timeouts to stay fast."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import ray
from click.testing import CliRunner, Result

from memharness.cli import main
from memharness.sim.plan import Fault, SpecError, parse_fault
from tests.fixtures import run_results

pytestmark = pytest.mark.faults

STRATEGIES = ("keep_all", "typed_ttl")
#: Figures that depend on the machine, not on what was replayed.
#: Client timeouts of the runs (seconds): a fault's error comes within ~2 s.
ENV = {"MEMH_TIMEOUTS__OPERATION_S": "1", "MEMH_TIMEOUTS__CONNECT_S": "1",
       "MEMH_RETRY__BUDGET_S": "1"}  # fmt: skip


@pytest.fixture(scope="module")
def ray_session() -> Iterator[None]:
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("scenario") / "population.yaml"
    made = CliRunner().invoke(main, ["scenarios", "generate", "--domain", "ecommerce",
                                     "--users", "12", "--seed", "3", "-o", str(path)])  # fmt: skip
    assert made.exit_code == 0, made.output
    return path


def _run(tmp_path: Path, scenario: Path, *args: str, strategies: tuple[str, ...]) -> Result:
    chosen = [a for name in strategies for a in ("--strategy", name)]
    env = {"MEMH_DATA_DIR": str(tmp_path / "data"), **ENV}
    return CliRunner().invoke(main, [
        "run", "--scenario", str(scenario), *chosen, "--backend", "embedded",
        "--embedder", "hashing", "--workers", "1", "--no-progress", *args,
    ], env=env)  # fmt: skip


def test_a_killed_postgres_fails_its_strategy_only_and_resume_completes_the_run(
    ray_session: None, scenario: Path, tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    faulty = _run(tmp_path, scenario, "--out", str(runs), "--run-id", "faulty",
                  "--fault", "pg:kill@30%", strategies=STRATEGIES)  # fmt: skip
    assert faulty.exit_code == 0, faulty.output  # a failed strategy is a result
    entries = run_results.entries(runs / "faulty")
    assert entries["keep_all"]["status"] == "failed"
    assert "BackendUnavailable: long-term memory: PostgreSQL at" in entries["keep_all"]["error"]
    assert entries["typed_ttl"]["status"] == "ok"  # the worker's server was brought back
    kept = (runs / "faulty" / entries["typed_ttl"]["file"]).read_bytes()

    resumed = _run(tmp_path, scenario, "--resume", str(runs / "faulty"), strategies=STRATEGIES)
    assert resumed.exit_code == 0, resumed.output
    entries = run_results.entries(runs / "faulty")
    assert {s: e["status"] for s, e in entries.items()} == dict.fromkeys(STRATEGIES, "ok")
    assert (runs / "faulty" / entries["typed_ttl"]["file"]).read_bytes() == kept

    clean = _run(tmp_path, scenario, "--out", str(runs), "--run-id", "clean",
                 strategies=("keep_all",))  # fmt: skip
    assert clean.exit_code == 0, clean.output
    assert run_results.figures(runs / "faulty", "keep_all") == run_results.figures(
        runs / "clean", "keep_all"
    )


def test_a_paused_redis_fails_its_strategy_with_the_session_layers_error(
    ray_session: None, scenario: Path, tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    faulty = _run(tmp_path, scenario, "--out", str(runs), "--run-id", "paused",
                  "--fault", "redis:stop@50%", strategies=STRATEGIES)  # fmt: skip
    assert faulty.exit_code == 0, faulty.output
    entries = run_results.entries(runs / "paused")
    assert entries["keep_all"]["status"] == "failed"
    assert "BackendUnavailable: session: Redis at" in entries["keep_all"]["error"]
    assert "no reply in time" in entries["keep_all"]["error"]
    assert entries["typed_ttl"]["status"] == "ok"  # resumed: the next replay runs


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("chroma:kill@30%", "embedded in their own process"),
        ("pg:pause@30%", "pg|redis:kill|stop|restart"),
        ("worker:stop@30%", "worker:kill"),
        ("pg:kill@100%", "0 < P < 100"),
    ],
)
def test_a_server_fault_it_cannot_inject_is_refused_naming_the_option(text: str, why: str) -> None:
    with pytest.raises(SpecError, match="--fault") as caught:
        parse_fault(text)
    assert why in str(caught.value)
    assert parse_fault("redis:restart@12.5%") == Fault("redis", "restart", 0.125)


def test_a_server_fault_needs_the_workers_own_embedded_server(tmp_path: Path) -> None:
    for args, env, why in [
        (["--backend", "memory"], {}, "memory backend has no server"),
        ([], {"MEMH_PG_URL": "postgresql://u:secret@db.example/x"}, "MEMH_PG_URL"),
    ]:
        result = CliRunner().invoke(main, [
            "run", "--strategy", "keep_all", "--fault", "pg:kill@30%", "--no-progress",
            "--out", str(tmp_path), *args,
        ], env={"MEMH_DATA_DIR": str(tmp_path / "data"), **env})  # fmt: skip
        assert result.exit_code == 2, result.output
        assert why in result.output and "secret" not in result.output
    assert not list(tmp_path.glob("*/results.json"))

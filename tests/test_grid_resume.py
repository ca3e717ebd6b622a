"""Parameter sweeps (`memharness run --grid`) and resumed runs (`--resume RUN_DIR`).

Grid parsing and the result writer's resume are tested without Ray; the commands run
once on the in-memory backends with the hashing embedder, one worker, on a two-user
scenario (long_gap), and the resume tests work on copies of that run's directory.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import ray
from click.testing import CliRunner, Result

from memharness.cli import main
from memharness.run_cmd import run_tag
from memharness.run_inputs import file_scenario
from memharness.sim.plan import SpecError, StrategySpec, parse_grid, plan_specs
from memharness.sim.results import RESUME_FIELDS, ResultWriter, ResumeError, spec_file_name
from memharness.sim.runner import StrategyOutcome
from reference.keys import Namespace

SCENARIO = Path(__file__).resolve().parents[1] / "scenarios" / "long_gap.yaml"
TTL_GRID = "fixed_ttl:ttl.default_s=3600,86400,604800"
TTL_LABELS = [f"fixed_ttl[ttl.default_s={v}]" for v in (3600, 86400, 604800)]


# ---------------------------------------------------------------------- grid parsing
def test_a_grid_is_the_product_of_its_keys_first_key_slowest() -> None:
    specs = parse_grid("importance:importance.base_s=86400,604800;importance.low_score=1,2.5")

    assert [s.label for s in specs] == [
        "importance[importance.base_s=86400,importance.low_score=1]",
        "importance[importance.base_s=86400,importance.low_score=2.5]",
        "importance[importance.base_s=604800,importance.low_score=1]",
        "importance[importance.base_s=604800,importance.low_score=2.5]",
    ]
    importance = specs[1].strategy.importance
    assert importance is not None
    assert (importance.base_s, importance.low_score) == (86400, 2.5)
    assert len({s.strategy.fingerprint() for s in specs}) == 4
    assert all(s.name == "importance" for s in specs)


def test_a_grid_point_is_the_strategy_spec_of_the_same_overrides() -> None:
    specs = parse_grid(f" {TTL_GRID} ; ")  # spaces and a trailing ';' are fine

    assert [s.label for s in specs] == TTL_LABELS
    alone = StrategySpec.parse("fixed_ttl:ttl.default_s=86400")
    assert specs[1].label == alone.label
    assert specs[1].strategy.fingerprint() == alone.strategy.fingerprint()


@pytest.mark.parametrize(
    ("text", "needles"),
    [
        ("fixed_ttl", ["expected NAME:key=v1,v2"]),
        ("fixed_ttl:", ["expected NAME:key=v1,v2"]),
        ("fixed_ttl:;", ["no key=v1,v2"]),
        ("no_such:ttl.default_s=1", ["no_such", "no strategy named"]),
        ("fixed_ttl:ttl.default_s", ["'ttl.default_s' is not key=v1,v2"]),
        ("fixed_ttl:ttl.default_s=1,,2", ["ttl.default_s", "empty value"]),
        ("fixed_ttl:ttl.default_s=1;ttl.default_s=2", ["'ttl.default_s' given twice"]),
        ("fixed_ttl:ttl.default_s=[1", ["ttl.default_s", "'[1' is not a YAML value"]),
        ("fixed_ttl:ttl.bogus=1,2", ["point ttl.bogus=1", "ttl.bogus", "unknown key 'bogus'"]),
        ("fixed_ttl:ttl.default_s=60,-5", ["point ttl.default_s=-5", "greater than 0"]),
        ("fixed_ttl:ttl.default_s=abc", ["ttl.default_s", "is not a duration"]),
    ],
)
def test_grid_errors_name_the_argument_and_the_field(text: str, needles: list[str]) -> None:
    with pytest.raises(SpecError) as info:
        parse_grid(text)

    message = str(info.value)
    assert message.startswith(f"--grid {text!r}: "), message
    for needle in needles:
        assert needle in message, message


def test_plan_specs_combines_strategies_and_grids_and_refuses_a_label_twice() -> None:
    assert [s.label for s in plan_specs([], [], ["keep_all", "hybrid"])] == ["keep_all", "hybrid"]
    combined = plan_specs(["keep_all"], [TTL_GRID], ["hybrid"])  # default only when neither
    assert [s.label for s in combined] == ["keep_all", *TTL_LABELS]
    with pytest.raises(SpecError, match=r"given twice \(also from --strategy"):
        plan_specs(["fixed_ttl:ttl.default_s=3600"], [TTL_GRID])
    with pytest.raises(SpecError, match=r"fixed_ttl\[ttl.default_s=60\] is given twice$"):
        plan_specs([], ["fixed_ttl:ttl.default_s=60,60.0"])  # the same point, spelt twice
    with pytest.raises(SpecError, match="given twice"):
        plan_specs([], [TTL_GRID, "fixed_ttl:ttl.default_s=86400"])


def test_run_refuses_bad_grids_before_starting(tmp_path: Path) -> None:
    for grid, needle in [
        (TTL_GRID, "is given twice"),
        ("fixed_ttl:ttl.bogus=1", "--grid 'fixed_ttl:ttl.bogus=1': point ttl.bogus=1: ttl.bogus"),
    ]:
        result = _run(tmp_path, "--strategy", "fixed_ttl:ttl.default_s=604800", "--grid", grid)
        assert result.exit_code == 2, result.output
        assert needle in result.output
    assert not (tmp_path / "runs").exists()


# ---------------------------------------------------------------------- writer (no Ray)
HEADER: dict[str, Any] = {
    "run_id": "w",
    "created_at": "2026-01-01T00:00:00Z",
    "backend": "memory",
    "embedder": "hashing",
    "workers": 1,
    "k": 5,
    "seed": 7,
    "idle_sweep_s": 21600.0,
    "sample_every_s": 86400.0,
}


def _ok(spec: StrategySpec) -> StrategyOutcome:
    figures = {"metrics": {"recall_at_k": 0.5}, "footprint": None, "latency_ms": None}
    return StrategyOutcome(spec, "ok", figures=figures)


def test_a_resumed_writer_keeps_complete_results_and_loses_nothing(tmp_path: Path) -> None:
    scenario = file_scenario(SCENARIO, None)
    done, broken, lost = (StrategySpec.parse(n) for n in ("keep_all", "hybrid", "fixed_ttl"))
    writer = ResultWriter(tmp_path / "run", HEADER)
    writer.start_scenario(scenario)
    writer.add(scenario, _ok(done))
    writer.add(scenario, StrategyOutcome(broken, "failed", "RuntimeError: boom"))
    writer.add(scenario, _ok(lost))
    writer.finish("failed")
    (tmp_path / "run" / spec_file_name(scenario, lost)).unlink()
    before = json.loads((tmp_path / "run" / "results.json").read_text())

    again = ResultWriter.resume(tmp_path / "run", {**HEADER, "workers": 3})
    again.start_scenario(scenario)
    assert again.reuse(scenario, done) == before["scenarios"][0]["strategies"][0]
    assert again.reuse(scenario, broken) is None  # failed: runs again
    assert again.reuse(scenario, lost) is None  # its file is gone: runs again
    again.finish("interrupted")  # ... and the resume stops before either is in

    after = json.loads((tmp_path / "run" / "results.json").read_text())
    assert after["scenarios"] == before["scenarios"]  # nothing earlier is lost
    assert after["status"] == "interrupted"
    assert after["resumes"][0]["status_before"] == "failed"
    assert after["resumes"][0]["workers"] == 3

    third = ResultWriter.resume(tmp_path / "run", HEADER)
    third.start_scenario(scenario)
    third.add(scenario, _ok(broken))  # replaces the failed entry, in place
    entries = third.document["scenarios"][0]["strategies"]
    assert [(e["label"], e["status"]) for e in entries] == [
        ("keep_all", "ok"),
        ("hybrid", "ok"),
        ("fixed_ttl", "ok"),
    ]
    assert len(third.document["scenarios"]) == 1


@pytest.mark.parametrize("field", RESUME_FIELDS)
def test_a_resume_with_other_settings_is_refused_naming_the_field(
    tmp_path: Path, field: str
) -> None:
    ResultWriter(tmp_path / "run", HEADER).finish("complete")
    before = (tmp_path / "run" / "results.json").read_bytes()
    changed = {**HEADER, field: "other" if isinstance(HEADER[field], str) else HEADER[field] + 1}

    with pytest.raises(ResumeError, match=f": {field} differs"):
        ResultWriter.resume(tmp_path / "run", changed)
    assert (tmp_path / "run" / "results.json").read_bytes() == before


def test_a_directory_without_results_cannot_be_resumed(tmp_path: Path) -> None:
    with pytest.raises(ResumeError, match="cannot read results file"):
        ResultWriter.resume(tmp_path, HEADER)


# ---------------------------------------------------------------------- runs (Ray)
def _run(tmp_path: Path, *args: str) -> Result:
    base = ["run", "--scenario", str(SCENARIO), "--backend", "memory", "--embedder", "hashing",
            "--workers", "1", "--no-progress"]  # fmt: skip
    where = [] if "--resume" in args else ["--out", str(tmp_path / "runs"), "--run-id", "grid"]
    return CliRunner().invoke(
        main, [*base, *where, *args], env={"MEMH_DATA_DIR": str(tmp_path / "data")}
    )


def _files(run_dir: Path) -> dict[str, tuple[bytes, int]]:
    """Each strategy file's bytes and modification time."""
    return {
        p.name: (p.read_bytes(), p.stat().st_mtime_ns)
        for p in run_dir.glob("*.json")
        if p.name != "results.json"
    }


def _labels(run_dir: Path) -> list[tuple[str, str]]:
    document = json.loads((run_dir / "results.json").read_text())
    return [(e["label"], e["status"]) for e in document["scenarios"][0]["strategies"]]


@pytest.fixture(scope="module")
def grid_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One run: keep_all and a three-point TTL grid on long_gap."""
    tmp = tmp_path_factory.mktemp("grid")
    result = _run(tmp, "--strategy", "keep_all", "--grid", TTL_GRID)
    assert result.exit_code == 0, result.output
    yield tmp / "runs" / "grid"
    ray.shutdown()


def test_a_grid_run_writes_a_result_file_per_point_and_the_plots(grid_run: Path) -> None:
    document = json.loads((grid_run / "results.json").read_text())
    assert document["status"] == "complete"
    entries = document["scenarios"][0]["strategies"]
    assert [e["label"] for e in entries] == ["keep_all", *TTL_LABELS]
    assert [e["params"] for e in entries[1:]] == [
        {"ttl.default_s": v} for v in (3600, 86400, 604800)
    ]
    assert len({e["fingerprint"] for e in entries}) == 4
    for entry in entries:
        assert entry["status"] == "ok"
        assert json.loads((grid_run / entry["file"]).read_text())["label"] == entry["label"]
    assert len(_files(grid_run)) == 4
    for kind in ("recall-vs-footprint", "stale-vs-recall", "footprint-over-time"):
        assert (grid_run / f"long_gap-{kind}.png").stat().st_size > 0
    summary = (grid_run / "summary.md").read_text()
    assert all(f"`{label}`" in summary for label in TTL_LABELS)


def _copy(grid_run: Path, tmp_path: Path) -> Path:
    run_dir = tmp_path / "grid"
    shutil.copytree(grid_run, run_dir)
    return run_dir


def test_a_resume_replays_only_the_missing_and_failed_results(
    grid_run: Path, tmp_path: Path
) -> None:
    run_dir = _copy(grid_run, tmp_path)
    document = json.loads((run_dir / "results.json").read_text())
    entries = document["scenarios"][0]["strategies"]
    missing, failed = entries[1]["file"], entries[3]["file"]
    (run_dir / missing).unlink()  # as if the run had stopped before it
    del entries[1]
    own = json.loads((run_dir / failed).read_text())
    own.update(status="failed", error="RuntimeError: boom", metrics=None)
    (run_dir / failed).write_text(json.dumps(own))
    entries[2].update(status="failed", error="RuntimeError: boom", metrics=None)
    document["status"] = "failed"
    (run_dir / "results.json").write_text(json.dumps(document))
    kept = {name: v for name, v in _files(run_dir).items() if name != failed}

    result = _run(tmp_path, "--strategy", "keep_all", "--grid", TTL_GRID, "--resume", str(run_dir))

    assert result.exit_code == 0, result.output
    assert "2 result(s) complete and kept, 2 to run" in result.output
    now = _files(run_dir)
    for name, before in kept.items():
        assert now[name] == before, name  # not rewritten: same bytes, same mtime
    assert json.loads(now[missing][0])["status"] == "ok"
    assert json.loads(now[failed][0])["status"] == "ok"
    assert set(now) == set(kept) | {missing, failed}
    final = json.loads((run_dir / "results.json").read_text())
    assert final["status"] == "complete"
    assert final["run_id"] == "grid"
    assert sorted(_labels(run_dir)) == sorted((label, "ok") for label in ["keep_all", *TTL_LABELS])
    assert final["resumes"][0]["status_before"] == "failed"
    assert "(kept)" in (run_dir / "details.txt").read_text()


def test_a_resume_with_nothing_left_replays_nothing_and_adds_a_new_point(
    grid_run: Path, tmp_path: Path
) -> None:
    run_dir = _copy(grid_run, tmp_path)
    before = _files(run_dir)

    same = _run(tmp_path, "--strategy", "keep_all", "--grid", TTL_GRID, "--resume", str(run_dir))
    assert same.exit_code == 0, same.output
    assert "4 result(s) complete and kept, 0 to run" in same.output
    assert _files(run_dir) == before

    # A narrower resume that adds a point: the earlier results stay, the point is added.
    wider = _run(
        tmp_path, "--grid", "fixed_ttl:ttl.default_s=3600,1209600", "--resume", str(run_dir)
    )
    assert wider.exit_code == 0, wider.output
    assert "1 result(s) complete and kept, 1 to run" in wider.output
    labels = [label for label, _ in _labels(run_dir)]
    assert labels == ["keep_all", *TTL_LABELS, "fixed_ttl[ttl.default_s=1209600]"]
    assert all(_files(run_dir)[name] == v for name, v in before.items())


def test_a_resume_with_another_k_is_refused_and_changes_nothing(
    grid_run: Path, tmp_path: Path
) -> None:
    run_dir = _copy(grid_run, tmp_path)
    before = (run_dir / "results.json").read_bytes()

    result = _run(tmp_path, "--strategy", "keep_all", "--k", "3", "--resume", str(run_dir))

    assert result.exit_code == 2
    assert "k differs (the run has 5, this command 3); pass --k 5" in result.output
    assert (run_dir / "results.json").read_bytes() == before
    named = _run(tmp_path, "--strategy", "keep_all", "--run-id", "x", "--resume", str(run_dir))
    assert named.exit_code == 2 and "drop --run-id" in named.output


@pytest.mark.parametrize("run_id", ["cap-sim-200", "My.Run", "---", "20261201T000000Z-a1b2c3"])
def test_any_run_id_gives_a_valid_namespace_prefix(run_id: str) -> None:
    tag = run_tag(run_id)
    Namespace(f"memh_{tag}_0_0_w0")  # raises InvalidInput on a bad prefix
    assert run_tag("20261201T000000Z-a1b2c3") == "b2c3"

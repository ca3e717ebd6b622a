"""`memharness compare` on two hand-written simulator runs: the quality figures first,
change in percent, the filters, the notice when the scenarios differ, and files only
with --out."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from memharness.cli import main


def _strategy(label: str, recall: float, over_forget: float, nbytes: int) -> dict[str, Any]:
    return {
        "label": label,
        "status": "ok",
        "metrics": {
            "recall_at_k": recall,
            "stale_at_k": 0.0,
            "over_forget_rate": over_forget,
            "unstored_rate": None,
            "leakage": 0,
            "pii_residency_max_s": 7200.0,
        },
        "footprint": {"peak": {"stm": {"records": 3, "bytes": nbytes}}},
        "latency_ms": {"turn": {"p50": 1.0, "p95": 2.0, "p99": 3.0, "n": 10}},
    }


def _write(run_dir: Path, hybrid_recall: float, scenario_hash: str = "aaa") -> Path:
    scenario = {
        "name": "drift",
        "hash": scenario_hash,
        "ceiling": {"recall_at_k": 0.9, "needed": 10, "found": 9},
        "strategies": [
            _strategy("hybrid", hybrid_recall, 0.1, 2048),
            _strategy("keep_all", 1.0, 0.0, 4096),
            _strategy("fixed_ttl[ttl.default_s=3600]", 0.5, 0.5, 1024),
        ],
    }
    run_dir.mkdir()
    document = {"run_id": run_dir.name, "status": "complete", "scenarios": [scenario]}
    (run_dir / "results.json").write_text(json.dumps(document))
    return run_dir


@pytest.fixture
def runs(tmp_path: Path) -> tuple[Path, Path]:
    return _write(tmp_path / "a", 0.8), _write(tmp_path / "b", 0.9)


def _compare(runs: tuple[Path, Path], *args: str) -> Result:
    return CliRunner().invoke(main, ["compare", str(runs[0]), str(runs[1]), *args])


def _files(*dirs: Path) -> set[Path]:
    return {p for d in dirs for p in d.rglob("*")}


def test_quality_figures_first_in_units_with_change_in_percent(runs: tuple[Path, Path]) -> None:
    result = _compare(runs)
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert out.index("quality, per scenario and strategy:") < out.index("other figures")
    quality = out[: out.index("other figures")]
    recall = next(line for line in quality.splitlines() if "hybrid" in line)
    assert recall.split()[-4:] == ["recall", "80.0%", "90.0%", "+12.5%"]
    assert "peak bytes" in quality and "4.0 KiB" in quality and "2.0 h" in quality
    assert "|" not in out and "`" not in out
    assert result.stderr == ""  # same scenarios: no notice


def test_nothing_is_written_without_out(runs: tuple[Path, Path], tmp_path: Path) -> None:
    before = _files(tmp_path)
    assert _compare(runs).exit_code == 0
    assert _files(tmp_path) == before
    target = tmp_path / "diff" / "drift.md"
    result = _compare(runs, "--out", str(target))
    assert result.exit_code == 0, result.output
    assert _files(tmp_path) - before == {target.parent, target, target.with_suffix(".csv")}
    assert "| recall_at_k |" in target.read_text()


def test_only_changed_drops_equal_and_empty_rows(runs: tuple[Path, Path]) -> None:
    every = _compare(runs)
    assert "rows equal or empty in both: --only-changed leaves them out" in every.stdout
    assert "unstored_rate" in every.stdout  # empty on both sides
    changed = _compare(runs, "--only-changed")
    assert changed.exit_code == 0, changed.output
    lines = [line for line in changed.stdout.splitlines() if "%" in line or "KiB" in line]
    assert len(lines) == 1 and "+12.5%" in lines[0]  # hybrid's recall, nothing else moved
    assert "unstored_rate" not in changed.stdout and "keep_all" not in changed.stdout


def test_figure_and_strategy_filters(runs: tuple[Path, Path]) -> None:
    result = _compare(runs, "--figure", "over-forget", "--figure", "p95")
    assert result.exit_code == 0, result.output
    assert "over-forget" in result.stdout and "turn.p95_ms" in result.stdout
    assert "recall" not in result.stdout and "p50" not in result.stdout
    grid = _compare(runs, "--strategy", "fixed_ttl", "--figure", "recall")
    assert "fixed_ttl[ttl.default_s=3600]" in grid.stdout
    assert "hybrid" not in grid.stdout and "keep_all" not in grid.stdout


def test_an_unknown_figure_or_strategy_lists_the_valid_ones(runs: tuple[Path, Path]) -> None:
    result = _compare(runs, "--figure", "bogus")
    assert result.exit_code != 0
    assert "--figure 'bogus' matches no figure; there are: " in result.output
    assert "recall_at_k" in result.output and "turn.p95_ms" in result.output
    result = _compare(runs, "--strategy", "hybri")
    assert result.exit_code != 0
    assert "--strategy 'hybri' is in neither run; there are: " in result.output
    assert "hybrid" in result.output


def test_a_notice_when_the_scenarios_differ(tmp_path: Path) -> None:
    a = _write(tmp_path / "a", 0.8, scenario_hash="aaa")
    b = _write(tmp_path / "b", 0.8, scenario_hash="bbb")
    result = _compare((a, b))
    assert result.exit_code == 0, result.output
    assert "notice: the runs' scenarios differ" in result.stderr
    assert "drift (hash aaa vs bbb)" in result.stderr
    assert "notice:" not in result.stdout


def test_load_runs_of_other_scenario_files_get_a_notice() -> None:
    from memharness.capacity.compare import scenario_notices

    a = {"scenario": {"file": "travel.yaml", "users": 100}}
    b = {"scenario": {"file": "travel.yaml", "users": 1000}}
    assert scenario_notices("load_hdr.json", a, a) == []
    assert scenario_notices("load_hdr.json", a, b) == [
        "the runs played different scenarios: A travel.yaml (100 users), B travel.yaml (1000 users)"
    ]
    assert "built-in conversations" in scenario_notices("steps.json", a, {"scenario": None})[0]

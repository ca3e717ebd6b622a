"""`memharness run`'s options and interruption, and `scenarios stats` on several files."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

import memharness.sim.simulator
from memharness.cli import main
from memharness.run_cmd import run

SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"


def test_every_run_option_has_help_and_says_its_default() -> None:
    options = [p for p in run.params if isinstance(p, click.Option) and p.name != "help"]
    assert len(options) >= 15
    for option in options:
        assert option.help, f"{option.opts[0]} has no help text"
        assert option.show_default or "[default:" in option.help, option.opts[0]
    shown = CliRunner().invoke(main, ["run", "--help"], terminal_width=200)
    assert shown.exit_code == 0
    assert shown.output.count("[default:") == len(options)


class _Interrupted:
    """A simulator the user interrupts (Ctrl-C) in its first replay."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.setup_s = {"workers": 0.0, "load": 0.0}  # the run's fixed costs, as Simulator's

    def __enter__(self) -> _Interrupted:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def run_scenario(self, *args: Any, **kwargs: Any) -> None:
        raise KeyboardInterrupt


def test_an_interrupted_run_prints_the_command_that_completes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(memharness.sim.simulator, "Simulator", _Interrupted)
    drift = str(SCENARIOS / "drift.yaml")
    args = ["run", "--scenario", drift, "--strategy", "keep_all", "--strategy",
            "fixed_ttl:ttl.default_s=1d", "--backend", "memory", "--embedder", "hashing",
            "--k", "3", "--out", str(tmp_path), "--run-id", "r1", "--no-progress"]  # fmt: skip
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 130, result.output
    run_dir = tmp_path / "r1"
    expected = shlex.join(
        ["memharness", "run", "--resume", str(run_dir), "--scenario", drift,
         "--strategy", "keep_all", "--strategy", "fixed_ttl:ttl.default_s=1d",
         "--backend", "memory", "--embedder", "hashing", "--k", "3"]
    )  # fmt: skip
    assert f"to complete the run:\n  {expected}\n" in result.output
    summary = (run_dir / "summary.md").read_text(encoding="utf-8")
    assert "- status: **interrupted**" in summary
    assert f"`memharness run --resume {run_dir}`" in summary
    assert "No strategy finished for this scenario: the run was interrupted." in summary
    assert "| strategy | status |" not in summary  # no empty table


def test_stats_takes_several_files_and_reports_a_bad_one(tmp_path: Path) -> None:
    runner = CliRunner()
    files = [str(SCENARIOS / "drift.yaml"), str(SCENARIOS / "long_gap.yaml")]
    result = runner.invoke(main, ["scenarios", "stats", *files])
    assert result.exit_code == 0, result.output
    assert "scenario           drift" in result.output
    assert "scenario           long_gap" in result.output
    assert f"file               {files[1]}" in result.output
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\nusers: []\n", encoding="utf-8")
    result = runner.invoke(main, ["scenarios", "stats", str(bad), files[0]])
    assert result.exit_code == 1
    assert f"{bad}:1: users: List should have at least 1 item" in result.output
    assert "scenario           drift" in result.output  # the good file is still described

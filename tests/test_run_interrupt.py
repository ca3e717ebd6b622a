"""Ctrl-C on a real `memharness run` (Ray workers, in-memory stores, hashing embedder):
SIGINT to the run's process group, as a terminal sends it, once the first scenario has
finished and the second replays. The run exits 130, keeps the first scenario's results
(their plots are drawn when the run is completed), says how to complete the run, and
leaves no process of its own behind. How fast it stops is bench/run_interrupt.py's to
measure, not this test's."""

from __future__ import annotations

import os
from pathlib import Path

from bench.run_interrupt import STRATEGIES, finished, generate, interrupt_run, results, run_args

SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"


def test_ctrl_c_keeps_the_finished_strategies_and_stops_everything(tmp_path: Path) -> None:
    env = {**os.environ, "MEMH_BACKEND": "memory", "MEMH_EMBEDDER": "hashing",
           "MEMH_DATA_DIR": str(tmp_path / "data")}  # fmt: skip
    travel = generate(tmp_path / "travel.yaml", 300, env)
    args = run_args([SCENARIOS / "drift.yaml", travel], tmp_path, "stop")
    stopped = interrupt_run(args, tmp_path / "stop", env, first=len(STRATEGIES), within_s=300)

    told = stopped.stdout + stopped.stderr
    assert stopped.returncode == 130, told
    assert "interrupted: the finished strategies are kept; to complete the run:" in told
    assert f"memharness run --resume {tmp_path / 'stop'}" in told
    document = results(tmp_path / "stop")
    assert document["status"] == "interrupted"
    kept = finished(document, 0)
    assert kept == list(STRATEGIES)  # the first scenario: every strategy, in order
    first = document["scenarios"][0]["strategies"]  # type: ignore[index]
    assert all((tmp_path / "stop" / entry["file"]).is_file() for entry in first)
    assert len(finished(document, 1)) < len(STRATEGIES)  # the second did not complete
    summary = (tmp_path / "stop" / "summary.md").read_text(encoding="utf-8")
    assert "Plots: drawn when the run is completed" in summary  # none drawn on the way out
    assert not list((tmp_path / "stop").glob("*.png"))
    # Nothing the run started outlives it (Ray's processes, the workers).
    assert stopped.group_gone_s is not None, "processes of the run were left running"

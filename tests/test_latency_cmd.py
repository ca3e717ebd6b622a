"""`memharness latency`: timings per operation, then SLA verdicts and where the details are."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from memharness.cli import main
from memharness.latency import OpStats, verdicts


def test_the_quick_probe_ends_with_verdicts_and_the_details_file(tmp_path: Path) -> None:
    out = tmp_path / "lat.json"
    args = ["latency", "--calls", "10", "--ltm-rows", "20", "--backend", "memory",
            "--embedder", "hashing", "--out", str(out)]  # fmt: skip
    result = CliRunner().invoke(main, args, env={"MEMH_DATA_DIR": str(tmp_path / "data")})
    assert "SLA verdicts" in result.output and f"details: {out}" in result.output
    document = json.loads(out.read_text())
    assert {v["layer"] for v in document["verdicts"]} == {"session", "stm", "ltm"}
    # Timings vary with the machine: the exit code follows the verdicts, whatever they are.
    held = all(v["held"] for v in document["verdicts"])
    assert result.exit_code == (0 if held else 1), result.output
    assert len(document["operations"]) == 6


def test_a_layer_is_judged_on_its_slowest_operation() -> None:
    stats = [OpStats("stm.add", 10, 1.0, 20.0, 30.0), OpStats("stm.query", 10, 5.0, 60.0, 70.0),
             OpStats("session.get", 10, 0.1, 0.2, 0.3)]  # fmt: skip
    judged = {layer: (p95, held, op) for layer, p95, _, op, held in verdicts(stats)}
    assert judged["stm"] == (60.0, False, "stm.query")
    assert judged["session"] == (0.2, True, "session.get")
    assert "ltm" not in judged

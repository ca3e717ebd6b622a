"""`memharness report RUN...`: the strategy comparison page from result files built here
from the file contracts (simulator results.json, load steps.json / load_hdr.json /
load_strategies.json, capacity.json)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from memharness.cli import main
from memharness.comparison.page import NOT_MEASURED

#: strategy -> (recall, stale, peak bytes per user)
QUALITY = {
    "hybrid": (0.80, 0.05, 4_000),
    "typed_ttl": (0.70, 0.04, 2_000),
    "keep_all": (0.78, 0.20, 9_000),  # less recall than hybrid for more bytes: off the frontier
}


#: strategy -> its PII figures: sealed for an hour; masked and never sealed; one item
#: still in plaintext when the run ended.
PII = {
    "hybrid": {"pii_items": 2, "pii_raw_max_s": 0.0, "pii_sealed_items": 2,
               "pii_sealed_max_s": 3600.0},
    "typed_ttl": {"pii_items": 2, "pii_raw_max_s": None, "pii_raw_at_end": 1,
                  "pii_sealed_items": 0, "pii_sealed_max_s": None},
    "keep_all": {"pii_items": 2, "pii_raw_max_s": 0.0, "pii_sealed_items": 0,
                 "pii_sealed_max_s": None},
}  # fmt: skip


def write_sim(run_dir: Path, users: int = 100) -> Path:
    strategies = []
    for label, (recall, stale, per_user) in QUALITY.items():
        metrics = {"recall_at_k": recall, "stale_at_k": stale, "over_forget_rate": 0.01,
                   "leakage": 0, **PII[label]}  # fmt: skip
        peak = {"session": {"records": 1, "bytes": 0}, "stm": {"records": 1, "bytes": 0},
                "ltm": {"records": 1, "bytes": per_user * users}}  # fmt: skip
        strategies.append({"label": label, "status": "ok", "metrics": metrics,
                           "footprint": {"peak": peak, "series": []}})  # fmt: skip
    strategies.append({"label": "oracle", "status": "failed", "error": "boom"})
    run_dir.mkdir(parents=True)
    scenario = {"name": "gen", "users": users, "turns": users * 5, "strategies": strategies}
    (run_dir / "results.json").write_text(json.dumps({"run_id": run_dir.name,
                                                      "scenarios": [scenario]}))  # fmt: skip
    return run_dir


def _ops(scale: float) -> dict[str, Any]:
    layers = {"session": 1.0, "stm": 20.0, "ltm": 5.0, "embed": 8.0, "turn": 40.0}
    return {op: {"count": 100, "p95_ms": ms * scale} for op, ms in layers.items()}


def write_steps(
    run_dir: Path, strategy: str | None, *, held: tuple[bool, ...] = (True, True, False)
) -> Path:
    steps = [
        {"step": k, "offered_rate": rate, "sla_held": ok, "ops": _ops(1.0 + k)}
        for k, (rate, ok) in enumerate(zip((5.0, 10.0, 20.0), held, strict=True))
    ]
    document: dict[str, Any] = {"kind": "step-load", "steps": steps}
    if strategy is not None:
        document.update({
            "strategy": strategy, "strategy_fingerprint": "fp", "time_scale": None,
            "maintenance": {"kind": "maintenance", "event_lag_ms": {"p95": 35.0}},
            "cpu_s_per_turn": {"load": 0.04, "maintenance": 0.0025, "redis": 0.001,
                               "postgres": 0.002, "chroma": 0.0},
        })  # fmt: skip
    run_dir.mkdir(parents=True)
    (run_dir / "steps.json").write_text(json.dumps(document))
    return run_dir


def write_capacity(run_dir: Path, costs: dict[str, float], currency: str = "EUR") -> Path:
    answer = [{"strategy": s, "instances": 3, "monthly_cost": c} for s, c in costs.items()]
    document = {"kind": "capacity-plan", "currency": currency,
                "target": {"users": 50_000, "strategy": "hybrid"}, "answer": answer}  # fmt: skip
    run_dir.mkdir(parents=True)
    (run_dir / "capacity.json").write_text(json.dumps(document))
    return run_dir


def _report(*args: str) -> Any:
    return CliRunner().invoke(main, ["report", *args])


def test_the_page_joins_every_kind_of_run_per_strategy(tmp_path: Path) -> None:
    sim = write_sim(tmp_path / "sim")
    load_h = write_steps(tmp_path / "load-h", "hybrid")
    load_old = write_steps(tmp_path / "load-old", None)
    plan = write_capacity(tmp_path / "plan", {"hybrid": 900.0, "typed_ttl": 700.0,
                                              "keep_all": 1500.0})  # fmt: skip
    out = tmp_path / "page"
    result = _report(str(sim), str(load_h), str(load_old), str(plan), "--out", str(out))
    assert result.exit_code == 0, result.output
    document = json.loads((out / "report.json").read_text())
    rows = {row["strategy"]: row for row in document["strategies"]}
    assert set(rows) == {"hybrid", "typed_ttl", "keep_all", "store_defaults"}
    hybrid = rows["hybrid"]
    assert hybrid["recall_at_k"] == 0.80 and hybrid["bytes_per_user"] == 4_000
    # p95 per layer at the highest rate whose step held every SLA (step 1, 10/s).
    assert hybrid["sustainable_rate"] == 10.0 and hybrid["p95_at_rate"] == 10.0
    assert hybrid["p95_stm_ms"] == 40.0 and hybrid["p95_turn_ms"] == 80.0
    assert hybrid["maintenance_cpu_ms_per_turn"] == pytest.approx(2.5)
    assert hybrid["event_lag_p95_ms"] == 35.0 and hybrid["monthly_cost"] == 900.0
    # PII: a time, what an infinity stands for, never "not measured" for those.
    assert hybrid["pii_sealed_max_s"] == 3600.0 and hybrid["pii_raw_max_s"] == 0.0
    assert rows["keep_all"]["pii_sealed_max_s"] == "never sealed"
    assert rows["typed_ttl"]["pii_raw_max_s"] == "to the end of the run"
    # Not measured stays missing, never zero.
    assert rows["typed_ttl"]["p95_turn_ms"] is None
    assert rows["store_defaults"]["recall_at_k"] is None
    assert any("records no strategy" in note for note in document["notes"])
    # The frontier: recall against monthly cost (three strategies have one).
    assert document["frontier_axis"] == "monthly_cost"
    assert document["frontier"] == ["typed_ttl", "hybrid"]
    first = document["summary"][0]
    assert first.startswith("On the frontier of recall against monthly cost")
    assert "typed_ttl (recall 0.700, 700 EUR/month)" in first and "hybrid" in first
    assert any(
        line.startswith("keep_all is off it: hybrid has more recall (0.800 vs 0.780)")
        for line in document["summary"]
    )
    page = (out / "report.html").read_text()
    assert page.index("id='answer'") < page.index("id='quality'") < page.index("id='load'")
    assert NOT_MEASURED in page and "monthly cost (EUR)" in page
    assert "never sealed" in page and "to the end of the run" in page and "1.0 h" in page
    # A value in plaintext past 24 h, whatever the expiry: the strategy breaks the deadline.
    assert document["privacy_deadline_broken"] == ["typed_ttl"]
    assert any(
        line.startswith("Breaking the 24.0 h privacy deadline") and line.endswith(": typed_ttl.")
        for line in document["summary"]
    )
    assert "to the end of the run (breaks the 24 h privacy deadline)" in page
    assert page.count("<img ") == 2 and "http" not in page.replace("http-equiv", "")


def test_without_costs_the_frontier_is_against_bytes_per_user(tmp_path: Path) -> None:
    sim = write_sim(tmp_path / "sim")
    out = tmp_path / "page"
    result = _report(str(sim), "--out", str(out))
    assert result.exit_code == 0, result.output
    document = json.loads((out / "report.json").read_text())
    assert document["frontier_axis"] == "bytes_per_user"
    assert document["frontier"] == ["typed_ttl", "hybrid"]  # keep_all: more bytes, less recall
    rows = {row["strategy"]: row for row in document["strategies"]}
    assert rows["hybrid"]["monthly_cost"] is None and rows["hybrid"]["p95_turn_ms"] is None
    page = (out / "report.html").read_text()
    assert page.count(NOT_MEASURED) >= 3 * 9  # the load and capacity figures of each strategy


def test_a_multi_strategy_load_listing_reads_each_run(tmp_path: Path) -> None:
    write_steps(tmp_path / "grid-hybrid", "hybrid")
    listing = {"kind": "load_strategies", "runs": [
        {"strategy": "hybrid", "dir": "grid-hybrid"},
        {"strategy": "typed_ttl", "dir": "grid-typed_ttl", "p95_ms": {"turn": 55.0},
         "sustainable_rate": 12.0, "maintenance": {"event_lag_ms": {"p95": 9.0}}},
    ]}  # fmt: skip
    (tmp_path / "grid").mkdir()
    (tmp_path / "grid" / "load_strategies.json").write_text(json.dumps(listing))
    out = tmp_path / "page"
    result = _report(str(tmp_path / "grid"), "--out", str(out))
    assert result.exit_code == 0, result.output
    rows = {r["strategy"]: r for r in json.loads((out / "report.json").read_text())["strategies"]}
    assert rows["hybrid"]["sustainable_rate"] == 10.0  # read from its own steps.json
    typed = rows["typed_ttl"]  # its directory is absent: the listing's headline figures
    assert typed["p95_turn_ms"] == 55.0 and typed["sustainable_rate"] == 12.0
    assert typed["event_lag_p95_ms"] == 9.0 and typed["p95_stm_ms"] is None


def test_a_directory_that_is_not_a_run_is_refused(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    result = _report(str(empty), "--out", str(tmp_path / "page"))
    assert result.exit_code != 0
    assert f"{empty}: not a run (none of capacity.json" in result.output
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "results.json").write_text("{not json")
    result = _report(str(broken), "--out", str(tmp_path / "page"))
    assert result.exit_code != 0 and f"{broken / 'results.json'}: cannot be read" in result.output
    assert not (tmp_path / "page").exists()


def test_a_failed_page_leaves_the_earlier_one_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sim = write_sim(tmp_path / "sim")
    out = tmp_path / "page"
    assert _report(str(sim), "--out", str(out)).exit_code == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    import memharness.comparison.page as page

    def broken(*_: Any) -> str:
        raise RuntimeError("plot failed")

    monkeypatch.setattr(page, "_html", broken)
    failed = _report(str(sim), str(write_steps(tmp_path / "l", "hybrid")), "--out", str(out))
    assert failed.exit_code != 0 and isinstance(failed.exception, RuntimeError)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_every_command_imports_outside_the_checkout(tmp_path: Path) -> None:
    """`loadtests` lives in the checkout, not in the installed package: a command module
    that imports it at load time fails for a user who runs `memharness report` from
    another directory (it did, with ModuleNotFoundError)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    code = "import memharness.cli, memharness.comparison.inputs, memharness.comparison.page"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr


def test_pii_over_several_scenarios_is_the_longest_not_the_mean(tmp_path: Path) -> None:
    def entry(**pii: Any) -> dict[str, Any]:
        return {"label": "hybrid", "status": "ok", "metrics": {"recall_at_k": 0.5, **pii},
                "footprint": {"peak": {}, "series": []}}  # fmt: skip

    scenarios = [
        {"name": "a", "users": 1, "strategies": [entry(
            pii_items=1, pii_raw_max_s=0.0, pii_sealed_items=1, pii_sealed_max_s=7200.0)]},
        {"name": "b", "users": 1, "strategies": [entry(
            pii_items=1, pii_raw_max_s=60.0, pii_sealed_items=0, pii_sealed_max_s=None)]},
        {"name": "c", "users": 1, "strategies": [entry(pii_items=0)]},  # nothing to measure
    ]  # fmt: skip
    run = tmp_path / "sim"
    run.mkdir()
    (run / "results.json").write_text(json.dumps({"run_id": "s", "scenarios": scenarios}))
    out = tmp_path / "page"
    result = _report(str(run), "--out", str(out))
    assert result.exit_code == 0, result.output
    row = json.loads((out / "report.json").read_text())["strategies"][0]
    assert row["pii_raw_max_s"] == 60.0 and row["pii_sealed_max_s"] == 7200.0

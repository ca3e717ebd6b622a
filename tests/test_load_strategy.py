"""`memharness load --strategy`: the load under strategies, scenario timelines, a scaled clock.

The errors are checked without running anything. The real runs start Locust (and, on
the embedded servers, the maintenance process and a Chroma server) as subprocesses:
the in-memory backend with the hashing embedder where the test is about plumbing, and
one run on the embedded servers with the maintenance process beside the load.
"""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from memharness.load_cmd import load
from memharness.scenarios import load_scenario
from memharness.scenarios.model import EventStep, ForgetStep, ProbeStep, SayStep
from reference.policy.loading import load_strategy

CONTRACT_KEYS = ("strategy", "strategy_fingerprint", "time_scale", "maintenance", "cpu_s_per_turn")
ROLES = {"load", "maintenance", "redis", "postgres", "chroma"}
KIND = {SayStep: "say", ForgetStep: "forget", ProbeStep: "probe", EventStep: "event"}


def _load(tmp_path: Path, run_id: str, *args: str, env: dict[str, str] | None = None) -> Any:
    return CliRunner().invoke(
        load,
        ["--out", str(tmp_path), "--run-id", run_id, *args],
        catch_exceptions=False,
        env=env,
    )


# --------------------------------------------------------------------------- errors
@pytest.mark.parametrize(
    ("args", "named", "also"),
    [
        (["--strategy", "hybird"], "--strategy", ["hybrid", "keep_all", "did you mean"]),
        (["--grid", "hybird:ttl.default_s=1,2"], "--grid", ["did you mean 'hybrid'"]),
        (["--grid", "fixed_ttl:ttl.default_s"], "--grid", ["key=v1,v2"]),
        (["--strategy", "fixed_ttl:ttl.nonsense=3"], "--strategy", ["nonsense"]),
        (["--strategy", "oracle"], "--strategy", ["oracle"]),
        (["--strategy", "hybrid", "--time-scale", "0"], "--time-scale", ["> 0"]),
        (["--strategy", "hybrid", "--time-scale", "-2"], "--time-scale", ["> 0"]),
        (["--strategy", "hybrid", "--overload"], "--overload", []),
    ],
)
def test_errors_name_the_option_before_anything_runs(
    tmp_path: Path, args: list[str], named: str, also: list[str]
) -> None:
    result = _load(tmp_path, "bad", "--backend", "memory", *args)
    assert result.exit_code == 2, result.output
    assert named in result.output
    for text in also:
        assert text in result.output
    assert not (tmp_path / "bad").exists()  # nothing ran, nothing was written


def test_a_scenario_that_does_not_load_is_named_with_its_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "name: bad\nusers:\n  - id: u1\n    timeline:\n"
        '      - {at: "2024-01-01T00:00:00Z", session: s1, say: hi}\n'
        '      - {at: "2024-01-01T00:01:00Z", session: s1, shout: hi}\n',
        encoding="utf-8",
    )
    result = _load(
        tmp_path, "bad", "--backend", "memory", "--strategy", "hybrid", "--scenario", str(bad)
    )
    assert result.exit_code == 2, result.output
    assert "--scenario" in result.output and "bad.yaml" in result.output
    assert ":6" in result.output or "line 6" in result.output
    assert not (tmp_path / "bad").exists()


# --------------------------------------------------------------------------- memory runs
def _report(run_dir: Path) -> dict[str, Any]:
    return json.loads((run_dir / "load_hdr.json").read_text(encoding="utf-8"))


def _played_kinds(report: dict[str, Any]) -> Counter[str]:
    """What the plays recorded in the report say was played, step by step, from the file."""
    scenario = load_scenario(report["scenario"]["file"])
    timelines = {user.id: user.timeline for user in scenario.users}
    kinds: Counter[str] = Counter()
    for _memory_user, scenario_user, played in report["scenario"]["plays"]:
        kinds.update(KIND[type(step)] for step in timelines[scenario_user][:played])
    return kinds


def test_strategies_on_a_scaled_clock_write_the_contract_and_expire(tmp_path: Path) -> None:
    """Two strategies, one load each on the same seed, 3 virtual days each: every run
    has the contract's keys and per-day figures; under a one-day TTL the live records
    stop growing, under keep_all they do not."""
    result = _load(
        tmp_path,
        "mem",
        *("--backend", "memory", "--embedder", "hashing"),
        *("--strategy", "keep_all", "--strategy", "fixed_ttl:ttl.default_s=86400"),
        *("--domain", "ecommerce", "--scenario-users", "20", "--seed", "3"),
        *("--users", "3", "--duration", "6s", "--time-scale", "43200"),
        *("--", "--think-time", "0,0.04"),
    )
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "mem" / "load_strategies.json").read_text())
    assert summary["kind"] == "load_strategies"
    labels = [row["strategy"] for row in summary["runs"]]
    assert labels == ["keep_all", "fixed_ttl[ttl.default_s=86400]"]
    days: dict[str, list[dict[str, Any]]] = {}
    for row in summary["runs"]:
        assert row["status"] == "ok" and row["maintenance"] is None  # no process shares memory
        assert row["sustainable_rate"] is None  # a fixed load, no rate steps
        assert {"session", "stm", "ltm", "turn", "recall"} <= set(row["p95_ms"])
        run_dir = Path(row["dir"])
        assert run_dir.parent == tmp_path and run_dir.name.startswith("mem-")
        report = _report(run_dir)
        for key in CONTRACT_KEYS:
            assert key in report
        assert report["strategy"] == row["strategy"]
        assert report["time_scale"] == 43200
        assert set(report["cpu_s_per_turn"]) == ROLES
        assert report["cpu_s_per_turn"]["load"] > 0
        assert report["cpu_s_per_turn"]["redis"] == 0.0  # the in-memory backend has none
        # facts, questions, events and forget commands in the scenario's proportions:
        # exactly what the timelines hold up to where each play got
        played = report["scenario"]["played"]
        kinds = _played_kinds(report)
        assert {k: played.get(k, 0) for k in kinds} == dict(kinds)
        assert kinds["probe"] and kinds["event"] and kinds["forget"]
        assert report["ops"]["recall"]["count"] == kinds["probe"]
        assert report["ops"]["event"]["count"] == kinds["event"]
        assert (run_dir / "virtual_days.png").stat().st_size > 0
        days[row["strategy"]] = report["virtual_days"]
    fingerprint = load_strategy("fixed_ttl").with_params({"ttl.default_s": 86400}).fingerprint()
    assert summary["runs"][1]["strategy_fingerprint"] == fingerprint
    compact = summary["runs"][0]["virtual_days"]
    assert [d["day"] for d in compact] == [d["day"] for d in days["keep_all"]]
    keep = [d["records"]["stm"] for d in days["keep_all"] if d["records"]]
    ttl = [d["records"]["stm"] for d in days["fixed_ttl[ttl.default_s=86400]"] if d["records"]]
    assert len(keep) >= 3 and len(ttl) >= 3
    assert keep == sorted(keep) and keep[-1] > 2 * keep[0]  # keep_all only grows
    assert ttl[-1] < keep[-1] / 2  # a day's TTL: records expire as the days pass
    assert ttl[-1] <= 1.5 * max(ttl[:2])  # ... and the count levels off after a day
    for entry in days["keep_all"]:
        if entry["ops"].get("turn"):
            assert entry["ops"]["turn"]["p95_ms"] > 0


def test_a_failing_strategy_leaves_the_earlier_results(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The second strategy's Locust process dies without a report: the first strategy's
    run and its row stay, the second is recorded as failed, the exit code says so."""
    import memharness.load_strategies as orchestration

    real_run = subprocess.run
    calls: list[list[str]] = []

    def run(command: list[str], **kwargs: Any) -> Any:
        calls.append(command)
        if len(calls) == 2:  # the second strategy's Locust: killed before it reports
            return subprocess.CompletedProcess(command, -9)
        return real_run(command, **kwargs)

    monkeypatch.setattr(orchestration.subprocess, "run", run)
    result = _load(
        tmp_path,
        "fail",
        *("--backend", "memory", "--embedder", "hashing"),
        *("--strategy", "keep_all", "--strategy", "typed_ttl", "--scenario-users", "8"),
        *("--users", "2", "--duration", "2s", "--", "--think-time", "0,0.05"),
    )
    summary = json.loads((tmp_path / "fail" / "load_strategies.json").read_text())
    first, second = summary["runs"]
    assert result.exit_code != 0
    assert first["status"] == "ok" and (Path(first["dir"]) / "load_hdr.json").is_file()
    assert _report(Path(first["dir"]))["strategy"] == "keep_all"
    assert second["status"] == "failed" and "load_hdr.json" in second["error"]
    assert "typed_ttl" in result.output and "FAILED" in result.output


# --------------------------------------------------------------------------- embedded run
SCENARIO = """\
name: forget-and-event
users:
  - id: company
    timeline:
      - {at: "2024-01-01T09:00:00Z", session: s1, say: "My company is Acme Widgets."}
      - {at: "2024-01-01T09:01:00Z", session: s1, forget: "forget my company"}
      - {at: "2024-01-01T09:02:00Z", session: s1, probe: "What is my company?"}
  - id: order
    timeline:
      - {at: "2024-01-01T09:00:00Z", session: s1, metadata: {order_id: A100001},
         say: "For order A100001, I always prefer gift wrapping."}
      - {at: "2024-01-01T09:05:00Z", event: order_completed, payload: {order_id: A100001}}
      - {at: "2024-01-01T09:06:00Z", session: s2, probe: "How should order A100001 be handled?"}
"""


def test_hybrid_beside_its_maintenance_process_on_the_embedded_servers(tmp_path: Path) -> None:
    """hybrid on the embedded servers (Redis, PostgreSQL, a Chroma server) with the
    maintenance process beside the load: the events the load publishes are applied by
    that process (its figures count them, and the memory no longer holds the order's
    preference), and every forget command that ran removed the company from every layer."""
    from reference.factory import build_memory_system
    from reference.ltm.filters import LtmFilter
    from reference.settings import Settings
    from reference.stm.chroma_server import start_chroma_server
    from reference.stm.filters import StmFilter

    scenario = tmp_path / "forget_event.yaml"
    scenario.write_text(SCENARIO, encoding="utf-8")
    data = tmp_path / "data"
    env = {"MEMH_DATA_DIR": str(data), "MEMH_EMBEDDER": "hashing", "MEMH_PREFIX": "lst"}
    for name in ("MEMH_REDIS_URL", "MEMH_PG_URL", "MEMH_CHROMA_URL", "MEMH_BACKEND"):
        env[name] = ""  # type: ignore[assignment]  # unset: the embedded servers
    result = _load(
        tmp_path,
        "emb",
        *("--strategy", "hybrid", "--scenario", str(scenario), "--users", "2"),
        *("--duration", "8s", "--sla", "session=2000,stm=2000,ltm=2000,turn=5000"),
        *("--", "--think-time", "0.05,0.15", "--keep-data"),
        env={k: (v or None) for k, v in env.items()},  # type: ignore[misc]
    )
    assert result.exit_code == 0, result.output
    (row,) = json.loads((tmp_path / "emb" / "load_strategies.json").read_text())["runs"]
    report = _report(Path(row["dir"]))
    figures = report["maintenance"]
    assert figures["kind"] == "maintenance" and figures["strategy"] == "hybrid"
    assert figures == json.loads((Path(row["dir"]) / "maintenance.json").read_text())
    published = report["scenario"]["played"].get("event", 0)
    assert published >= 1 and figures["events_applied"] >= 1
    assert figures["events_applied"] <= published and figures["errors"] == 0
    cpu = report["cpu_s_per_turn"]
    assert all(cpu[role] is not None for role in ROLES), cpu  # every process measured
    assert row["maintenance"]["events_applied"] == figures["events_applied"]

    # The memory as the servers hold it after the run (a fresh client, reads only).
    with start_chroma_server(data / "chroma-server") as chroma:
        settings = Settings(
            data_dir=data, prefix=row["namespace"], chroma_url=chroma.url, embedder="hashing"
        )
        system = build_memory_system(settings)
        try:
            still_ordered, forgot = 0, 0
            for memory_user, scenario_user, played in report["scenario"]["plays"]:
                texts = [r.text for r in system.stm.records(filter=StmFilter(user_id=memory_user))]
                texts += [f.text for f in system.ltm.facts(filter=LtmFilter(user_id=memory_user))]
                if scenario_user == "company" and played >= 2:  # the forget command ran
                    forgot += 1
                    assert not [t for t in texts if "Acme" in t], (memory_user, texts)
                if scenario_user == "order" and played >= 2:  # its event was published
                    still_ordered += any("A100001" in t for t in texts)
        finally:
            system.dispose()
    assert forgot >= 1
    # every applied event removed its order's preference; only unapplied ones may remain
    assert still_ordered <= published - figures["events_applied"]

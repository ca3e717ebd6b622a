"""Monitoring figures (R16 in docs/requirements.md): growth per type per day, lifetime
per type, cleanup success and duration, retrieval hit rate; alert thresholds a strategy sets; the
reference's counters in Prometheus' text format.

The replays run one shard in process on the in-memory backends with the hashing
embedder (`tests/fixtures/replay.py`), swept as `memharness run` sweeps.
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from pydantic import SecretStr

from memharness.monitoring_tables import monitoring_markdown, monitoring_terminal
from memharness.scenarios import parse_scenario
from memharness.sim.metrics import merge
from memharness.sim.plan import (
    IDLE_SWEEP_S,
    ScenarioInput,
    StrategySpec,
    scenario_hash,
    sweep_ticks,
)
from memharness.sim.results import ResultWriter
from memharness.sim.runner import StrategyOutcome
from reference.clock import VirtualClock
from reference.crypto import generate_key
from reference.factory import build_memory_system
from reference.keys import Namespace
from reference.maintenance.figures import MaintenanceFigures, MetricsServer
from reference.monitoring import MemoryCounters, exposition
from reference.policy.alerts import AlertRule, raised
from reference.policy.loading import load_strategy, parse_strategy
from reference.policy.strategy import Strategy, StrategyError
from reference.settings import Settings
from tests.fixtures.replay import replay_scenario

DAY = 86_400.0
HOUR = 3600.0
# Day 0: two statements and a probe 10 minutes later; day 1: a statement, two probes of
# day 0's facts, and a forget command for day 1's.
SCRIPT = """
name: monitored
users:
  - id: ann
    timeline:
      - {at: 0, session: s1, say: "I booked a table at Luigi's for Friday evening.",
         facts: [{id: table, type: fact}]}
      - {at: 60, session: s1, say: "My favourite colour is green.",
         facts: [{id: colour, type: preference}]}
      - {at: 600, session: s1, probe: Where did I book a table?, needed: [table]}
      - {at: 90000, session: s2, say: "I booked a flight to Rome for May.",
         facts: [{id: flight, type: fact}]}
      - {at: 90100, session: s2, probe: What is my favourite colour?, needed: [colour]}
      - {at: 90200, session: s2, probe: Where did I book a table?, needed: [table]}
      - {at: 90300, session: s2, forget: forget my flight, facts: [flight]}
"""
TIMES = [0, 60, 600, 90000, 90100, 90200, 90300]
ONE_HOUR = (
    "name: one_hour\ndescription: an hour for everything\nsweep_interval_s: 600\n"
    "ttl:\n  default_s: 3600\n"
)


def _figures(tmp: Path, strategy: Strategy, script: str = SCRIPT) -> dict[str, Any]:
    return merge([replay_scenario(tmp, script, strategy, prefix="mon")])


def _ticks(strategy: Strategy) -> list[float]:
    interval = strategy.sweep_interval_s
    return sweep_ticks([float(t) for t in TIMES], interval, max(interval, IDLE_SWEEP_S))


def _first_tick(ticks: list[float], at: float) -> float:
    return min(t for t in ticks if t >= at)


# ---------------------------------------------------------------------- the figures
def test_figures_are_what_the_script_implies(tmp_path: Path) -> None:
    strategy = parse_strategy(ONE_HOUR, source="test")
    monitoring = _figures(tmp_path, strategy)["monitoring"]
    ticks = _ticks(strategy)
    # Growth: the reference types each statement as the script does (no statement here
    # is promoted to LTM); day 0 holds table and colour, day 1 the flight.
    assert monitoring["growth"]["days"] == [0.0, DAY]
    assert monitoring["growth"]["per_day"] == {"fact": [1, 1], "preference": [1, 0]}
    assert monitoring["growth"]["max_per_day"] == {"fact": 1, "preference": 1}
    # Lifetime: table and colour expire an hour after they were said and end at the
    # first sweep after that; the flight ends with its forget command 300 s after.
    table = _first_tick(ticks, 0 + HOUR) - 0
    colour = _first_tick(ticks, 60 + HOUR) - 60
    lifetime = monitoring["lifetime"]
    assert lifetime["fact"] == {"ended": 2, "mean_s": (table + 300) / 2, "open_at_end": 0}
    assert lifetime["preference"] == {"ended": 1, "mean_s": colour, "open_at_end": 0}
    # Cleanup: every tick's sweep and the forget command completed.
    cleanup = monitoring["cleanup"]
    assert (cleanup["sweeps"], cleanup["forgets"]) == (len(ticks), 1)
    assert (cleanup["sweeps_failed"], cleanup["forgets_failed"]) == (0, 0)
    assert cleanup["success_rate"] == 1.0
    assert 0 < cleanup["mean_s"] <= cleanup["max_s"] <= cleanup["total_s"]
    # Hit rate: only the probe 10 minutes in found its fact (the others came after the
    # hour); recall@k is the same here, one needed fact per probe.
    assert monitoring["retrieval"] == {"probes": 3, "hits": 1, "hit_rate": 1 / 3}


def test_what_stays_is_open_at_end_and_every_probe_hits(tmp_path: Path) -> None:
    monitoring = _figures(tmp_path, load_strategy("keep_all"))["monitoring"]
    assert monitoring["retrieval"] == {"probes": 3, "hits": 3, "hit_rate": 1.0}
    # keep_all consolidates: when session s1 ends (day 0) its two records become LTM
    # episodes, which nothing removes; the flight's record ends with its forget command.
    assert monitoring["growth"]["per_day"]["episode"] == [2, 0]
    lifetime = monitoring["lifetime"]
    assert lifetime["episode"] == {"ended": 0, "mean_s": None, "open_at_end": 2}
    assert (lifetime["fact"]["ended"], lifetime["fact"]["open_at_end"]) == (2, 0)
    assert (lifetime["preference"]["ended"], lifetime["preference"]["open_at_end"]) == (1, 0)


def test_a_forget_command_that_leaves_its_fact_is_a_failed_cleanup(tmp_path: Path) -> None:
    script = SCRIPT.replace("forget: forget my flight", "forget: forget my hobby")
    strategy = parse_strategy(ONE_HOUR, source="test")
    figures = _figures(tmp_path, script=script, strategy=strategy)
    cleanup = figures["monitoring"]["cleanup"]
    sweeps = len(_ticks(strategy))
    assert figures["metrics"]["leakage"] == 1  # the flight is still stored
    assert (cleanup["forgets"], cleanup["forgets_failed"]) == (1, 1)
    assert cleanup["success_rate"] == sweeps / (sweeps + 1)


EVENT = """
name: event
users:
  - id: bo
    timeline:
      - {at: 0, session: s1, say: My company is Acme., facts: [{id: co, type: profile}]}
      - {at: 100, event: profile_updated, payload: {fields: [company]}}
      - {at: 200, session: s1, probe: What is my company?, needed: [co]}
"""


def test_what_an_event_removes_ends_when_the_event_comes(tmp_path: Path) -> None:
    monitoring = _figures(tmp_path, load_strategy("event_driven"), EVENT)["monitoring"]
    # The statement is an STM profile record and a promoted LTM profile fact; the event
    # invalidates both 100 s after they were written, so the probe finds nothing.
    assert monitoring["growth"]["per_day"] == {"profile": [2]}
    assert monitoring["lifetime"] == {"profile": {"ended": 2, "mean_s": 100.0, "open_at_end": 0}}
    assert monitoring["retrieval"] == {"probes": 1, "hits": 0, "hit_rate": 0.0}


def test_a_probe_that_needs_nothing_is_not_counted(tmp_path: Path) -> None:
    script = SCRIPT.replace("needed: [colour]", "forbidden: [flight]")
    monitoring = _figures(tmp_path, parse_strategy(ONE_HOUR, source="t"), script)["monitoring"]
    assert monitoring["retrieval"] == {"probes": 2, "hits": 1, "hit_rate": 0.5}


# ---------------------------------------------------------------------- alerts
def test_alerts_fire_only_past_their_thresholds(tmp_path: Path) -> None:
    monitoring = _figures(tmp_path, parse_strategy(ONE_HOUR, source="test"))["monitoring"]
    longest = monitoring["cleanup"]["max_s"]
    quiet = AlertRule(
        max_growth_per_day={"fact": 1, "preference": 1},
        min_cleanup_success=1.0,
        max_cleanup_s=longest + 60,
        min_hit_rate=1 / 3,
    )
    assert raised(quiet, monitoring) == []
    loud = AlertRule(max_growth_per_day={"fact": 0}, max_cleanup_s=longest / 2, min_hit_rate=0.5)
    alerts = {a["alert"]: a for a in raised(loud, monitoring)}
    assert set(alerts) == {"max_growth_per_day.fact", "max_cleanup_s", "min_hit_rate"}
    assert (alerts["max_growth_per_day.fact"]["value"], alerts["min_hit_rate"]["value"]) == (
        1,
        1 / 3,
    )
    assert raised(None, monitoring) == []


def test_cleanup_success_alert(tmp_path: Path) -> None:
    script = SCRIPT.replace("forget: forget my flight", "forget: forget my hobby")
    monitoring = _figures(tmp_path, parse_strategy(ONE_HOUR, source="t"), script)["monitoring"]
    rule = AlertRule(min_cleanup_success=0.99)
    assert [a["alert"] for a in raised(rule, monitoring)] == ["min_cleanup_success"]


def test_a_runs_alerts_are_in_its_results_and_tables(tmp_path: Path) -> None:
    text = ONE_HOUR + "alerts:\n  min_hit_rate: 0.5\n  max_growth_per_day: {fact: 5}\n"
    strategy = parse_strategy(text, source="one_hour.yaml")
    figures = _figures(tmp_path, strategy)
    scenario = parse_scenario(SCRIPT)
    writer = ResultWriter(
        tmp_path / "run", {"run_id": "r", "backend": "memory", "embedder": "hashing", "k": 5}
    )
    source = ScenarioInput(
        "monitored", scenario_hash("monitored", scenario.users), "m.yaml", None, scenario.users
    )
    writer.start_scenario(source)
    spec = StrategySpec("one_hour", (), strategy)
    entry = writer.add(source, StrategyOutcome(spec, "ok", figures=figures))
    assert [a["alert"] for a in entry["alerts"]] == ["min_hit_rate"]
    saved = json.loads((tmp_path / "run" / "results.json").read_text())
    stored = saved["scenarios"][0]["strategies"][0]
    assert stored["alerts"] == entry["alerts"]
    assert stored["monitoring"]["retrieval"]["hit_rate"] == 1 / 3
    table = monitoring_terminal(saved["scenarios"][0])
    assert "hit rate" in table and "33.3%" in table
    assert "ALERT one_hour: retrieval hit rate 33.33% (at least 50.00%)" in table
    assert any("⚠ one_hour" in line for line in monitoring_markdown(saved["scenarios"][0]))


def test_the_alerts_block_leaves_the_fingerprint_of_a_strategy_without_it() -> None:
    plain = parse_strategy(ONE_HOUR, source="t")
    assert plain.alerts is None
    with_alerts = parse_strategy(ONE_HOUR + "alerts:\n  min_hit_rate: 0.5\n", source="t")
    assert with_alerts.fingerprint() != plain.fingerprint()
    assert "alerts" not in plain.model_dump(mode="json", exclude_none=True)


@pytest.mark.parametrize(
    ("block", "line", "field", "says"),
    [
        ("  max_growth_per_day: {episodic: 10}\n", 7, "max_growth_per_day.episodic", "episode"),
        ("  max_growth_per_day:\n    fact: -1\n", 8, "max_growth_per_day.fact", ">= 0"),
        ("  min_cleanup_success: 1.5\n", 7, "min_cleanup_success", "less than or equal to 1"),
        ("  max_cleanup_s: 0\n", 7, "max_cleanup_s", "greater than 0"),
        ("  min_hit_rate: often\n", 7, "min_hit_rate", "valid number"),
        ("  max_hits: 3\n", 7, "max_hits", "unknown key"),
    ],
)
def test_bad_alert_settings_name_file_line_and_field(
    block: str, line: int, field: str, says: str
) -> None:
    with pytest.raises(StrategyError) as info:
        parse_strategy(ONE_HOUR + "alerts:\n" + block, source="mine.yaml")
    message = str(info.value)
    assert message.startswith(f"mine.yaml:{line}: alerts.{field}:"), message
    assert says in message.replace("greater than or equal to 0", ">= 0")


# ---------------------------------------------------------------------- Prometheus
def _system(tmp: Path, clock: VirtualClock, prefix: str) -> Any:
    settings = Settings(
        backend="memory",
        embedder="hashing",
        data_dir=tmp,
        prefix=prefix,
        encryption_key=SecretStr(generate_key()),
    )
    strategy = parse_strategy(ONE_HOUR, source="t")
    return build_memory_system(
        settings, clock=clock, namespace=Namespace(prefix), strategy=strategy
    )


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def test_the_reference_counts_and_exposes_the_same_figures(tmp_path: Path) -> None:
    clock = VirtualClock(0.0)
    system = _system(tmp_path, clock, "prom")
    said = [
        system.turn(user_id="u", session_id="s", text="My favourite colour is green.", at=0),
        system.turn(user_id="u", session_id="s", text="I booked a table at Luigi's.", at=60),
    ]
    recall = system.recall(user_id="u", session_id="s", query="my colour?", at=120)
    stats = system.sweep(at=2 * HOUR)  # both records are past their hour
    written: dict[tuple[str, str], int] = {}
    for result in said:
        if result.stm.record is not None:
            key = ("stm", result.stm.record.type.value)
            written[key] = written.get(key, 0) + 1
        if result.promoted is not None:
            key = ("ltm", result.promoted.category.value)
            written[key] = written.get(key, 0) + 1
    hits = sum(bool(r.stm_hits or r.ltm_hits) for r in said) + bool(
        recall.stm_hits or recall.ltm_hits
    )
    text = exposition(system.engine.counters, {"strategy": "one_hour"})
    samples = _samples(text)
    base = (("strategy", "one_hour"),)
    for (layer, kind), n in written.items():
        key = ("memh_memories_written_total", (("layer", layer), *base, ("type", kind)))
        assert samples[(key[0], tuple(sorted(key[1])))] == n
    assert samples[("memh_retrievals_total", (("hit", "true"), *base))] == hits
    assert samples[("memh_retrievals_total", (("hit", "false"), *base))] == 3 - hits
    assert samples[("memh_cleanups_total", (("operation", "sweep"), ("outcome", "ok"), *base))] == 1
    assert samples[("memh_cleanup_success_ratio", base)] == 1.0
    # Lifetimes: each STM record the sweep expired lived from its write to the sweep.
    expired = [d for d in stats.by_layer["stm"].decisions if d.action == "expire"]
    assert expired
    for kind in {d.kind for d in expired}:
        mine = [d for d in expired if d.kind == kind]
        labels = tuple(sorted((("layer", "stm"), *base, ("type", kind))))
        assert samples[("memh_memory_lifetime_seconds_count", labels)] == len(mine)
        assert samples[("memh_memory_lifetime_seconds_sum", labels)] == sum(
            2 * HOUR - d.written for d in mine
        )
    # Each exposition has a registry of its own: a second system's never collides.
    other = _system(tmp_path, VirtualClock(0.0), "prom2")
    assert "memh_retrievals_total" in exposition(other.engine.counters)
    system.drop()
    other.drop()


def test_counters_add_up_across_processes() -> None:
    one, two = MemoryCounters(VirtualClock(0.0)), MemoryCounters(VirtualClock(0.0))
    one.written[("stm", "fact")] += 2
    one.retrievals[True] += 3
    one.cleanup("sweep", ok=True, seconds=0.5)
    two.written[("stm", "fact")] += 1
    two.cleanup("sweep", ok=False, seconds=2.0)
    total = MemoryCounters(VirtualClock(0.0))
    for counters in (one, two):
        total.add_state(json.loads(json.dumps(counters.state())))
    assert total.written[("stm", "fact")] == 3 and total.retrievals[True] == 3
    assert total.cleanups == {("sweep", "ok"): 1, ("sweep", "failed"): 1}
    assert total.cleanup_max_s["sweep"] == 2.0 and total.success_ratio() == 0.5


def test_the_maintenance_endpoint_serves_the_counters() -> None:
    counters = MemoryCounters(VirtualClock(0.0))
    counters.cleanup("sweep", ok=True, seconds=0.25)
    figures = MaintenanceFigures(strategy="s", fingerprint="f", replica="r", time_scale=1.0)
    labels = {"strategy": "s", "replica": "r"}
    server = MetricsServer(figures, 0, more=lambda: exposition(counters, labels))
    try:
        url = f"http://127.0.0.1:{server.port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as response:
            text = response.read().decode()
    finally:
        server.close()
    samples = _samples(text)  # the whole body parses
    base = (("replica", "r"), ("strategy", "s"))
    assert samples[("memh_cleanup_seconds_sum", (("operation", "sweep"), *base))] == 0.25
    assert samples[("memh_maintenance_cycles_total", base)] == 0


def test_the_replay_dump_keeps_counted_figures_as_they_are() -> None:
    # `bench/shard_replay.py --dump`: `asdict` rebuilt a Counter from its items (counting
    # the pairs) and could not rebuild a defaultdict; the dump writes plain dicts.
    from bench.shard_replay import _plain
    from memharness.sim.monitoring import MonitorTally

    tally = MonitorTally()
    tally.writes[("preference", 0)] += 3
    tally.lifetime_s["preference"] += 7.5
    plain = _plain(tally)
    assert plain["writes"] == {"('preference', 0)": 3}
    assert plain["lifetime_s"] == {"preference": 7.5}
    assert json.loads(json.dumps(plain)) == plain

"""Figures without traps: PII in plaintext and PII sealed apart, from what the script
marks (whatever the memory's detector finds); the footprint's peak over every sample,
probe moments included; one count of turns for `scenarios stats` and `run`.

The replays run one shard in process (no Ray) on the in-memory backends with the hashing
embedder.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from memharness.cli import main
from memharness.scenarios import ScenarioError, parse_scenario
from memharness.scenarios.stats import scenario_stats
from memharness.sim.metrics import merge
from memharness.sim.plan import (
    IDLE_SWEEP_S,
    ScenarioInput,
    scenario_hash,
)
from memharness.sim.results import ResultWriter
from reference.policy.loading import load_strategy, parse_strategy
from reference.policy.strategy import Strategy
from tests.fixtures.replay import replay_scenario

DAY = 86_400.0

# A phone number the reference's detector finds, said once; asked about three days later.
PHONE = """
name: phone
users:
  - id: pat
    timeline:
      - {at: 0, session: s1, say: 我的手机号是13912345678。,
         facts: [{id: mobile, type: sensitive, key: phone}], sensitive: true,
         pii: ["13912345678"]}
      - {at: 60, session: s1, probe: 我的手机号是多少？, needed: [mobile]}
      - {at: 259200, session: s2, probe: 我的手机号是多少？, needed: [mobile]}
"""
# A street address: personal data the detector does not know (it finds IDs, phones,
# e-mail, cards, passports). Only the script's mark says it is PII.
ADDRESS = """
name: address
users:
  - id: pat
    timeline:
      # a street without a suffix word: personal data the detector does not find
      - {at: 0, session: s1, say: "I live at 12 Baker Wharf Yard, send the parcel there.",
         facts: [{id: home, type: profile, key: address}], sensitive: true,
         pii: [12 Baker Wharf Yard]}
      - {at: 60, session: s1, probe: Where do I live?, needed: [home]}
      - {at: 259200, session: s2, probe: Where do I live?, needed: [home]}
"""
# A memory that fills and empties within a day: STM records live an hour, and the only
# daily sample is the last step's moment (before it), when all has expired.
BRIEF = """
name: brief
users:
  - id: ann
    timeline:
      - {at: 0, session: s1, say: "I booked a table at Luigi's for Friday evening.",
         facts: [{id: table, type: fact}]}
      - {at: 600, session: s1, probe: Where did I book a table?, needed: [table]}
      - {at: 7200, session: s1, probe: Where did I book a table?, needed: [table]}
"""
ONE_HOUR = "name: one_hour\ndescription: an hour for everything\nttl:\n  default_s: 3600\n"
# Statements, an event, a forget command and a probe: three turns of the memory.
TURNS = """
name: turns
users:
  - id: bo
    timeline:
      - {at: 0, session: s1, say: My company is Acme., facts: [{id: co, type: profile}]}
      - {at: 10, session: s1, say: haha ok}
      - {at: 20, event: profile_updated, payload: {fields: [company]}}
      - {at: 30, session: s1, forget: forget my company, facts: [co]}
      - {at: 40, session: s1, probe: What is my company?, forbidden: [co]}
"""


def _replay(tmp: Path, text: str, strategy: Strategy) -> dict[str, Any]:
    """The merged figures of one in-process replay, sampled as `memharness run` does."""
    return merge([replay_scenario(tmp, text, strategy, prefix="defs")])


# ---------------------------------------------------------------------- PII
def test_keep_all_masks_pii_on_the_way_in_and_never_seals(tmp_path: Path) -> None:
    m = _replay(tmp_path, PHONE, load_strategy("keep_all"))["metrics"]
    assert m["pii_items"] == 1
    assert m["pii_raw_max_s"] == 0 and m["pii_raw_at_end"] == 0
    assert m["pii_sealed_items"] == 0 and m["pii_sealed_max_s"] is None  # never sealed


def test_hybrid_keeps_pii_sealed_until_it_anonymises_it(tmp_path: Path) -> None:
    m = _replay(tmp_path, PHONE, load_strategy("hybrid"))["metrics"]
    assert m["pii_items"] == 1 and m["pii_raw_max_s"] == 0
    assert m["pii_sealed_items"] == 1 and m["pii_sealed_at_end"] == 0
    # Anonymised 24 h after sealing, seen at the next sweep (idle ticks are 6 h apart).
    assert DAY <= m["pii_sealed_max_s"] <= DAY + IDLE_SWEEP_S


def test_pii_the_detector_misses_is_raw_to_the_end_and_has_no_max(tmp_path: Path) -> None:
    m = _replay(tmp_path, ADDRESS, load_strategy("keep_all"))["metrics"]
    assert m["pii_items"] == 1
    assert m["pii_raw_at_end"] == 1 and m["pii_raw_max_s"] is None


# An ID number said in passing inside chit-chat, its check character mistyped.
CHITCHAT_ID = """
name: chitchat_id
users:
  - id: pat
    timeline:
      - {at: 0, session: s1, sensitive: true, pii: ["110105194912310021"],
         say: "haha lovely weather today, btw my ID number is 110105194912310021 lol"}
      - {at: 60, session: s1, say: I always prefer SF Express for deliveries.,
         facts: [{id: sf, type: preference, key: carrier}]}
      - {at: 259200, session: s2, probe: Which carrier do I prefer?, needed: [sf]}
"""


@pytest.mark.parametrize(
    "name", ["keep_all", "fixed_ttl", "importance", "recency_decay", "event_driven", "hybrid"]
)
def test_an_id_said_in_passing_is_never_plaintext_whatever_the_strategy(
    tmp_path: Path, name: str
) -> None:
    # Issue 37, finding 6: the seeds' deadline is 24 h, whatever the expiry strategy.
    m = _replay(tmp_path, CHITCHAT_ID, load_strategy(name))["metrics"]
    assert m["pii_items"] == 1 and m["pii_raw_at_end"] == 0 and m["pii_raw_max_s"] == 0


def test_only_the_scripts_marks_make_pii_items(tmp_path: Path) -> None:
    unmarked = PHONE.replace("sensitive: true,", "").replace('pii: ["13912345678"]', "")
    m = _replay(tmp_path, unmarked, load_strategy("hybrid"))["metrics"]
    assert m["pii_items"] == 0 and m["pii_raw_max_s"] is None


def test_pii_values_must_occur_in_the_statement() -> None:
    with pytest.raises(ScenarioError) as info:
        parse_scenario(PHONE.replace('pii: ["13912345678"]', 'pii: ["13900000000"]'))
    assert "'13900000000' does not occur in the `say` text" in str(info.value)
    assert "pii" in str(info.value)


# ---------------------------------------------------------------------- footprint
def test_a_peak_between_daily_samples_is_seen_at_a_probe(tmp_path: Path) -> None:
    footprint = _replay(tmp_path, BRIEF, parse_strategy(ONE_HOUR, source="test"))["footprint"]
    # The daily series alone saw nothing: at 7200 s the hour-long records were gone.
    assert [p["at"] for p in footprint["series"]] == [7200.0]
    assert footprint["series"][0]["stm"] == [0, 0]
    # At the probe 600 s in, the session and its STM record were live.
    peak = footprint["peak"]
    assert peak["stm"]["records"] == 1 and peak["stm"]["bytes"] > 0
    assert peak["session"]["records"] == 1


# ---------------------------------------------------------------------- turns
def test_stats_and_run_count_the_same_turns(tmp_path: Path) -> None:
    scenario = parse_scenario(TURNS)
    stats = scenario_stats(scenario)
    assert (stats.turns, stats.statements, stats.forgets) == (3, 2, 1)
    figures = _replay(tmp_path, TURNS, parse_strategy(ONE_HOUR, source="test"))
    assert figures["metrics"]["turns"] == stats.turns
    writer = ResultWriter(tmp_path / "run", {"run_id": "r", "backend": "memory"})
    source = ScenarioInput(
        "turns", scenario_hash("turns", scenario.users), "turns.yaml", None, scenario.users
    )
    assert writer.start_scenario(source)["turns"] == stats.turns
    path = tmp_path / "turns.yaml"
    path.write_text(TURNS, encoding="utf-8")
    printed = CliRunner().invoke(main, ["scenarios", "stats", str(path)])
    assert printed.exit_code == 0, printed.output
    assert "turns              3 (statements and forget commands)" in printed.output

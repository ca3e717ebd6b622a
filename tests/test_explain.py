"""Per-probe diagnostics: the reachability rule, the retrieval ceiling computed by hand,
the records a replay writes, `memharness explain` and the summary's disagreements.

The replays here run one shard in process (no Ray) on the in-memory backends with the
hashing embedder, under strategies written for the test: no `promotion` key, so nothing
but the inline rules reaches LTM, and a fact said once stays in its session's STM.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from memharness.cli import main
from memharness.diagnostics import disagreements
from memharness.report import write_report
from memharness.scenarios import parse_scenario
from memharness.sim.ceiling import CeilingTally, top_k, user_ceiling
from memharness.sim.metrics import merge
from memharness.sim.plan import IDLE_SWEEP_S, ScenarioInput, StrategySpec
from memharness.sim.probes import Verdict, needed_verdict
from memharness.sim.results import ResultWriter
from memharness.sim.runner import StrategyOutcome
from memharness.sim.tally import ShardResult
from reference.policy.loading import parse_strategy
from reference.policy.strategy import Strategy
from tests.fixtures.replay import replay_scenario

# One user, everything said in s1. STM records live an hour under `one_hour`.
REACH = """
name: reach
users:
  - id: ann
    timeline:
      - {at: 0, session: s1, say: "I booked a table at Luigi's for Friday evening.",
         facts: [{id: table, type: fact}]}
      - {at: 10, session: s1, say: "I booked a hotel room in Paris for May.",
         facts: [{id: hotel, type: fact}]}
      - {at: 20, session: s1, say: "haha ok", facts: [{id: laugh, type: fact}]}
      - {at: 60, session: s1, probe: "Where did I book a table?", needed: [table]}
      - {at: 61, session: s1, probe: "Where did I book a table?", needed: [hotel], k: 1}
      - {at: 62, session: s1, probe: "haha ok", needed: [laugh]}
      - {at: 120, session: s2, probe: "Where did I book a table?", needed: [table]}
      - {at: 7200, session: s1, probe: "Where did I book a table?", needed: [table]}
      - {at: 7300, session: s2, probe: "Where did I book a table?", needed: [table]}
"""
ONE_HOUR = "name: one_hour\ndescription: an hour for everything\nttl:\n  default_s: 3600\n"
FOREVER = "name: forever\ndescription: nothing expires\n"


def _strategy(text: str) -> Strategy:
    return parse_strategy(text, source="test")


def _replay(tmp: Path, text: str, strategy: Strategy, k: int = 5) -> ShardResult:
    return replay_scenario(tmp, text, strategy, k=k, prefix="explain")


# ---------------------------------------------------------------------- reachability
@pytest.mark.parametrize(
    ("stored", "reachable", "live", "verdict"),
    [(False, False, False, Verdict.UNSTORED), (True, False, False, Verdict.UNREACHABLE),
     (True, False, True, Verdict.UNREACHABLE), (True, True, False, Verdict.OVER_FORGOTTEN),
     (True, True, True, Verdict.MISSED)],
)  # fmt: skip
def test_needed_verdict_table(stored: bool, reachable: bool, live: bool, verdict: Verdict) -> None:
    assert needed_verdict(stored=stored, reachable=reachable, live=live) is verdict


def test_a_fact_in_another_sessions_stm_is_unreachable_not_over_forgotten(tmp_path: Path) -> None:
    result = _replay(tmp_path, REACH, _strategy(ONE_HOUR))
    verdicts = {r["step"]: r["verdicts"] for r in result.probe_records}
    assert 3 not in verdicts  # retrieved from s1's STM: a clean probe has no record
    assert verdicts[4] == {"hotel": "missed"}  # stored in s1, not in the top-1
    assert verdicts[5] == {"laugh": "never stored"}  # the intent filter dropped it
    assert verdicts[6] == {"table": "unreachable"}  # live, but in s1's STM
    assert verdicts[7] == {"table": "over-forgotten"}  # s1's STM expired after an hour
    # Expired too, but a probe in s2 could never have found it: not over-forgetting.
    assert verdicts[8] == {"table": "unreachable"}
    m = merge([result])["metrics"]
    assert (m["needed"], m["probes"], m["probes_recorded"]) == (6, 6, 5)
    assert m["recall_at_k"] == m["recall_stm_at_k"] == pytest.approx(1 / 6)
    assert m["recall_ltm_at_k"] == 0
    assert m["unreachable_rate"] == pytest.approx(2 / 6)
    shares = ("recall_at_k", "missed_rate", "over_forget_rate", "unreachable_rate",
              "unstored_rate")  # fmt: skip
    assert sum(m[name] for name in shares) == pytest.approx(1.0)


def test_a_probe_record_holds_the_query_and_each_layers_hits(tmp_path: Path) -> None:
    result = _replay(tmp_path, REACH, _strategy(ONE_HOUR))
    record = next(r for r in result.probe_records if r["step"] == 4)
    assert record["query"] == "Where did I book a table?"
    assert (record["user"], record["session"], record["needed"]) == ("ann", "s1", ["hotel"])
    assert record["hits"]["ltm"] == []
    [hit] = record["hits"]["stm"]  # k: 1
    assert hit["facts"] == ["table"] and hit["text"].startswith("I booked a table")
    assert 0 < hit["score"] <= 1


# ---------------------------------------------------------------------- the ceiling
class _Fixed:
    """An embedder with vectors chosen by hand."""

    def __init__(self, vectors: Mapping[str, Sequence[float]]) -> None:
        self.vectors = vectors

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        return np.array([self.vectors[t] for t in texts], dtype=np.float32)


CEILING = """
name: ceiling
users:
  - id: bo
    timeline:
      - {at: 1, session: s1, say: north, facts: [{id: n, type: fact}]}
      - {at: 2, session: s1, say: east, facts: [{id: e, type: fact}]}
      - {at: 3, session: s2, say: northeast, facts: [{id: ne, type: fact}]}
      - {at: 4, session: s3, probe: up, needed: [n, e]}
      - {at: 5, session: s3, probe: right, needed: [e], k: 1}
      - {at: 6, session: s1, say: later, facts: [{id: late, type: fact}]}
      - {at: 7, session: s3, probe: up, needed: [late]}
      - {at: 8, session: s3, probe: up, needed: [n, late], k: 1}
"""


def test_the_ceiling_on_a_tiny_scenario_by_hand() -> None:
    vectors = {
        "north": (0, 1), "east": (1, 0), "northeast": (1, 1), "later": (-1, 0),
        "up": (0, 2), "right": (3, 0.5),
    }  # fmt: skip
    user = parse_scenario(CEILING).users[0]
    tally = user_ceiling(user, embed=_Fixed(vectors), mask=str, k=2)
    # "up" at k=2 ranks north (1.0), northeast (0.71), east (0): n found, e not (1 of 2).
    # "right" at k=1: east (0.99) over northeast (0.83): e found (1 of 1).
    # "up" at k=2 after "later": north, northeast; later (0) is third: not found (0 of 1).
    # "up" at k=1: north only: n found, later not (1 of 2).
    assert tally == CeilingTally(needed=6, found=3)


def test_the_ceiling_never_sees_a_turn_said_after_the_probe() -> None:
    text = """
name: order
users:
  - id: cy
    timeline:
      - {at: 1, session: s, say: far, facts: [{id: f, type: fact}]}
      - {at: 2, session: s, probe: q, needed: [f], k: 1}
      - {at: 3, session: s, say: close, facts: [{id: g, type: fact}]}
"""
    user = parse_scenario(text).users[0]
    embed = _Fixed({"q": (1, 0), "far": (1, 1), "close": (1, 0)})
    # Were "close" a candidate, it would take the only slot.
    assert user_ceiling(user, embed=embed, mask=str, k=5) == CeilingTally(needed=1, found=1)


def test_top_k_breaks_ties_in_the_order_said() -> None:
    assert top_k(np.array([0.5, 0.9, 0.9, 0.1]), 2) == [1, 2]
    assert top_k(np.array([0.2]), 3) == [0]


def test_the_replay_reports_the_ceiling_the_same_under_every_strategy(tmp_path: Path) -> None:
    a = merge([_replay(tmp_path, REACH, _strategy(ONE_HOUR))])["ceiling"]
    b = merge([_replay(tmp_path, REACH, _strategy(FOREVER))])["ceiling"]
    assert a == b and a["needed"] == 6


# ---------------------------------------------------------------------- explain
def _run_dir(tmp: Path) -> Path:
    """A run directory of REACH under `one_hour` and `forever`, written as a run does."""
    scenario = parse_scenario(REACH)
    source = ScenarioInput("reach", "abc123", "test", None, scenario.users)
    writer = ResultWriter(
        tmp / "run", {"run_id": "r", "backend": "memory", "embedder": "hashing", "k": 5}
    )
    writer.start_scenario(source)
    for text in (ONE_HOUR, FOREVER):
        strategy = _strategy(text)
        spec = StrategySpec(name=strategy.name, params=(), strategy=strategy)
        figures = merge([_replay(tmp / strategy.name, REACH, strategy)])
        writer.add(source, StrategyOutcome(spec, "ok", figures=figures))
    writer.finish("complete")
    return tmp / "run"


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    return _run_dir(tmp_path)


def _explain(*args: str) -> Any:
    return CliRunner().invoke(main, ["explain", *args])


def test_explain_prints_each_probe_with_its_verdicts_and_hits(run_dir: Path) -> None:
    result = _explain(str(run_dir), "--strategy", "one_hour")
    assert result.exit_code == 0, result.output
    out = result.output
    assert "# reach: dense ceiling recall@k 0.833" in out
    assert "## one_hour (ok): recall@k 0.167, 6 probes, 5 not clean" in out
    assert "## forever" not in out
    assert "probe ann#4 at 1970-01-01T00:01:01Z in session s1:" in out
    assert "  needed: hotel (missed)" in out
    assert """    1. 0.""" in out and """[table] "I booked a table at Luigi's""" in out
    assert "  needed: table (unreachable)" in out
    assert "  needed: table (over-forgotten)" in out
    assert "  needed: laugh (never stored)" in out


def test_explain_failed_and_unknown_names(run_dir: Path) -> None:
    result = _explain(str(run_dir), "--scenario", "reach", "--failed")
    assert result.exit_code == 0, result.output
    # forever keeps s1's STM: only the k=1 miss, the dropped laugh and s2's probes fail.
    assert "## forever (ok): recall@k 0.333, 6 probes, 4 not clean, 4 missed a needed fact" in (
        result.output
    )
    bad = _explain(str(run_dir), "--strategy", "nope")
    assert bad.exit_code == 2 and "--strategy 'nope': no such strategy" in bad.output
    bad = _explain(str(run_dir), "--scenario", "drift")
    assert bad.exit_code == 2 and "no such scenario in this run (reach)" in bad.output
    missing = _explain(str(run_dir.parent))
    assert missing.exit_code == 2 and "results.json" in missing.output


def test_results_json_holds_the_ceiling_and_no_probe_records(run_dir: Path) -> None:

    document = json.loads((run_dir / "results.json").read_text())
    [scenario] = document["scenarios"]
    assert scenario["ceiling"] == {"recall_at_k": pytest.approx(5 / 6), "needed": 6, "found": 5}
    for entry in scenario["strategies"]:
        assert "probes" not in entry
        own = json.loads((run_dir / entry["file"]).read_text())
        assert len(own["probes"]) == own["metrics"]["probes_recorded"]


def test_the_summary_lists_the_probes_where_strategies_disagree(run_dir: Path) -> None:

    scenario = json.loads((run_dir / "results.json").read_text())["scenarios"][0]
    found = {(d.user, d.step): d.groups for d in disagreements(run_dir, scenario)}
    # At 7200 s one_hour's STM record has expired, forever's has not.
    assert found == {
        ("ann", 7): {
            "table over-forgotten": ["one_hour"],
            "all needed retrieved, nothing bad": ["forever"],
        }
    }
    summary = write_report(run_dir).read_text()
    assert "| dense ceiling (5 of 6) | 0.833 | 1.000 |" in summary
    row = "| `one_hour` | 0.167 | 0.200 | 0.167 | 0.000 | 0.167 | 0.167 | 0.333 | 0.167 |"
    assert row in summary
    assert "Probes where strategies disagree: 1;" in summary
    assert "- `ann` step 7, “Where did I book a table?” — table over-forgotten: `one_hour`" in (
        summary
    )


def test_compare_reads_the_ceiling_beside_the_strategies(run_dir: Path) -> None:
    from memharness.capacity.compare import compare_runs

    _, table = compare_runs(run_dir, run_dir)
    row = table[(table["strategy"] == "(dense ceiling)") & (table["figure"] == "recall_at_k")]
    assert list(row["B"]) == [pytest.approx(5 / 6)] and list(row["delta"]) == [0]


@pytest.mark.parametrize(
    "document",
    [{"a": 1, "probes": [{"x": 1}, {"y": [1, 2]}]}, {"a": 1, "probes": []}, {"a": {"b": 2}},
     {"probes": [1]}, {"probes": None, "b": "ü"}],
)  # fmt: skip
def test_write_json_puts_one_record_per_line_and_reads_back(
    tmp_path: Path, document: dict[str, Any]
) -> None:
    from memharness.sim.results import write_json

    path = tmp_path / "own.json"
    write_json(path, document, one_per_line="probes")
    text = path.read_text()
    assert json.loads(text) == document
    if document.get("probes"):
        assert f"\n    {json.dumps(document['probes'][-1])}\n  ]\n}}" in text


def test_a_resumed_run_keeps_the_ceiling_and_leaves_probe_records_in_their_files(
    run_dir: Path,
) -> None:
    header = {"run_id": "r", "backend": "memory", "embedder": "hashing", "k": 5,
              "seed": 7, "idle_sweep_s": IDLE_SWEEP_S, "sample_every_s": 86_400.0}  # fmt: skip
    document = json.loads((run_dir / "results.json").read_text())
    document.update(header)
    (run_dir / "results.json").write_text(json.dumps(document))
    writer = ResultWriter.resume(run_dir, header)
    source = ScenarioInput("reach", "abc123", "test", None, parse_scenario(REACH).users)
    section = writer.start_scenario(source)
    strategy = _strategy(ONE_HOUR)
    entry = writer.reuse(source, StrategySpec(name="one_hour", params=(), strategy=strategy))
    assert entry is not None and "probes" not in entry
    assert section["ceiling"]["found"] == 5


# ---------------------------------------------------------------------- why
def test_a_probe_record_says_why_a_fact_was_over_forgotten_or_never_stored(
    tmp_path: Path,
) -> None:
    result = _replay(tmp_path, REACH, _strategy(ONE_HOUR))
    why = {r["step"]: r["why"] for r in result.probe_records}
    # s1's STM record expired after an hour (default_s: fact has no by_type entry);
    # the sweep at 7200 removed it, before the probe at the same moment.
    over = why[7]["table"]
    assert over["cause"] == "ttl.default_s"
    [gone] = over["gone"]
    assert (gone["layer"], gone["at"], gone["rule"]) == ("stm", 7200.0, "ttl.default_s")
    assert gone["detail"].startswith("expired at 1970-01-01T01:00:00")
    assert over["promoted"] is False
    unstored = why[5]["laugh"]
    assert unstored["cause"].startswith("intent filter: chit-chat")
    # Only over-forgotten and never stored facts get a why.
    assert why[4] == {} and why[6] == {} and why[8] == {}


FORGOTTEN = """
name: forgotten
users:
  - id: bo
    timeline:
      - {at: 0, session: s1, say: "I booked a table at Luigi's for Friday evening.",
         facts: [{id: table, type: fact}]}
      - {at: 30, session: s1, forget: "Forget everything about me.", scope: everything}
      - {at: 60, session: s1, probe: "Where did I book a table?", needed: [table]}
"""


def test_a_forget_command_is_named_as_the_cause(tmp_path: Path) -> None:
    result = _replay(tmp_path, FORGOTTEN, _strategy(FOREVER))
    [record] = result.probe_records
    assert record["verdicts"] == {"table": "over-forgotten"}
    over = record["why"]["table"]
    assert over["cause"] == "forget command"
    [gone] = over["gone"]
    assert (gone["layer"], gone["at"]) == ("stm", 30.0)
    assert gone["detail"] == "everything forget command 'Forget everything about me.'"


FLOOR = """
name: floor
description: ended sessions consolidate, nothing reaches the floor
promotion: consolidate
consolidation: {min_importance: 10}
"""
ENDED = """
name: ended
users:
  - id: cy
    timeline:
      - {at: 0, session: s1, say: "I booked a table at Luigi's for Friday evening.",
         facts: [{id: table, type: fact}]}
      - {at: 7200, session: s1, probe: "Where did I book a table?", needed: [table]}
"""


def test_a_record_no_episode_was_made_of_is_named_with_the_floor(tmp_path: Path) -> None:
    result = _replay(tmp_path, ENDED, _strategy(FLOOR))
    [record] = result.probe_records
    assert record["verdicts"] == {"table": "over-forgotten"}
    over = record["why"]["table"]
    assert over["cause"] == "consolidation.min_importance"  # not "deadline passed ..."
    [gone] = over["gone"]
    assert gone["layer"] == "stm" and gone["at"] is not None
    assert "under the floor 10.00" in gone["detail"]


def test_explain_starts_with_a_summary_and_says_why(run_dir: Path) -> None:
    result = _explain(str(run_dir), "--strategy", "one_hour")
    assert result.exit_code == 0, result.output
    out = result.output
    head = out.split("\n# reach", 1)[0]
    assert head.startswith("summary: 5 probes not clean\n")
    assert "facts by verdict: unreachable 2, missed 1, never stored 1, over-forgotten 1" in head
    assert "over-forgotten: ttl.default_s 1" in head
    assert "never stored: intent filter: chit-chat" in head
    assert "  why table is over-forgotten: gone from stm at 1970-01-01T02:00:00Z: expired at" in out
    assert "by ttl.default_s; never promoted to LTM" in out
    assert "  why laugh is never stored: the intent filter did not keep the utterance" in out


def test_explain_limit_lists_that_many_probes_and_counts_all(run_dir: Path) -> None:
    result = _explain(str(run_dir), "--limit", "1")
    assert result.exit_code == 0, result.output
    assert result.output.count("\nprobe ann#") == 1
    assert result.output.startswith("summary: 9 probes not clean\n")  # both strategies
    assert "8 more probes not listed (--limit 1; --limit 0 lists all)" in result.output
    everything = _explain(str(run_dir), "--limit", "0")
    assert everything.output.count("\nprobe ann#") == 9
    assert "more probes not listed" not in everything.output

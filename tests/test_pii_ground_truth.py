"""Personal data as ground truth: the values a scenario marks (`pii:`, with their kinds)
are what PII residency follows, never what the memory's detector finds; a statement
marked sensitive without values is unmeasurable (a `scenarios validate` warning, the
run's `pii_unmeasured`); the detector is scored per kind against the marks.

Replays run one shard in process on the in-memory backends with the hashing embedder.
"""

from __future__ import annotations

import io
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from memharness.pii_detector_table import detector_markdown, detector_terminal
from memharness.scenarios import ScenarioError, parse_scenario, write_scenario
from memharness.scenarios.locomo import import_locomo
from memharness.scenarios.model import PII_KINDS, PiiValue, SayStep
from memharness.scenarios.stream import stream_scenario
from memharness.scenarios_cmd import scenarios
from memharness.sim.metrics import merge
from memharness.sim.pii_scoring import detector_figures, score_statement
from memharness.sim.tally import ShardResult, join_cohorts
from reference.policy.loading import load_strategy
from reference.text_interfaces import PiiMatch
from tests.fixtures.replay import replay_scenario

FORMS = """\
name: forms
users:
  - id: pat
    timeline:
      - at: 0
        session: s1
        say: "I'm Emily Carter, call 13912345678 or +1 212-847-3920."
        pii:
          - "13912345678"
          - {value: "+1 212-847-3920", kind: phone}
          - {value: Emily Carter, kind: name}
"""


def _errors(text: str) -> list[str]:
    with pytest.raises(ScenarioError) as info:
        parse_scenario(text, source="f.yaml")
    return [str(p) for p in info.value.problems]


# ---------------------------------------------------------------------- the field
def test_pii_entries_are_strings_or_values_with_a_kind() -> None:
    step = parse_scenario(FORMS).users[0].timeline[0]
    assert isinstance(step, SayStep)
    assert step.pii == [
        PiiValue(value="13912345678", kind="other"),  # a plain string: no kind inferred
        PiiValue(value="+1 212-847-3920", kind="phone"),
        PiiValue(value="Emily Carter", kind="name"),
    ]
    assert step.discloses_pii and not step.pii_unmeasured
    out = io.StringIO()
    write_scenario(parse_scenario(FORMS), out)
    assert parse_scenario(out.getvalue()) == parse_scenario(FORMS)


def test_the_kinds_are_the_detectors_names() -> None:
    assert PII_KINDS == (
        "cn_id", "mobile", "phone", "email", "bank_card", "passport", "ssn", "name",
        "address", "other",
    )  # fmt: skip


def test_an_unknown_kind_is_an_error_naming_file_line_and_field() -> None:
    errors = _errors(FORMS.replace("kind: name", "kind: person"))
    assert len(errors) == 1
    assert errors[0].startswith("f.yaml:11: users[0].timeline[0].pii[2].kind: 'person'")
    assert "'name'" in errors[0] and "'address'" in errors[0]


def test_a_value_not_said_is_an_error_naming_file_line_and_field() -> None:
    errors = _errors(FORMS.replace("{value: Emily Carter", "{value: Emily Clark"))
    assert errors == [
        "f.yaml:8: users[0].timeline[0].pii: entry 2: 'Emily Clark' does not occur in the"
        " `say` text"
    ]


def test_an_entry_without_a_value_is_an_error() -> None:
    errors = _errors(FORMS.replace("{value: Emily Carter, kind: name}", "{kind: name}"))
    assert len(errors) == 1 and "users[0].timeline[0].pii[2].value" in errors[0]
    assert errors[0].startswith("f.yaml:11:")


# ---------------------------------------------------------------------- unmeasurable
SENSITIVE_ONLY = """\
name: sensitive_only
users:
  - id: pat
    timeline:
      - {at: 0, session: s1, say: 我的手机号是13912345678。,
         facts: [{id: mobile, type: sensitive, key: phone}], sensitive: true}
      - {at: 60, session: s1, probe: 我的手机号是多少？, needed: [mobile]}
"""


def test_validate_warns_about_sensitive_statements_without_values(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(SENSITIVE_ONLY, encoding="utf-8")
    info = stream_scenario(path, lambda user: None)
    assert [(w.line, w.field) for w in info.warnings] == [(6, "users[0].timeline[0].sensitive")]
    result = CliRunner().invoke(scenarios, ["validate", str(path)])
    assert result.exit_code == 0, result.output
    assert f"warning: {path}:6: users[0].timeline[0].sensitive: marked sensitive" in result.output
    assert "unmeasurable" in result.output and "1 warnings" in result.output
    strict = CliRunner().invoke(scenarios, ["validate", "--strict", str(path)])
    assert strict.exit_code == 1


def test_the_suite_has_no_unmeasurable_statement() -> None:
    suite = Path(__file__).resolve().parents[1] / "scenarios"
    for path in sorted(suite.glob("*.yaml")):
        assert stream_scenario(path, lambda user: None).warnings == [], path


def test_a_sensitive_statement_without_values_is_counted_not_guessed(tmp_path: Path) -> None:
    # The detector would find the number; the harness does not ask it.
    m = merge([replay_scenario(tmp_path, SENSITIVE_ONLY, load_strategy("keep_all"))])["metrics"]
    assert m["pii_unmeasured"] == 1
    assert m["pii_items"] == 0 and m["pii_raw_max_s"] is None
    assert m["pii_detector"] == {}  # nothing to score it against


# ---------------------------------------------------------------------- residency
NAME = """\
name: name
users:
  - id: pat
    timeline:
      - {at: 0, session: s1, say: "Please book the table for Zephyrine Okonkwo.",
         facts: [{id: who, type: instruction, key: booking}],
         pii: [{value: Zephyrine Okonkwo, kind: name}]}
      - {at: 60, session: s1, probe: Who is the table for?, needed: [who]}
      - {at: 259200, session: s2, probe: Who is the table for?, needed: [who]}
"""


def test_a_name_the_detector_misses_is_counted_raw_under_keep_all(tmp_path: Path) -> None:
    result = replay_scenario(tmp_path, NAME, load_strategy("keep_all"))
    m = merge([result])["metrics"]
    assert m["pii_items"] == 1  # not sensitive: the marked value alone makes it an item
    assert m["pii_raw_at_end"] == 1 and m["pii_raw_max_s"] is None
    name = m["pii_detector"]["name"]
    assert (name["marked"], name["found"], name["recall"]) == (1, 0, 0.0)


# ---------------------------------------------------------------------- the detector
def _match(kind: str, text: str, value: str) -> PiiMatch:
    start = text.index(value)
    return PiiMatch(kind, start, start + len(value), value)


def test_coverage_decides_found_and_overlap_decides_false_positives() -> None:
    text = "Call 010-62751234 or 010-62751234, card 4111111111111111."
    marks = [PiiValue(value="010-62751234", kind="phone")]
    tally: Counter[str] = Counter()
    # One place of the value covered, the other not: a raw copy stays, not found.
    partial = [PiiMatch("phone", 5, 17, text[5:17])]
    score_statement(text, marks, partial, complete=True, tally=tally)
    assert (tally["phone.marked"], tally["phone.found"]) == (1, 0)
    # A span over part of a marked value is no false positive; a card nobody marked is.
    spans = [
        PiiMatch("phone", 5, 17, ""),
        PiiMatch("mobile", 25, 33, ""),
        _match("bank_card", text, "4111111111111111"),
    ]
    score_statement(text, marks, spans, complete=True, tally=tally)
    assert tally["phone.found"] == 0
    assert tally["mobile.detected"] == 1 and tally["mobile.false_positives"] == 0
    assert tally["bank_card.detected"] == 1 and tally["bank_card.false_positives"] == 1
    # Both places covered, under another kind: found (recall does not compare kinds).
    whole = [PiiMatch("bank_card", 5, 17, ""), PiiMatch("bank_card", 21, 33, "")]
    score_statement(text, marks, whole, complete=False, tally=tally)
    assert tally["phone.found"] == 1 and tally["phone.marked"] == 3
    assert tally["bank_card.detected"] == 1  # an incomplete statement adds no detection


SCORED = """\
name: scored
users:
  - id: labelled
    pii_complete: true
    timeline:
      - {at: 0, session: s1, say: "我叫王秀英，手机号是13912345678。",
         pii: [{value: 王秀英, kind: name}, {value: "13912345678", kind: mobile}]}
      - {at: 10, session: s1, say: "Tracking number 4111111111111111 is on the box."}
      - {at: 20, session: s1, say: "I'd like the window seat."}
  - id: unlabelled
    timeline:
      - {at: 0, session: s1, say: "我叫王秀英，手机号是13912345678。",
         pii: [{value: 王秀英, kind: name}, {value: "13912345678", kind: mobile}]}
      - {at: 10, session: s1, say: "Tracking number 4111111111111111 is on the box."}
"""


def test_precision_and_recall_per_kind_on_a_scripted_case(tmp_path: Path) -> None:
    # The reference's detector: whatever it finds today, the figures follow from it.
    from reference.pii import RegexPiiMasker

    detect = RegexPiiMasker().detect
    m = merge([replay_scenario(tmp_path, SCORED, load_strategy("keep_all"))])["metrics"]
    figures = m["pii_detector"]
    expected: Counter[str] = Counter()
    scenario = parse_scenario(SCORED)
    for user in scenario.users:
        for step in user.timeline:
            assert isinstance(step, SayStep)
            if not (step.pii or user.pii_complete):
                continue
            found = detect(step.say)
            for mark in step.pii:
                start = step.say.index(mark.value)
                end = start + len(mark.value)
                expected[f"{mark.kind}.marked"] += 1
                expected[f"{mark.kind}.found"] += any(
                    x.start <= start and end <= x.end for x in found
                )
            if user.pii_complete:
                for x in found:
                    expected[f"{x.kind}.detected"] += 1
                    expected[f"{x.kind}.false_positives"] += not step.pii
    assert figures == detector_figures(expected)
    # Two users mark a name and a mobile each; precision counts the labelled user only.
    assert figures["name"]["marked"] == figures["mobile"]["marked"] == 2
    assert figures["all"]["detected"] == sum(len(detect(s.say)) for s in scenario.users[0].timeline)
    assert m["pii_detector_recall"] == figures["all"]["recall"]
    assert m["pii_detector_precision"] == figures["all"]["precision"]


def test_detector_figures_per_kind() -> None:
    tally = Counter(
        {"mobile.marked": 2, "mobile.found": 2, "mobile.detected": 3, "mobile.false_positives": 1,
         "name.marked": 4, "name.found": 1, "bank_card.detected": 1,
         "bank_card.false_positives": 1, "custom.detected": 1}
    )  # fmt: skip
    figures = detector_figures(tally)
    assert list(figures) == ["mobile", "bank_card", "name", "custom", "all"]
    assert figures["mobile"]["recall"] == 1.0 and figures["mobile"]["precision"] == 2 / 3
    assert figures["name"]["recall"] == 0.25 and figures["name"]["precision"] is None
    assert figures["bank_card"]["recall"] is None and figures["bank_card"]["precision"] == 0.0
    assert figures["all"]["recall"] == 3 / 6 and figures["all"]["precision"] == 3 / 5
    assert detector_figures(Counter()) == {}


def test_shards_and_cohorts_add_their_detector_counts() -> None:
    a, b = ShardResult(), ShardResult()
    a.pii_detector.update({"name.marked": 2, "name.found": 1})
    b.pii_detector.update({"name.marked": 1, "name.found": 1})
    a.pii_unmeasured, b.pii_unmeasured = 1, 2
    assert join_cohorts([a, b]).pii_detector == Counter({"name.marked": 3, "name.found": 2})
    m = merge([a, b])["metrics"]
    assert m["pii_detector"]["name"]["recall"] == 2 / 3 and m["pii_unmeasured"] == 3


# ---------------------------------------------------------------------- shown, imported
def _scenario(metrics: dict[str, Any]) -> dict[str, Any]:
    return {"strategies": [{"label": "x", "status": "ok", "metrics": metrics}]}


def test_the_detector_table_is_shown_once_per_scenario() -> None:
    detector = detector_figures(Counter({"phone.marked": 4, "phone.found": 3}))
    metrics = {"pii_detector": detector, "pii_unmeasured": 2}
    text = detector_terminal(_scenario(metrics))
    assert "phone" in text and "75.0%" in text and "2 statements marked sensitive" in text
    markdown = "\n".join(detector_markdown(_scenario(metrics)))
    assert "| `phone` |" in markdown and "75.0%" in markdown
    assert detector_terminal(_scenario({"pii_detector": {}})) == ""


def test_locomo_marks_the_speakers_names_they_say(locomo: Path) -> None:
    scenario = import_locomo(locomo)
    marked = [
        (step, entry)
        for user in scenario.users
        for step in user.timeline
        if isinstance(step, SayStep)
        for entry in step.pii
    ]
    assert marked and all(entry.kind == "name" for _, entry in marked)
    assert not any(user.pii_complete for user in scenario.users)
    for step, entry in marked:
        speaker = str(step.metadata["speaker"])
        assert entry.value in step.say[len(speaker) + 2 :], step.say  # in the words said

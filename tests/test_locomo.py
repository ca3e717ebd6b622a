"""The LoCoMo importer, on LoCoMo (the full release when the tests find it, else the
excerpt in tests/data: tests/fixtures/locomo.py) and on broken copies of it."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from memharness.scenarios.loader import load_scenario
from memharness.scenarios.locomo import (
    TURN_SPACING_S,
    LocomoError,
    convert_locomo,
    import_locomo,
    parse_locomo_date,
)
from memharness.scenarios.model import ProbeStep, SayStep, iso
from memharness.scenarios_cmd import scenarios
from tests.fixtures.locomo import is_excerpt

#: (conversations, turns, probes, adversarial, questions skipped for want of evidence)
FULL_COUNTS = (10, 5882, 1536, 446, 4)
EXCERPT_COUNTS = (1, 58, 20, 5, 0)  # conv-26, sessions 1-3 (scripts/locomo_excerpt.py)


def expected_counts(path: Path) -> tuple[int, int, int, int, int]:
    return EXCERPT_COUNTS if is_excerpt(path) else FULL_COUNTS


@pytest.fixture(scope="module")
def raw(locomo: Path) -> list[dict[str, Any]]:
    data: list[dict[str, Any]] = json.loads(locomo.read_text(encoding="utf-8"))
    return data


def test_counts(locomo: Path, raw: list[dict[str, Any]]) -> None:
    scenario, notes = convert_locomo(raw, source=str(locomo))
    questions = [qa for sample in raw for qa in sample["qa"]]
    turns = sum(
        len(value)
        for sample in raw
        for key, value in sample["conversation"].items()
        if key.startswith("session_") and isinstance(value, list)
    )
    assert [user.id for user in scenario.users] == [sample["sample_id"] for sample in raw]
    probes = [s for u in scenario.users for s in u.timeline if isinstance(s, ProbeStep)]
    says = [s for u in scenario.users for s in u.timeline if isinstance(s, SayStep)]
    assert len(says) == turns
    assert len(scenario.adversarial) == sum(qa["category"] == 5 for qa in questions)
    ordinary = sum(qa["category"] != 5 for qa in questions)
    skipped = sum("question skipped" in note for note in notes)
    assert len(probes) == ordinary - skipped
    counts = (len(raw), turns, len(probes), len(scenario.adversarial), skipped)
    assert counts == expected_counts(locomo)


def test_every_evidence_fact_exists_and_probes_come_last(locomo: Path) -> None:
    scenario = import_locomo(locomo)
    for user in scenario.users:
        facts = {f.id for s in user.timeline if isinstance(s, SayStep) for f in s.facts}
        last_turn = max(s.at for s in user.timeline if isinstance(s, SayStep))
        for step in user.timeline:
            if isinstance(step, ProbeStep):
                assert step.needed and set(step.needed) <= facts
                assert step.at > last_turn
    for question in scenario.adversarial:
        user = next(u for u in scenario.users if u.id == question.user)
        facts = {f.id for s in user.timeline if isinstance(s, SayStep) for f in s.facts}
        assert set(question.evidence) <= facts


def test_turns_are_said_at_their_session_date(locomo: Path) -> None:
    scenario = import_locomo(locomo)
    first, second = scenario.users[0].timeline[:2]
    assert isinstance(first, SayStep) and isinstance(second, SayStep)
    assert iso(first.at) == "2023-05-08T13:56:00Z"  # "1:56 pm on 8 May, 2023"
    assert second.at - first.at == TURN_SPACING_S
    assert first.say.startswith("Caroline: ")
    assert first.metadata == {"speaker": "Caroline"}  # scopes the keys of its facts
    assert first.facts[0].id == "D1:1" and first.session == "session_1"


def test_dirty_evidence_is_repaired(raw: list[dict[str, Any]]) -> None:
    sample = copy.deepcopy(raw[0])
    sample["qa"] = [
        {"question": "q0", "answer": "a", "category": 1, "evidence": ["D1:3; D1:5"]},
        {"question": "q1", "answer": "a", "category": 2, "evidence": ["D:1:4", "D1:04"]},
        {"question": "q2", "answer": "a", "category": 3, "evidence": ["D1:3 D1:99"]},
        {"question": "q3", "answer": "a", "category": 4, "evidence": ["D"]},
    ]
    scenario, notes = convert_locomo([sample], source="locomo.json")
    needed = [s.needed for s in scenario.users[0].timeline if isinstance(s, ProbeStep)]
    assert needed == [["D1:3", "D1:5"], ["D1:4"], ["D1:3"]]
    where = "locomo.json: conversation 0 (conv-26)"
    assert notes == [
        f"{where}: qa[2].evidence: 'D1:99' names no turn, dropped",
        f"{where}: qa[3].evidence: 'D' names no turn, dropped",
        f"{where}: qa[3]: no evidence left, question skipped",
    ]


def test_evidence_as_released(locomo: Path, raw: list[dict[str, Any]]) -> None:
    scenario, notes = convert_locomo(raw, source="locomo.json")
    if is_excerpt(locomo):  # cut to the questions whose evidence names its turns
        assert notes == []
        return
    conv49 = next(u for u in scenario.users if u.id == "conv-49")
    needed = [s.needed for s in conv49.timeline if isinstance(s, ProbeStep)]
    assert ["D9:1", "D4:4", "D4:6"] in needed  # "D9:1 D4:4 D4:6" in one string
    assert any("'D10:19' names no turn" in note for note in notes)


def test_parse_locomo_date() -> None:
    assert iso(parse_locomo_date("10:04 am on 19 December, 2023")) == "2023-12-19T10:04:00Z"


@pytest.mark.parametrize(
    ("break_it", "expected"),
    [
        (
            lambda d: d.insert(1, {k: v for k, v in d[0].items() if k != "sample_id"}),
            "conversation 1: sample_id: missing",
        ),
        (lambda d: d[0].pop("qa"), "conversation 0 (conv-26): qa: missing"),
        (
            lambda d: d[0]["conversation"].pop("session_3_date_time"),
            "(conv-26): conversation.session_3_date_time: missing",
        ),
        (
            lambda d: d[0]["conversation"].__setitem__("session_2_date_time", "someday"),
            "(conv-26): conversation.session_2_date_time: 'someday' is not like",
        ),
        (
            lambda d: d[0]["conversation"]["session_1"][4].pop("dia_id"),
            "(conv-26): conversation.session_1[4].dia_id: missing",
        ),
        (
            lambda d: d[0]["qa"][7].__setitem__("category", "2"),
            "(conv-26): qa[7].category: must be int",
        ),
        (
            lambda d: d[0]["qa"][7].__setitem__("category", 9),
            "(conv-26): qa[7].category: 9 is not 1-5",
        ),
        (lambda d: d[0]["qa"][3].pop("evidence"), "(conv-26): qa[3].evidence: missing"),
    ],
)
def test_bad_fields_name_conversation_and_field(
    raw: list[dict[str, Any]], break_it: Any, expected: str
) -> None:
    data = copy.deepcopy(raw)
    break_it(data)
    with pytest.raises(LocomoError, match=None) as info:
        convert_locomo(data, source="locomo.json")
    assert expected in str(info.value)


def test_cli_import_writes_a_valid_scenario(locomo: Path, tmp_path: Path) -> None:
    out = tmp_path / "locomo.yaml"
    result = CliRunner().invoke(scenarios, ["import-locomo", str(locomo), "-o", str(out)])
    assert result.exit_code == 0, result.output
    _, _, probes, adversarial, _ = expected_counts(locomo)
    assert f"{probes} probes, {adversarial} adversarial" in result.output
    assert load_scenario(out) == import_locomo(locomo)


def test_cli_import_without_the_file_says_where_to_get_it(tmp_path: Path) -> None:
    missing = tmp_path / "locomo10.json"
    result = CliRunner().invoke(scenarios, ["import-locomo", str(missing), "-o", "x.yaml"])
    assert result.exit_code == 1
    assert str(missing) in result.output
    assert "github.com/snap-research/locomo" in result.output
    assert "data/locomo10.json" in result.output

"""The LoCoMo importer, on the real file and on broken copies of it."""

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

REPO = Path(__file__).resolve().parents[1]
LOCOMO = (REPO / ".." / "shared" / "data" / "locomo" / "locomo.json").resolve()


@pytest.fixture(scope="module")
def raw() -> list[dict[str, Any]]:
    if not LOCOMO.is_file():
        pytest.fail(
            f"LoCoMo data not found at {LOCOMO} (expected ../shared/data/locomo/locomo.json)"
        )
    data: list[dict[str, Any]] = json.loads(LOCOMO.read_text(encoding="utf-8"))
    return data


def test_real_file_counts(raw: list[dict[str, Any]]) -> None:
    scenario = import_locomo(LOCOMO)
    questions = [qa for sample in raw for qa in sample["qa"]]
    turns = sum(
        len(value)
        for sample in raw
        for key, value in sample["conversation"].items()
        if key.startswith("session_") and isinstance(value, list)
    )
    assert len(scenario.users) == len(raw) == 10
    assert [user.id for user in scenario.users] == [sample["sample_id"] for sample in raw]
    probes = [s for u in scenario.users for s in u.timeline if isinstance(s, ProbeStep)]
    says = [s for u in scenario.users for s in u.timeline if isinstance(s, SayStep)]
    assert len(says) == turns == 5882
    assert len(scenario.adversarial) == sum(qa["category"] == 5 for qa in questions) == 446
    ordinary = sum(qa["category"] != 5 for qa in questions)
    # four questions of categories 1-4 have no evidence that names a turn; they are skipped
    assert len(probes) == ordinary - 4 == 1536


def test_every_evidence_fact_exists_and_probes_come_last(raw: list[dict[str, Any]]) -> None:
    scenario = import_locomo(LOCOMO)
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


def test_turns_are_said_at_their_session_date() -> None:
    scenario = import_locomo(LOCOMO)
    first, second = scenario.users[0].timeline[:2]
    assert isinstance(first, SayStep) and isinstance(second, SayStep)
    assert iso(first.at) == "2023-05-08T13:56:00Z"  # "1:56 pm on 8 May, 2023"
    assert second.at - first.at == TURN_SPACING_S
    assert first.say.startswith("Caroline: ")
    assert first.metadata == {"speaker": "Caroline"}  # scopes the keys of its facts
    assert first.facts[0].id == "D1:1" and first.session == "session_1"


def test_dirty_evidence_is_normalised(raw: list[dict[str, Any]]) -> None:
    _, notes = convert_locomo(raw, source="locomo.json")
    scenario = import_locomo(LOCOMO)
    conv49 = next(u for u in scenario.users if u.id == "conv-49")
    needed = [s.needed for s in conv49.timeline if isinstance(s, ProbeStep)]
    assert ["D9:1", "D4:4", "D4:6"] in needed  # "D9:1 D4:4 D4:6" in one string
    assert any("'D10:19' names no turn" in note for note in notes)


def test_parse_locomo_date() -> None:
    assert iso(parse_locomo_date("10:04 am on 19 December, 2023")) == "2023-12-19T10:04:00Z"


@pytest.mark.parametrize(
    ("break_it", "expected"),
    [
        (lambda d: d[2].pop("sample_id"), "conversation 2: sample_id: missing"),
        (lambda d: d[1].pop("qa"), "conversation 1 (conv-30): qa: missing"),
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


def test_cli_import_writes_a_valid_scenario(tmp_path: Path) -> None:
    out = tmp_path / "locomo.yaml"
    result = CliRunner().invoke(scenarios, ["import-locomo", str(LOCOMO), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "1536 probes, 446 adversarial" in result.output
    assert load_scenario(out) == import_locomo(LOCOMO)

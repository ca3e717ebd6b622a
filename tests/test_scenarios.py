"""The scenario format: every hand-written scenario validates; bad files name file, line, field."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from click.testing import CliRunner

from memharness.scenarios.loader import ScenarioError, load_scenario, parse_scenario, write_scenario
from memharness.scenarios.model import ForgetStep, ProbeStep, SayStep, User
from memharness.scenarios.stats import file_stats, scenario_stats
from memharness.scenarios.stream import stream_scenario
from memharness.scenarios_cmd import scenarios
from reference.policy.forget_commands import parse_forget_command

SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"
HAND_WRITTEN = sorted(SCENARIOS.glob("*.yaml"))

GOOD = """\
name: tiny
users:
  - id: a
    timeline:
      - at: 2024-03-01T09:00:00Z
        session: s1
        say: I always prefer window seats.
        facts:
          - {id: f1, type: preference, key: seat}
      - at: 1709287200
        session: s1
        say: I always prefer aisle seats now.
        facts:
          - {id: f2, type: preference, key: seat, supersedes: f1}
      - at: 2024-03-01T10:01:00+00:00
        session: s1
        probe: Which seat do I prefer?
        needed: [f2]
        forbidden: [f1]
"""


def _bad(tmp_path: Path, text: str) -> ScenarioError:
    path = tmp_path / "bad.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    return info.value


def test_hand_written_suite_is_there() -> None:
    names = {path.stem for path in HAND_WRITTEN}
    assert {
        "drift",
        "address_change",
        "order_temporary",
        "hotline_ticket",
        "pii_disclosure",
        "forget_commands",
        "long_gap",
        "chitchat_noise",
    } <= names


@pytest.mark.parametrize("path", HAND_WRITTEN, ids=lambda p: p.stem)
def test_hand_written_scenario_validates(path: Path) -> None:
    scenario = load_scenario(path)
    assert scenario.name == path.stem
    steps = [step for user in scenario.users for step in user.timeline]
    assert any(isinstance(step, ProbeStep) for step in steps)
    text = " ".join(step.say for step in steps if isinstance(step, SayStep))
    assert any("\u4e00" <= ch <= "\u9fff" for ch in text), "each scenario speaks Chinese too"
    assert any(ch.isascii() and ch.isalpha() for ch in text), "each scenario speaks English too"


@pytest.mark.parametrize("path", HAND_WRITTEN, ids=lambda p: p.stem)
def test_forget_steps_are_commands_of_their_scope(path: Path) -> None:
    for user in load_scenario(path).users:
        for step in user.timeline:
            if isinstance(step, ForgetStep):
                command = parse_forget_command(step.forget)
                assert command is not None, step.forget
                assert command.scope == step.scope


def test_long_gap_is_over_100_days() -> None:
    stats = scenario_stats(load_scenario(SCENARIOS / "long_gap.yaml"))
    assert stats.span_days > 100


def test_timestamps_iso_and_epoch_and_roundtrip() -> None:
    scenario = parse_scenario(GOOD, source="tiny.yaml")
    ats = [step.at for step in scenario.users[0].timeline]
    assert ats == [1709283600.0, 1709287200.0, 1709287260.0]
    out = io.StringIO()
    write_scenario(scenario, out)
    assert parse_scenario(out.getvalue(), source="again.yaml") == scenario


@pytest.mark.parametrize(
    ("old", "new", "line", "field", "message"),
    [
        (
            "supersedes: f1}",
            "supersedes: f9}",
            14,
            "users[0].timeline[1].facts[0].supersedes",
            "unknown fact 'f9'",
        ),
        (
            "{id: f1, type: preference, key: seat}",
            "{id: f1, type: preference, key: seat, supersedes: f2}",
            9,
            "users[0].timeline[0].facts[0].supersedes",
            "fact 'f2' is only asserted later",
        ),
        (
            "{id: f2, type",
            "{id: f1, type",
            14,
            "users[0].timeline[1].facts[0].id",
            "duplicate fact id 'f1'",
        ),
        ("at: 1709287200", "at: 1709280000", 10, "users[0].timeline[1].at", "goes back in time"),
        (
            "needed: [f2]",
            "needed: [f1]",
            18,
            "users[0].timeline[2].needed[0]",
            "superseded by 'f2'",
        ),
        (
            "forbidden: [f1]",
            "forbidden: [zz]",
            19,
            "users[0].timeline[2].forbidden[0]",
            "unknown fact 'zz'",
        ),
        (
            "type: preference, key: seat}",
            "type: wish, key: seat}",
            9,
            "users[0].timeline[0].facts[0].type",
            "'wish' is not one of 'session'",
        ),
        (
            "        session: s1\n        probe",
            "        sesion: s1\n        probe",
            16,
            "users[0].timeline[2].sesion",
            "unknown key 'sesion' (did you mean 'session'?)",
        ),
        (
            "at: 2024-03-01T09:00:00Z",
            "at: yesterday",
            5,
            "users[0].timeline[0].at",
            "not an ISO-8601",
        ),
    ],
)
def test_errors_name_file_line_and_field(
    tmp_path: Path, old: str, new: str, line: int, field: str, message: str
) -> None:
    assert old in GOOD
    error = _bad(tmp_path, GOOD.replace(old, new, 1))
    problem = next(p for p in error.problems if p.field == field)
    assert (problem.file, problem.line) == (str(tmp_path / "bad.yaml"), line)
    assert message in problem.message
    assert f"{tmp_path / 'bad.yaml'}:{line}: {field}: " in str(error)


def test_step_without_a_kind_and_duplicate_keys(tmp_path: Path) -> None:
    error = _bad(
        tmp_path, GOOD.replace("        probe: Which", "        say: hi\n        probe: Which")
    )
    assert error.problems[0].field == "users[0].timeline[2]"
    assert "exactly one of" in error.problems[0].message
    error = _bad(tmp_path, GOOD.replace("name: tiny\n", "name: tiny\nname: again\n"))
    assert (error.problems[0].line, error.problems[0].field) == (2, "name")


def test_yaml_syntax_and_empty_files(tmp_path: Path) -> None:
    assert _bad(tmp_path, "name: [unclosed\n").problems[0].field == "(yaml)"
    assert _bad(tmp_path, "").problems[0].field == "(document)"
    assert _bad(tmp_path, "- a list\n").problems[0].field == "(document)"


def test_cli_validate_and_stats(tmp_path: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(scenarios, ["validate", *map(str, HAND_WRITTEN)])
    assert result.exit_code == 0, result.output
    bad = tmp_path / "bad.yaml"
    bad.write_text(GOOD.replace("supersedes: f1}", "supersedes: f9}"), encoding="utf-8")
    result = runner.invoke(scenarios, ["validate", str(bad)])
    assert result.exit_code == 1
    assert f"{bad}:14: users[0].timeline[1].facts[0].supersedes: unknown fact 'f9'" in result.output
    result = runner.invoke(scenarios, ["stats", str(SCENARIOS / "drift.yaml")])
    assert result.exit_code == 0, result.output
    assert "users              3" in result.output and "probes" in result.output


def test_streaming_reader_agrees_with_the_loader(tmp_path: Path) -> None:
    for path in HAND_WRITTEN:
        users: list[User] = []
        info = stream_scenario(path, users.append)
        scenario = load_scenario(path)
        assert (info.name, info.users, users) == (
            scenario.name,
            len(scenario.users),
            scenario.users,
        )
        assert file_stats(path) == (scenario.name, scenario_stats(scenario))
    bad = GOOD.replace("supersedes: f1}", "supersedes: f9}")
    path = tmp_path / "bad.yaml"
    path.write_text(bad + "  - id: a\n    timeline: []\n", encoding="utf-8")
    with pytest.raises(ScenarioError) as streamed:
        stream_scenario(path, lambda user: None)
    assert str(streamed.value) == (  # every problem of the file at once
        f"{path}:14: users[0].timeline[1].facts[0].supersedes: unknown fact 'f9'\n"
        f"{path}:20: users[1].id: duplicate user id 'a'"
    )
    path.write_text(GOOD + "  - id: a\n    timeline: []\n", encoding="utf-8")
    with pytest.raises(ScenarioError, match=r"bad.yaml:20: users\[1\].id: duplicate user id 'a'"):
        stream_scenario(path, lambda user: None)
    path.write_text(GOOD.replace("name: tiny\n", ""), encoding="utf-8")
    with pytest.raises(ScenarioError, match="name: Field required"):
        stream_scenario(path, lambda user: None)

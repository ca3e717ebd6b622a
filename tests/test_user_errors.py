"""Configuration errors in the user's words: did-you-mean, names and durations in words,
every problem of a file in one pass."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from memharness.cli import main
from memharness.scenarios.loader import ScenarioError, load_scenario
from memharness.scenarios.stream import stream_scenario
from reference.durations import DurationError, parse_duration
from reference.policy.loading import load_strategy, parse_strategy
from reference.policy.strategy import StrategyError
from reference.suggest import closest, did_you_mean
from reference.yamldoc import Problem


def _problems(text: str) -> list[Problem]:
    with pytest.raises(StrategyError) as info:
        parse_strategy(text, source="mine.yaml")
    return info.value.problems


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "name: mine\ndescription: d\nttl:\n  by_typ: {episode: 60}\n",
            "mine.yaml:4: ttl.by_typ: unknown key 'by_typ' (did you mean 'by_type'?)",
        ),
        (
            "name: mine\ndescription: d\nslidng:\n  window_s: 60\n",
            "mine.yaml:3: slidng: unknown key 'slidng' (did you mean 'sliding'?)",
        ),
        (
            "name: mine\ndescription: d\nevents:\n  - event: e\n    keys_frm: k\n",
            "mine.yaml:5: events[0].keys_frm: unknown key 'keys_frm' (did you mean 'keys_from'?)",
        ),
        (
            "name: mine\ndescription: d\nzzz: 1\n",
            "mine.yaml:3: zzz: unknown key 'zzz'",
        ),
        (
            "name: My-Strategy\ndescription: d\n",
            "mine.yaml:1: name: 'My-Strategy' is not allowed: use lowercase letters, digits"
            " and _, starting with a letter, at most 40 characters",
        ),
        (
            "name: mine\ndescription: d\nttl:\n  by_category: {epsiode: 60}\n",
            "(did you mean 'episode'?)",
        ),
        (
            "name: mine\ndescription: d\nttl:\n  by_type: {chit_chat: 600}\n",
            "'chit_chat' is not one of 'session', 'conversation', "
            "'instruction', 'preference', 'profile', 'fact', 'entity', 'knowledge', 'sensitive' "
            "or 'episode' (chit-chat is 'conversation')",
        ),
        (
            "name: mine\ndescription: d\nevents:\n  - event: e\n    layers: [sttm]\n",
            "mine.yaml:5: events[0].layers[0]: 'sttm' is not one of 'stm' or 'ltm'"
            " (did you mean 'stm'?)",
        ),
        (
            "name: mine\ndescription: d\nttl:\n  default_s: 7w\n",
            "mine.yaml:4: ttl.default_s: '7w' is not a duration: unknown unit 'w'; expected"
            " seconds (3600) or a number with a unit d, h, m or s (7d, 1h30m, 45s)",
        ),
        (
            "name: mine\ndescription: d\nsliding:\n  window_s: -1d\n",
            "mine.yaml:4: sliding.window_s: must not be negative, got '-1d'",
        ),
    ],
)
def test_strategy_errors_say_what_to_write(text: str, expected: str) -> None:
    problems = _problems(text)
    assert len(problems) == 1, problems
    assert expected in str(problems[0])


def test_a_typo_of_a_required_field_is_one_problem_not_two() -> None:
    (problem,) = _problems("nme: mine\ndescription: d\n")
    assert str(problem) == "mine.yaml:1: nme: unknown key 'nme' (did you mean 'name'?)"


def test_every_problem_of_a_strategy_file_at_once_in_line_order() -> None:
    problems = _problems(
        "name: Mine\ndescription: d\nttl:\n  default_s: 7x\n  by_typ: {}\nevnts: []\n"
    )
    assert [(p.line, p.field) for p in problems] == [
        (1, "name"),
        (4, "ttl.default_s"),
        (5, "ttl.by_typ"),
        (6, "evnts"),
    ]


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("7d", 7 * 86_400),
        ("1h", 3_600),
        ("30m", 1_800),
        ("45s", 45),
        ("1h30m", 5_400),
        ("1d 12h", 129_600),
        ("2.5h", 9_000),
        ("3600", 3_600),
        (90, 90),
        (1.5, 1.5),
    ],
)
def test_durations_with_units(text: str | float, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("-1d", "must not be negative"),
        ("-5", "must not be negative"),
        (-5, "must not be negative"),
        ("7w", "unknown unit 'w'"),
        ("30ms", "unknown unit 'ms'"),
        ("30m1h", "is not a duration"),
        ("1h1h", "is not a duration"),
        ("soon", "is not a duration"),
        ("", "is empty"),
        ("inf", "finite"),
        (True, "must be a duration"),
    ],
)
def test_durations_refused(text: str | float, words: str) -> None:
    with pytest.raises(DurationError, match=words):
        parse_duration(text)


def test_a_strategy_takes_durations_with_units_and_means_seconds() -> None:
    strategy = parse_strategy(
        "name: mine\ndescription: d\nttl:\n  default_s: 7d\n  by_category: {episode: 1h30m}\n"
        "sliding:\n  window_s: 45s\nsweep_interval_s: 300\n"
    )
    assert strategy.ttl is not None and strategy.ttl.default_s == 7 * 86_400
    assert strategy.ttl.by_category["episode"] == 5_400  # type: ignore[index]
    assert strategy.sliding is not None and strategy.sliding.window_s == 45
    assert strategy.sweep_interval_s == 300
    plain = parse_strategy("name: mine\ndescription: d\nttl:\n  default_s: 604800\n")
    assert (
        plain.fingerprint()
        == parse_strategy("name: mine\ndescription: d\nttl:\n  default_s: 7d\n").fingerprint()
    )


def test_did_you_mean_is_one_rule() -> None:
    assert closest("hybird", ["keep_all", "hybrid", "hybrid_rules"]) == "hybrid"
    assert did_you_mean("hybird", ["hybrid"]) == " (did you mean 'hybrid'?)"
    assert did_you_mean("zzz", ["hybrid", "oracle"]) == ""


def test_unknown_strategy_names_get_a_suggestion() -> None:
    with pytest.raises(StrategyError, match=r"no strategy named 'hybird' \(did you mean 'hybrid'"):
        load_strategy("hybird")
    runner = CliRunner()
    shown = runner.invoke(main, ["strategies", "show", "hybird"])
    assert shown.exit_code != 0 and "(did you mean 'hybrid'?)" in shown.output
    run = runner.invoke(
        main, ["run", "--scenario", "scenarios/drift.yaml", "--strategy", "fixd_ttl"]
    )
    assert run.exit_code != 0 and "(did you mean 'fixed_ttl'?)" in run.output


SCENARIO = """\
name: tiny
users:
  - id: a
    timeline:
      - at: 2024-03-01T09:00:00Z
        session: s1
        say: I like window seats.
        facts: [{id: seat_pref, type: preferense}]
      - at: 2024-03-01T10:00:00Z
        session: s1
        say: I moved to Lyon.
        facts: [{id: home_city, type: profile}]
      - at: 2024-03-01T08:00:00Z
        sesion: s1
        probe: Where do I live?
        needed: [home_cty]
      - at: 2024-03-01T11:00:00Z
        session: s1
        probe: Which seat?
        needed: [seat_pref]
"""

EXPECTED = [
    (
        8,
        "users[0].timeline[0].facts[0].type",
        "'preferense' is not one of 'session', 'conversation', 'instruction', 'preference', "
        "'profile', 'fact', 'entity', 'knowledge', 'sensitive' or 'episode' "
        "(did you mean 'preference'?)",
    ),
    (
        13,
        "users[0].timeline[2].at",
        "goes back in time (before the previous step, 2024-03-01T10:00:00Z)",
    ),
    (14, "users[0].timeline[2].sesion", "unknown key 'sesion' (did you mean 'session'?)"),
    (
        16,
        "users[0].timeline[2].needed[0]",
        "unknown fact 'home_cty' (did you mean 'home_city'?)",
    ),
]


def test_a_scenarios_schema_and_cross_step_errors_come_in_one_pass(tmp_path: Path) -> None:
    """Types, time order and fact references, together; `seat_pref` (asserted by a step
    that does not validate) is not called unknown."""
    path = tmp_path / "bad.yaml"
    path.write_text(SCENARIO, encoding="utf-8")
    with pytest.raises(ScenarioError) as loaded:
        load_scenario(path)
    with pytest.raises(ScenarioError) as streamed:
        stream_scenario(path, lambda user: None)
    for error in (loaded.value, streamed.value):
        found = [(p.line, p.field, p.message) for p in error.problems]
        assert found == EXPECTED, str(error)
        assert all(p.file == str(path) for p in error.problems)
    result = CliRunner().invoke(main, ["scenarios", "validate", str(path)])
    assert result.exit_code == 1
    assert f"{path}:16: users[0].timeline[2].needed[0]: unknown fact 'home_cty'" in result.output


def test_the_streaming_reader_reports_every_bad_user(tmp_path: Path) -> None:
    path = tmp_path / "two.yaml"
    user = (
        "  - id: {id}\n    timeline:\n      - at: 2024-03-01T09:00:00Z\n        session: s\n"
        "        probe: q\n        needed: [nope]\n"
    )
    path.write_text(
        "name: two\nusers:\n" + user.format(id="a") + user.format(id="b"), encoding="utf-8"
    )
    handed: list[str] = []
    with pytest.raises(ScenarioError) as info:
        stream_scenario(path, lambda u: handed.append(u.id))
    assert [p.field for p in info.value.problems] == [
        "users[0].timeline[0].needed[0]",
        "users[1].timeline[0].needed[0]",
    ]
    assert handed == []  # a user with problems is not handed on

"""Strategies as validated YAML: built-ins, errors naming file/line/field, overrides,
fingerprints, the registry and `memharness strategies`."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from memharness.strategies_cmd import duration, strategies
from reference.errors import InvalidInput
from reference.models import Category, MemoryType
from reference.policy.loading import (
    BUILTINS,
    StrategyRegistry,
    list_strategies,
    load_strategy,
    load_strategy_file,
    parse_strategy,
)
from reference.policy.rules import DAY_S
from reference.policy.strategy import Strategy, StrategyError

HOUR = 3600.0
BUILTIN_NAMES = list(BUILTINS)


# ---------------------------------------------------------------------- built-ins
def test_the_registry_lists_exactly_the_shipped_yaml_files() -> None:
    shipped = {
        entry.name.removesuffix(".yaml")
        for entry in resources.files("reference.policy").joinpath("builtin").iterdir()
        if entry.name.endswith(".yaml")
    }
    assert shipped == set(BUILTINS)
    assert BUILTIN_NAMES == [
        "keep_all",
        "fixed_ttl",
        "typed_ttl",
        "sliding_window",
        "importance",
        "recency_decay",
        "event_driven",
        "hybrid",
        "hybrid_rules",
        "seed_mixed",
        "oracle",
    ]


@pytest.mark.parametrize("name", BUILTIN_NAMES)
def test_every_builtin_loads_validates_and_round_trips_through_yaml(name: str) -> None:
    strategy = load_strategy(name)
    assert strategy.name == name
    assert strategy.description and "\n" not in strategy.description
    again = parse_strategy(strategy.to_yaml(), source="round-trip")
    assert again == strategy
    assert again.fingerprint() == strategy.fingerprint()


def test_builtins_say_what_design_md_says() -> None:
    keep_all = load_strategy("keep_all")
    assert (keep_all.ttl, keep_all.sliding, keep_all.importance, keep_all.decay) == (None,) * 4
    assert (keep_all.events, keep_all.archival, keep_all.oracle) == ((), None, False)

    fixed = load_strategy("fixed_ttl")
    assert fixed.ttl is not None and fixed.ttl.by_type == {} and fixed.ttl.by_category == {}
    assert {fixed.ttl.ttl_for(kind) for kind in [*MemoryType, *Category]} == {7 * DAY_S}

    typed = load_strategy("typed_ttl").ttl
    assert typed is not None
    assert typed.ttl_for(MemoryType.SESSION) == 30 * 60
    assert typed.ttl_for(MemoryType.CONVERSATION) == HOUR
    assert typed.ttl_for(MemoryType.PREFERENCE) == typed.ttl_for(Category.PREFERENCE) == 30 * DAY_S
    assert typed.ttl_for(MemoryType.FACT) is None and typed.ttl_for(Category.FACT) is None
    sensitive = typed.ttl_for(MemoryType.SENSITIVE)
    assert sensitive is not None and sensitive <= HOUR

    hybrid = load_strategy("hybrid")
    # typed_ttl's TTLs, but for episodes: typed_ttl keeps them a month, hybrid until
    # archival (its consolidation floor chooses them, decay ranks them).
    assert typed.ttl_for(Category.EPISODE) == 30 * DAY_S
    assert hybrid.ttl is not None and hybrid.ttl.ttl_for(Category.EPISODE) is None
    assert hybrid.ttl == typed.model_copy(
        update={
            "by_type": {**typed.by_type, MemoryType.EPISODE: None},
            "by_category": {**typed.by_category, Category.EPISODE: None},
        }
    )
    assert hybrid.consolidates and not load_strategy("hybrid_rules").consolidates
    assert hybrid.decay is None and hybrid.pii is not None and hybrid.archival is not None
    assert {rule.event for rule in hybrid.events} >= {
        "profile_updated",
        "order_completed",
        "ticket_closed",
    }
    assert (hybrid.archival.inactive_s, hybrid.archival.delete_after_s) == (90 * DAY_S, 30 * DAY_S)
    assert hybrid.pii.anonymise_after_s == DAY_S

    importance = load_strategy("importance").importance
    assert importance is not None
    assert (importance.low_score, importance.low_score_ttl_s, importance.max_score) == (
        2.0,
        DAY_S,
        10.0,
    )
    assert load_strategy("recency_decay").decay is not None
    mixed = load_strategy("seed_mixed")
    assert mixed.ttl is not None and mixed.sliding is not None
    assert mixed.ttl.ttl_for(Category.PREFERENCE) == 30 * DAY_S
    assert mixed.ttl.ttl_for(MemoryType.FACT) is None
    assert mixed.sliding.window_s == HOUR and mixed.sliding.layers == ("stm",)
    assert [rule.event for rule in mixed.events] == ["ticket_closed"]
    oracle = load_strategy("oracle")
    assert oracle.oracle and oracle.ttl is None and oracle.events == ()


# ---------------------------------------------------------------------- YAML errors
BAD = """\
name: broken
description: a strategy with mistakes
ttl:
  default_s: -5
  by_type:
    chitchat: 60
    preference: 0
events:
  - event: profile_updated
    action: explode
  - keys_from: fields
"""


def test_yaml_errors_name_the_file_the_line_and_the_field(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text(BAD, encoding="utf-8")
    with pytest.raises(StrategyError) as info:
        load_strategy_file(path)
    found = [(p.line, p.field) for p in info.value.problems]
    assert found == [
        (4, "ttl.default_s"),
        (6, "ttl.by_type.chitchat"),
        (7, "ttl.by_type.preference"),
        (10, "events[0].action"),
        (11, "events[1].event"),
    ]
    assert all(p.file == str(path) for p in info.value.problems)
    message = str(info.value)
    assert message.splitlines()[0] == f"{path}:4: ttl.default_s: Input should be greater than 0"
    assert f"{path}:11: events[1].event: Field required" in message
    assert isinstance(info.value, InvalidInput) and info.value.field == "ttl.default_s"


@pytest.mark.parametrize(
    ("text", "line", "field", "words"),
    [
        ("name: x\ndescription: d\nttl:\n  default_s: 1\n  default_s: 2\n", 5, "ttl.default_s",
         "duplicate key (first at line 4)"),
        ("name: x\ndescription: [d\n", 3, "(yaml)", "expected"),
        ("- a\n", 1, "(document)", "mapping"),
        ("", 1, "(document)", "empty"),
        ("name: x\ndescription: d\nttll: {}\n", 3, "ttll",
         "unknown key 'ttll' (did you mean 'ttl'?)"),
        ("name: X-1\ndescription: d\n", 1, "name",
         "'X-1' is not allowed: use lowercase letters, digits and _, starting with a letter, at "
         "most 40 characters"),
        ("name: x\ndescription: d\nttl:\n  default_s: .inf\n", 4, "ttl.default_s", "finite"),
        ("name: x\ndescription: d\ndecay:\n  lambda_per_day: -0.1\n", 4, "decay.lambda_per_day",
         "greater than or equal to 0"),
        ("name: x\ndescription: d\nsliding:\n  window_s: 0\n", 4, "sliding.window_s",
         "greater than 0"),
        ("name: x\ndescription: d\nimportance:\n  low_score: 5\n  max_score: 3\n", 5,
         "importance.max_score", "at least low_score"),
        ("name: x\ndescription: d\narchival:\n  inactive_s: -1\n", 4, "archival.inactive_s",
         "greater than 0"),
        ("name: x\ndescription: d\npii:\n  anonymise_after_s: 0\n", 4, "pii.anonymise_after_s",
         "greater than 0"),
        ("name: x\ndescription: d\npii:\n  mask_session_stm: false\n", 4, "pii.mask_session_stm",
         "must be true"),
        ("name: x\ndescription: d\nevents:\n  - event: e\n    layers: []\n", 5,
         "events[0].layers", "must not be empty"),
        ("name: x\ndescription: d\nevents:\n  - event: e\n    layers: [disk]\n", 5,
         "events[0].layers[0]", "'stm' or 'ltm'"),
        ("name: x\ndescription: d\nttl:\n  default_s: 60\noracle: true\n", 5, "oracle",
         "remove ['ttl']"),
        ("name: x\ndescription: d\nsweep_batch_size: 0\n", 3, "sweep_batch_size", "greater"),
        ("name: x\n", 1, "description", "Field required"),
    ],
)  # fmt: skip
def test_each_kind_of_mistake_is_reported_at_its_line(
    text: str, line: int, field: str, words: str
) -> None:
    with pytest.raises(StrategyError) as info:
        parse_strategy(text, source="user.yaml")
    problem = info.value.problems[0]
    assert (problem.file, problem.line, problem.field) == ("user.yaml", line, field)
    assert words in problem.message
    assert str(info.value).startswith(f"user.yaml:{line}: {field}: ")


def test_an_unreadable_file_is_an_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(StrategyError, match=r"missing\.yaml: \(file\): cannot be read"):
        load_strategy_file(tmp_path / "missing.yaml")


def test_a_description_must_be_one_line() -> None:
    with pytest.raises(StrategyError, match="description: must be one line"):
        parse_strategy('name: x\ndescription: "one\\ntwo"\n')
    assert Strategy(name="x", description="  padded ").description == "padded"


# ---------------------------------------------------------------------- overrides
def test_with_params_returns_a_new_validated_strategy() -> None:
    typed = load_strategy("typed_ttl")
    short = typed.with_params({"ttl.default_s": 600, "ttl.by_type.conversation": 120})
    assert short.ttl is not None and typed.ttl is not None
    assert (short.ttl.default_s, short.ttl.ttl_for(MemoryType.CONVERSATION)) == (600.0, 120.0)
    assert typed.ttl.default_s == HOUR  # the original is untouched
    assert short.name == typed.name

    decayed = typed.with_params({"decay.lambda_per_day": 0.3})  # switches a block on
    assert decayed.decay is not None and decayed.decay.lambda_per_day == 0.3
    assert decayed.decay.age_from == "written"
    assert load_strategy("hybrid").with_params({"decay": None, "archival": None}).decay is None
    events = load_strategy("event_driven").with_params({"events.0.action": "delete"})
    assert events.events[0].action == "delete"


@pytest.mark.parametrize(
    ("overrides", "field", "words"),
    [
        ({"ttl.default_s": -1}, "ttl.default_s", "greater than 0"),
        (
            {"ttl.defualt_s": 1},
            "ttl.defualt_s",
            "unknown key 'defualt_s' (did you mean 'default_s'?)",
        ),
        ({"decay.lambda_per_day": -1}, "decay.lambda_per_day", "greater than or equal"),
        ({"events.9.action": "delete"}, "events.9.action", "not an index"),
        ({"name.x": 1}, "name.x", "not a block"),
        ({"oracle": True}, "oracle", "remove"),
    ],
)
def test_bad_overrides_name_the_parameter(
    overrides: dict[str, object], field: str, words: str
) -> None:
    with pytest.raises(StrategyError) as info:
        load_strategy("typed_ttl").with_params(overrides)
    assert info.value.field == field
    assert words in str(info.value)


# ---------------------------------------------------------------------- fingerprints
def test_fingerprint_is_stable_and_ignores_spelling_of_the_same_config() -> None:
    hybrid = load_strategy("hybrid")
    assert hybrid.fingerprint() == load_strategy("hybrid").fingerprint()
    assert len(hybrid.fingerprint()) == 12 and int(hybrid.fingerprint(), 16) >= 0
    plain = parse_strategy("name: a\ndescription: first\nttl: {default_s: 60}\n")
    spelled = parse_strategy(
        "description: other words\nname: b\nforget_commands: true\n"
        "ttl: {by_type: {}, default_s: 60.0}\nevents: []\n"
    )
    assert plain.fingerprint() == spelled.fingerprint()  # behaviour, not name or wording
    layers = parse_strategy("name: a\ndescription: d\nevents: [{event: e, layers: [stm, ltm]}]")
    swapped = parse_strategy("name: a\ndescription: d\nevents: [{event: e, layers: [ltm, stm]}]")
    assert layers.fingerprint() == swapped.fingerprint()


#: Run results are keyed by fingerprint: a new option must not re-key these.
FINGERPRINTS = {
    "keep_all": "8b67b0274a6e",
    "fixed_ttl": "bbf15c0d4f86",
    "typed_ttl": "11df367f855a",
    "sliding_window": "4ff93ea73238",
    "importance": "974cf97ac32f",
    "recency_decay": "3d1425d51a78",
    "event_driven": "ce086d163485",
    # hybrid and hybrid_rules ask before forgetting everything (a change of behaviour);
    # typed_ttl, hybrid and hybrid_rules lost `conversation` TTLs equal to their default
    # (the reference stores no such record) and hybrid_rules its `episode` TTLs (nothing to
    # match without consolidation): same behaviour, new keys
    "hybrid": "b09af051a6fd",
    "hybrid_rules": "67bf01121ea6",
    "oracle": "536d484f4d12",
}


def test_builtin_fingerprints_stay_what_results_were_keyed_by() -> None:
    # Less the `retrieval` block the built-ins gained with lexical retrieval (a change of
    # behaviour, so of fingerprint): dense only, they are the strategies keyed before.
    dense = {name: load_strategy(name).with_params({"retrieval": None}) for name in FINGERPRINTS}
    assert {name: s.fingerprint() for name, s in dense.items()} == FINGERPRINTS


def test_the_default_promotion_is_the_only_setting_left_out_of_a_fingerprint() -> None:
    rules = parse_strategy("name: a\ndescription: d\n")
    spelled = parse_strategy("name: a\ndescription: d\npromotion: rules\n")
    consolidating = parse_strategy("name: a\ndescription: d\npromotion: consolidate\n")
    floor = consolidating.with_params({"consolidation.min_importance": 4})
    assert rules.fingerprint() == spelled.fingerprint()
    assert len({rules.fingerprint(), consolidating.fingerprint(), floor.fingerprint()}) == 3


def test_every_builtin_has_its_own_fingerprint() -> None:
    prints = [load_strategy(name).fingerprint() for name in BUILTIN_NAMES]
    assert len(set(prints)) == len(prints)


@given(st.floats(min_value=1.0, max_value=1e8), st.floats(min_value=1.0, max_value=1e8))
def test_fingerprint_changes_exactly_when_a_parameter_does(a: float, b: float) -> None:
    base = load_strategy("fixed_ttl")
    first, second = base.with_params({"ttl.default_s": a}), base.with_params({"ttl.default_s": b})
    assert (first.fingerprint() == second.fingerprint()) == (a == b)


# ---------------------------------------------------------------------- registry
USER = "name: my_ttl\ndescription: my own TTL\nttl:\n  default_s: 120\n"


def test_register_a_file_or_a_directory(tmp_path: Path) -> None:
    (tmp_path / "one.yaml").write_text(USER, encoding="utf-8")
    (tmp_path / "two.yml").write_text(USER.replace("my_ttl", "my_other"), encoding="utf-8")
    registry = StrategyRegistry()
    assert registry.register(tmp_path) == ["my_ttl", "my_other"]
    assert registry.names()[: len(BUILTINS)] == BUILTIN_NAMES
    assert registry.names()[len(BUILTINS) :] == ["my_ttl", "my_other"]
    assert registry.get("my_ttl").ttl is not None
    assert registry.register(tmp_path / "one.yaml") == ["my_ttl"]  # again: idempotent
    assert [s.name for s in list_strategies(files=[tmp_path / "one.yaml"])][-1] == "my_ttl"
    # Registries are independent: nothing leaked into a fresh one.
    with pytest.raises(StrategyError, match=r"no strategy named 'my_ttl' .*; known: keep_all"):
        load_strategy("my_ttl")


def test_a_user_file_cannot_take_a_builtin_name(tmp_path: Path) -> None:
    path = tmp_path / "clash.yaml"
    path.write_text("description: mine\nname: hybrid\n", encoding="utf-8")
    with pytest.raises(StrategyError) as info:
        StrategyRegistry().register(path)
    assert str(info.value).startswith(f"{path}:2: name: 'hybrid' is already registered")


def test_load_by_path_and_empty_directories(tmp_path: Path) -> None:
    path = tmp_path / "mine.yaml"
    path.write_text(USER, encoding="utf-8")
    assert load_strategy(str(path)).name == "my_ttl"
    assert load_strategy(path).name == "my_ttl"
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(StrategyError, match="holds no"):
        StrategyRegistry().register(empty)


# ---------------------------------------------------------------------- CLI
def test_cli_lists_every_strategy_on_one_line_with_its_parameters() -> None:
    result = CliRunner().invoke(strategies, [])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert [line.split()[0] for line in lines] == BUILTIN_NAMES
    by_name = {line.split()[0]: line for line in lines}
    assert "ttl default=7d" in by_name["fixed_ttl"]
    assert "preference=30d" in by_name["typed_ttl"]
    assert "archival inactive=90d delete=30d" in by_name["hybrid"]
    assert "decay lambda=0.1/d" in by_name["recency_decay"]
    seed_mixed = "sliding window=1h types=conversation,instruction,sensitive layers=stm"
    assert seed_mixed in by_name["seed_mixed"]


def test_cli_show_prints_yaml_that_loads_back() -> None:
    result = CliRunner().invoke(strategies, ["show", "hybrid"])
    assert result.exit_code == 0, result.output
    hybrid = load_strategy("hybrid")
    assert result.output.startswith(f"# fingerprint: {hybrid.fingerprint()}\n")
    assert parse_strategy(result.output) == hybrid
    assert yaml.safe_load(result.output)["archival"]["inactive_s"] == 90 * DAY_S


def test_cli_includes_user_files(tmp_path: Path) -> None:
    path = tmp_path / "mine.yaml"
    path.write_text(USER, encoding="utf-8")
    listed = CliRunner().invoke(strategies, ["--file", str(path)])
    assert listed.exit_code == 0, listed.output
    assert listed.output.splitlines()[-1].split()[0] == "my_ttl"
    for args in (["--file", str(path), "show", "my_ttl"], ["show", "my_ttl", "--file", str(path)]):
        shown = CliRunner().invoke(strategies, args)
        assert shown.exit_code == 0, shown.output
        assert "default_s: 120.0" in shown.output


def test_cli_errors_are_messages_not_tracebacks(tmp_path: Path) -> None:
    unknown = CliRunner().invoke(strategies, ["show", "nope"])
    assert unknown.exit_code == 1
    assert "no strategy named 'nope'" in unknown.output
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\ndescription: d\nttl:\n  default_s: -1\n", encoding="utf-8")
    broken = CliRunner().invoke(strategies, ["--file", str(bad)])
    assert broken.exit_code == 1
    assert f"{bad}:4: ttl.default_s: Input should be greater than 0" in broken.output


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(None, "never"), (3600, "1h"), (2592000, "30d"), (1800, "30m"), (90, "90s"), (5400, "90m")],
)
def test_durations_read_in_human_units(seconds: float | None, text: str) -> None:
    assert duration(seconds) == text

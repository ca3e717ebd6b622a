"""Rules that match nothing the reference stores (`reference/policy/reach.py`) and the
`memharness strategies check` command that lists them."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from memharness.cli import main
from memharness.sim.peer_mirror import one_layer, peer_kind
from reference.models import MemoryType
from reference.policy.expiry import expires_at_on_write
from reference.policy.intent import RuleIntentFilter
from reference.policy.loading import BUILTINS, load_strategy, parse_strategy
from reference.policy.reach import findings, unreachable

HEAD = "name: s\ndescription: d\n"


def test_a_ttl_for_chit_chat_is_reported_as_matching_nothing() -> None:
    strategy = parse_strategy(HEAD + "ttl:\n  by_type:\n    conversation: 600\n")
    (line,) = unreachable(strategy)
    assert line.startswith("ttl.by_type.conversation matches nothing")
    assert "chit-chat is dropped, never stored" in line


def test_the_intent_filter_never_keeps_an_utterance_without_a_kind() -> None:
    # What the `conversation` warning rests on: every kept utterance has a kind, and
    # chit-chat is not kept (so a `conversation` record is never written).
    intent = RuleIntentFilter()
    for text in ["thanks!", "今天天气不错", "haha", "I prefer aisle seats", "帮我订明天的票",
                 "my dentist is Dr. Lee", "remember that the gate code is 4411"]:  # fmt: skip
        decision = intent.classify(text)
        assert not decision.keep or decision.kind not in (None, MemoryType.CONVERSATION)


def test_types_and_layers_a_rule_cannot_reach() -> None:
    text = HEAD + (
        "sliding:\n  window_s: 3600\n  types: [instruction, preference]\n  layers: [ltm]\n"
        "events:\n  - event: order_completed\n    categories: [episode]\n"
        "  - event: ticket_closed\n    types: [preference]\n    layers: [ltm]\n"
    )
    lines = unreachable(parse_strategy(text))
    assert lines == [
        "sliding.types: instruction matches nothing: instruction is never stored in LTM",
        "events[0] (order_completed).categories: episode matches nothing: episodes exist "
        "only with promotion: consolidate",
        "events[1] (ticket_closed).types applies to STM records only, and layers has no stm",
    ]
    consolidating = parse_strategy(text + "promotion: consolidate\n")
    assert not any("episode" in line for line in unreachable(consolidating))


def test_a_rule_that_reaches_something_is_not_reported() -> None:
    assert unreachable(parse_strategy(HEAD + "ttl:\n  by_type:\n    sensitive: 60\n")) == []
    for name in ("keep_all", "fixed_ttl", "event_driven", "sliding_window", "importance"):
        assert unreachable(load_strategy(name)) == [], name
    assert len(BUILTINS) > 5


def test_strategies_check_lists_them_and_fails_on_a_rule_nothing_follows(tmp_path: Path) -> None:
    path = tmp_path / "chat.yaml"
    path.write_text(HEAD + "ttl:\n  by_type:\n    conversation: 600\npromotion: consolidate\n")
    runner = CliRunner()
    result = runner.invoke(main, ["strategies", "check", str(path)])
    assert result.exit_code == 1
    assert "ttl.by_type.conversation matches nothing: the reference never stores" in result.output
    clean = runner.invoke(main, ["strategies", "check", "event_driven"])
    assert clean.exit_code == 0 and "every rule can match something" in clean.output
    shown = runner.invoke(main, ["strategies", "show", str(path)])
    assert shown.exit_code == 0 and "warning: ttl.by_type.conversation" in shown.output


def test_a_chit_chat_rule_without_consolidation_governs_a_system_under_tests_chit_chat(
    tmp_path: Path,
) -> None:
    # A system under test stores chit-chat; without consolidation the mirror types it
    # `conversation`, so the rule the reference never uses sets its deadline there.
    text = HEAD + "ttl:\n  by_type:\n    conversation: 600\n"
    (finding,) = findings(parse_strategy(text))
    assert finding.peers_follow and "governs a system under test's chit-chat" in finding.line
    for strategy, deadline in [
        (parse_strategy(text), 600.0),
        (parse_strategy(HEAD + "ttl:\n  by_type:\n    preference: 600\n"), None),
    ]:
        kind, importance, _ = peer_kind("haha, nice weather today", strategy)
        assert kind is MemoryType.CONVERSATION
        policy = one_layer(strategy, native_expiry=False)
        assert expires_at_on_write(policy, kind=kind, importance=importance, now=0.0) == deadline
    path = tmp_path / "chat.yaml"
    path.write_text(text)
    listed = CliRunner().invoke(main, ["strategies", "check", str(path)])
    assert listed.exit_code == 0 and "matches nothing in the reference" in listed.output


def test_every_built_in_rule_matches_something_in_the_reference_or_a_system_under_test() -> None:
    for name in BUILTINS:
        assert all(f.peers_follow for f in findings(load_strategy(name))), name
    # The one that keeps a chit-chat rule: it is what sets a system under test's deadline.
    (finding,) = findings(load_strategy("seed_mixed"))
    assert finding.line.startswith("sliding.types: conversation matches nothing in the reference")
    strategy = load_strategy("seed_mixed").with_params({"sliding.window_s": 120})
    kind, importance, _ = peer_kind("haha, nice weather today", strategy)
    policy = one_layer(strategy, native_expiry=False)
    assert expires_at_on_write(policy, kind=kind, importance=importance, now=0.0) == 120.0
    result = CliRunner().invoke(main, ["strategies", "check", *BUILTINS])
    assert result.exit_code == 0, result.output

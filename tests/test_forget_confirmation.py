"""Forget everything with confirmation (R13 in docs/requirements.md): the replies that
confirm or refuse, the strategy setting, and the dialogue in the engine on the in-memory
and embedded backends, on the virtual clock.

Under `forget_commands.confirm_everything` (on in `hybrid`), "forget everything" erases
nothing and asks; the same user's next turn in that conversation confirms within the
time limit (then everything is erased in every layer), refuses, comes too late, or is
unrelated (then the request is dropped and the message is an ordinary turn).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from reference.clock import VirtualClock
from reference.forgetting.dialogue import PENDING_KEY
from reference.ltm.filters import REDACTED
from reference.policy.confirmation import language_of, parse_confirmation, reply_text
from reference.policy.loading import load_strategy, load_strategy_file
from reference.policy.strategy import StrategyError, validate_strategy
from tests.test_engine import (  # noqa: F401 (fixtures)
    ALICE,
    ALL_LTM,
    ALL_STM,
    BOB,
    MakeSystem,
    backend,
    make_system,
    seed,
    stored,
    visible,
)

CONFIRMS = [
    "yes", "Yes!", "yes please", "Yes, delete everything.", "ok, go ahead", "confirm",
    "I'm sure", "delete it all", "sure, thanks",
    "是的", "是", "确认", "确定", "确定删除", "好的，删吧", "全部删除", "嗯", "确认删除。",
]  # fmt: skip
REFUSES = [
    "no", "No thanks.", "cancel", "don't", "don't delete anything", "wait", "never mind",
    "I changed my mind", "取消", "不要", "算了", "不", "别删", "不确定", "先不要",
]  # fmt: skip
NEITHER = [
    "yes I like tea", "Yes, and book a taxi to the airport", "I like tea", "yes no",
    "please", "thanks", "what is my address?", "是的我喜欢喝茶", "是的，取消", "谢谢",
    "确定吗", "不，删除一切吧然后再说" + "x" * 80, "", "   ",
]  # fmt: skip


@pytest.mark.parametrize("text", CONFIRMS)
def test_confirming_replies(text: str) -> None:
    assert parse_confirmation(text) == "confirm"


@pytest.mark.parametrize("text", REFUSES)
def test_refusing_replies(text: str) -> None:
    assert parse_confirmation(text) == "refuse"


@pytest.mark.parametrize("text", NEITHER)
def test_replies_that_are_neither(text: str) -> None:
    assert parse_confirmation(text) is None


def test_replies_speak_the_users_language() -> None:
    assert language_of("删除我所有的数据") == "zh" and language_of("forget me") == "en"
    ask_zh = reply_text("ask", "zh", within_s=120)
    assert "2分钟" in ask_zh and "确认" in ask_zh and "？" in ask_zh
    ask_en = reply_text("ask", "en", within_s=90)
    assert "90 seconds" in ask_en and "?" in ask_en and "erase everything" in ask_en
    assert reply_text("cancelled", "en") != reply_text("cancelled", "zh")


def test_the_setting_in_strategy_files() -> None:
    assert load_strategy("hybrid").forget_commands.confirm_everything
    assert load_strategy("hybrid").forget_commands.confirm_within_s == 120
    assert not load_strategy("keep_all").forget_commands.confirm_everything
    base = {"name": "s", "description": "d"}
    off = validate_strategy({**base, "forget_commands": False}, source=None)
    assert not off.forget_commands.enabled
    block = {"confirm_everything": True, "confirm_within_s": "5m"}
    rule = validate_strategy({**base, "forget_commands": block}, source=None).forget_commands
    assert (rule.enabled, rule.confirm_everything, rule.confirm_within_s) == (True, True, 300)
    # `true` hashes as before the block existed; asking changes the fingerprint.
    plain = validate_strategy({**base, "forget_commands": True}, source=None)
    asking = validate_strategy({**base, "forget_commands": block}, source=None)
    assert plain.fingerprint() == validate_strategy(base, source=None).fingerprint()
    assert asking.fingerprint() != plain.fingerprint()


@pytest.mark.parametrize(
    ("value", "field"),
    [
        ({"confirm_within_s": -5}, "confirm_within_s"),
        ({"confirm_within_s": "soon"}, "confirm_within_s"),
        ({"confirm_everything": "perhaps"}, "confirm_everything"),
        ({"confirm": True}, "confirm"),
        ({"enabled": False, "confirm_everything": True}, "forget_commands"),
    ],
)
def test_bad_values_name_file_line_and_field(tmp_path: Path, value: object, field: str) -> None:
    path = tmp_path / "mine.yaml"
    text = "name: mine\ndescription: d\n" + yaml.safe_dump({"forget_commands": value})
    path.write_text(text)
    with pytest.raises(StrategyError) as err:
        load_strategy_file(path)
    message = str(err.value)
    assert "mine.yaml" in message and "forget_commands" in message and field in message
    assert "mine.yaml:3" in message or "mine.yaml:4" in message  # the block's line


def asking(make_system: MakeSystem, **params: object) -> object:  # noqa: F811
    strategy = load_strategy("hybrid").with_params(
        {"promotion": "rules", "consolidation": None, **params}
    )
    return make_system(strategy)


def test_forget_everything_asks_and_erases_nothing(make_system: MakeSystem) -> None:  # noqa: F811
    system = asking(make_system)
    seed(system)
    said = system.turn(user_id=ALICE, session_id="s1", text="Forget everything about me.")
    assert said.confirmation == "asked" and said.forgotten is None
    assert said.reply is not None and "?" in said.reply and "erase everything" in said.reply
    assert not said.stm.accepted  # the command is not stored
    assert stored(system) == (ALL_STM, ALL_LTM)
    assert system.session.list_user_sessions(user_id=ALICE)
    state = system.session.peek(user_id=ALICE, session_id="s1")
    assert state is not None and state.task_state[PENDING_KEY]["until"] == said.at + 120
    zh = system.turn(user_id=BOB, session_id="b1", text="删除我所有的数据")
    assert zh.confirmation == "asked" and zh.reply is not None and "确定" in zh.reply


def test_confirming_in_time_erases_every_layer(
    make_system: MakeSystem,  # noqa: F811
    clock: VirtualClock,
) -> None:
    system = asking(make_system)
    seed(system)
    seed(system, BOB, "b1")
    system.turn(user_id=ALICE, session_id="s1", text="忘记关于我的一切")
    clock.advance(119)
    said = system.turn(user_id=ALICE, session_id="s1", text="确认")
    assert said.confirmation == "confirmed" and said.reply == reply_text("erased", "zh")
    report = said.forgotten
    assert report is not None and report.scope == "everything"
    assert (len(report.stm_removed), len(report.ltm_erased)) == (3, 2)
    assert stored(system) == (set(), set())
    assert system.session.list_user_sessions(user_id=ALICE) == []
    audit = system.ltm.audit_log(user_id=ALICE)
    assert audit and all(v in (None, REDACTED) for e in audit for v in (e.old_value, e.new_value))
    assert system.ltm.last_active(user_ids=[ALICE]) == {}
    assert visible(system, BOB, "b1") == (ALL_STM, ALL_LTM)  # the other user is untouched


@pytest.mark.parametrize("answer", ["no", "取消"])
def test_refusing_cancels(make_system: MakeSystem, answer: str) -> None:  # noqa: F811
    system = asking(make_system)
    seed(system)
    system.turn(user_id=ALICE, session_id="s1", text="forget everything about me")
    said = system.turn(user_id=ALICE, session_id="s1", text=answer)
    assert said.confirmation == "refused" and said.forgotten is None
    assert said.reply == reply_text("cancelled", language_of(answer))
    assert not said.stm.accepted
    later = system.turn(user_id=ALICE, session_id="s1", text="yes")  # nothing pending now
    assert later.confirmation is None and later.forgotten is None
    assert stored(system) == (ALL_STM, ALL_LTM)


def test_a_late_reply_cancels(make_system: MakeSystem, clock: VirtualClock) -> None:  # noqa: F811
    system = asking(make_system, **{"forget_commands.confirm_within_s": 60})
    seed(system)
    system.turn(user_id=ALICE, session_id="s1", text="delete all my data")
    clock.advance(61)
    said = system.turn(user_id=ALICE, session_id="s1", text="yes")
    assert said.confirmation == "expired" and said.forgotten is None
    assert said.reply == reply_text("expired", "en")
    assert stored(system) == (ALL_STM, ALL_LTM)


def test_an_unrelated_message_cancels_and_is_a_turn(make_system: MakeSystem) -> None:  # noqa: F811
    system = asking(make_system)
    seed(system)
    system.turn(user_id=ALICE, session_id="s1", text="forget everything about me")
    said = system.turn(user_id=ALICE, session_id="s1", text="Please book a taxi to the airport.")
    assert said.confirmation == "dropped" and said.forgotten is None
    assert said.stm.accepted  # processed as an ordinary turn
    assert said.reply == reply_text("cancelled", "en")
    assert system.turn(user_id=ALICE, session_id="s1", text="yes").forgotten is None
    assert stored(system)[1] == ALL_LTM


def test_only_the_same_user_in_the_same_conversation_confirms(
    make_system: MakeSystem,  # noqa: F811
) -> None:
    system = asking(make_system)
    seed(system)
    seed(system, BOB, "b1")
    system.turn(user_id=ALICE, session_id="s1", text="forget everything about me")
    other = system.turn(user_id=BOB, session_id="s1", text="yes")  # same session id, other user
    assert other.confirmation is None and other.forgotten is None
    elsewhere = system.turn(user_id=ALICE, session_id="s9", text="yes")  # another conversation
    assert elsewhere.confirmation is None and elsewhere.forgotten is None
    assert stored(system) == (ALL_STM, ALL_LTM) and stored(system, BOB) == (ALL_STM, ALL_LTM)
    said = system.turn(user_id=ALICE, session_id="s1", text="yes")
    assert said.confirmation == "confirmed" and stored(system) == (set(), set())
    assert stored(system, BOB) == (ALL_STM, ALL_LTM)


def test_without_confirmation_everything_is_erased_at_once(make_system: MakeSystem) -> None:  # noqa: F811
    system = make_system("keep_all")
    seed(system)
    said = system.turn(user_id=ALICE, session_id="s1", text="forget everything about me")
    assert said.confirmation is None and said.forgotten is not None
    assert said.reply == reply_text("erased", "en")
    assert stored(system) == (set(), set())


def test_forget_commands_off_erases_nothing(make_system: MakeSystem) -> None:  # noqa: F811
    system = make_system(load_strategy("keep_all").with_params({"forget_commands": False}))
    seed(system)
    for text in ("forget everything about me", "forget my address", "重置对话"):
        said = system.turn(user_id=ALICE, session_id="s1", text=text)
        assert said.forgotten is None and said.reply is None
    assert stored(system)[1] >= {"address", "shipping"}
    assert stored(system)[0] >= ALL_STM


def test_a_new_command_drops_the_request_and_is_carried_out(make_system: MakeSystem) -> None:  # noqa: F811
    system = asking(make_system)
    seed(system)
    system.turn(user_id=ALICE, session_id="s1", text="forget everything about me")
    said = system.turn(user_id=ALICE, session_id="s1", text="forget my address")
    assert said.confirmation == "dropped" and said.forgotten is not None
    assert said.forgotten.scope == "topic" and said.reply is not None
    assert system.turn(user_id=ALICE, session_id="s1", text="yes").forgotten is None
    assert stored(system)[1] == {"shipping"}

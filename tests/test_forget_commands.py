"""Forget commands in Chinese and English: scope, topic, keys, and the near-misses."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reference.errors import InvalidInput
from reference.models import MemoryType
from reference.policy.forget_commands import ForgetCommand, parse_forget_command
from reference.policy.forget_topics import topic_keys
from reference.policy.intent import is_forget_command
from reference.promotion import PROFILE_KEYS, TOPICS, extract_fact

EVERYTHING = ForgetCommand("everything")
SESSION = ForgetCommand("session")
BACK = ForgetCommand("topic")  # "forget that": the user's previous utterance

#: Seconds within which the worst-case texts must be parsed (see the backtracking test).
BACKTRACKING_BOUND_S = 30.0


def topic(name: str) -> ForgetCommand:
    return ForgetCommand("topic", name)


COMMANDS: list[tuple[str, ForgetCommand]] = [
    # a topic
    ("忘记我的地址", topic("地址")),
    ("请忘掉我刚才说的电话", topic("电话")),
    ("忘记我说过的关于地址的事", topic("地址")),
    ("谢谢，请忘记我的地址", topic("地址")),
    ("能忘掉我的地址吗？", topic("地址")),
    ("麻烦你忘记我的邮箱吧", topic("邮箱")),
    ("把我的地址删掉", topic("地址")),
    ("把我的手机号从记忆里删掉", topic("手机号")),
    ("删除我的地址", topic("地址")),
    ("不要记录我的身份证号", topic("身份证号")),
    ("forget my address", topic("address")),
    ("Forget what I said about my address.", topic("address")),
    ("please forget my phone number", topic("phone number")),
    ("delete my email from memory", topic("email")),
    ("Can you forget my address?", topic("address")),
    ("I want you to forget my company", topic("company")),
    ("hi, forget my email please", topic("email")),
    ("Forget my address, I moved.", topic("address")),
    ("remove my address", topic("address")),
    ("don't save my card number", topic("card number")),
    ("stop tracking my location", topic("location")),
    ("Forget everything about my birthday", topic("birthday")),
    ("Forget the address I gave you", topic("address")),
    ("forget my address and phone number", topic("address and phone number")),
    ("忘记我的地址和电话", topic("地址和电话")),
    # pointing back at what was just said
    ("Don't remember this", BACK),
    ("forget that", BACK),
    ("别记这个", BACK),
    ("删掉这条", BACK),
    ("把它忘了吧", BACK),
    ("delete what I just said", BACK),
    # everything about the user
    ("forget everything about me", EVERYTHING),
    ("Forget everything I told you", EVERYTHING),
    ("forget me", EVERYTHING),
    ("delete all my data", EVERYTHING),
    ("please delete my personal data", EVERYTHING),
    ("I want to erase all my information", EVERYTHING),
    ("wipe your memory", EVERYTHING),
    ("reset your memory", EVERYTHING),
    ("忘记关于我的一切", EVERYTHING),
    ("删除我所有的数据", EVERYTHING),
    ("删除关于我的所有记录", EVERYTHING),
    ("删除我的个人信息", EVERYTHING),
    ("忘记我", EVERYTHING),
    ("清空你的记忆", EVERYTHING),
    # this conversation
    ("重置对话", SESSION),
    ("清空这次对话", SESSION),
    ("重新开始", SESSION),
    ("我们重新开始吧", SESSION),
    ("开始新的对话", SESSION),
    ("忘记之前的对话", SESSION),
    ("reset the conversation", SESSION),
    ("start over", SESSION),
    ("Let's start over.", SESSION),
    ("clear the chat", SESSION),
    ("forget everything we discussed today", SESSION),
    # several clauses: the widest command wins
    ("reset the conversation and also forget everything about me", EVERYTHING),
    ("重置对话，然后删除我所有的数据", EVERYTHING),
    ("重置对话然后删除我所有的数据", EVERYTHING),
    ("reset the chat and forget my email", SESSION),  # otherwise the first one counts
]

NOT_COMMANDS: list[str] = [
    # asks to remember
    "don't forget my birthday",
    "Do not forget to call me",
    "别忘了提醒我",
    "别忘了我的生日",
    "不要忘记我的生日",
    # statements and questions about forgetting
    "I forgot my password",
    "I always forget my keys",
    "did you forget my order?",
    "忘记密码怎么办",
    "忘记我的密码怎么办",
    "我忘记我的地址了",
    "忘记我的地址了",
    "你忘记我的地址了吗",
    "把密码忘了",
    "我想忘记他",
    # account and order actions, not memory
    "删除我的订单",
    "delete my account",
    "delete that",
    "clear my cart",
    "reset my password",
    "重置密码",
    "重启路由器",
    "删除这个文件",
    # no command at all
    "我的地址是北京",
    "remind me tomorrow",
    "My address is 12 Baker Street",
    "帮我订明天的机票",
    "",
]


@pytest.mark.parametrize(("text", "expected"), COMMANDS)
def test_commands(text: str, expected: ForgetCommand) -> None:
    assert parse_forget_command(text) == expected
    assert is_forget_command(text)


@pytest.mark.parametrize("text", NOT_COMMANDS)
def test_near_misses_are_not_commands(text: str) -> None:
    assert parse_forget_command(text) is None
    assert not is_forget_command(text)


def test_refers_back() -> None:
    assert BACK.refers_back
    assert not topic("地址").refers_back and not EVERYTHING.refers_back


@pytest.mark.parametrize(
    ("scope", "name", "field"),
    [("everything", "地址", "topic"), ("session", "x", "topic"), ("all", None, "scope")],
)
def test_command_validation(scope: str, name: str | None, field: str) -> None:
    with pytest.raises(InvalidInput) as info:
        ForgetCommand(scope, name)  # type: ignore[arg-type]
    assert info.value.field == field
    with pytest.raises(InvalidInput, match=r"^topic: "):
        ForgetCommand("topic", "  ")


@pytest.mark.parametrize(
    ("name", "keys"),
    [
        ("地址", {"address"}),
        ("住址", {"address"}),
        ("address", {"address"}),
        ("my home address", {"address"}),
        ("phone", {"phone"}),
        ("phone number", {"phone"}),
        ("电话", {"phone"}),
        ("手机", {"phone"}),
        ("手机号", {"phone"}),
        ("email", {"email"}),
        ("邮箱", {"email"}),
        ("company", {"company"}),
        ("公司", {"company"}),
        ("name", {"name"}),
        ("姓名", {"name"}),
        ("birthday", {"birthday"}),
        ("生日", {"birthday"}),
    ],
)
def test_topic_keys_synonyms(name: str, keys: set[str]) -> None:
    assert topic_keys(name) == keys


@pytest.mark.parametrize(
    ("name", "included"),
    [
        ("默认地址", {"address", "默认地址"}),  # "我的默认地址是..." is stored as 默认地址
        ("address and phone number", {"address", "phone"}),
        ("地址和电话", {"address", "phone"}),
        ("card number", {"card_number"}),  # not a phone number
        ("passport number", {"passport_number"}),
        ("seat", {"seat"}),
        ("靠窗", {"seat"}),
        ("coffee", {"drink"}),
        ("preferences", {name for name, _ in TOPICS}),
        ("偏好", {name for name, _ in TOPICS}),
        ("profile", set(PROFILE_KEYS)),
    ],
)
def test_topic_keys_beyond_synonyms(name: str, included: set[str]) -> None:
    keys = topic_keys(name)
    assert included <= keys
    if name == "card number":
        assert "phone" not in keys


def test_short_words_match_whole_words_only() -> None:
    assert "drink" not in topic_keys("team")  # "tea"
    assert "job" not in topic_keys("jobsite plans")


@pytest.mark.parametrize(
    ("statement", "command"),
    [
        ("我的地址是上海市浦东新区世纪大道100号", "忘记我的地址"),
        ("我的默认地址是北京", "忘记我的默认地址"),
        ("My phone number is 13812345678", "please forget my phone number"),
        ("My passport number is E12345678", "forget my passport number"),
        ("我的公司是星辰科技", "删除我的公司"),
    ],
)
def test_topic_finds_the_key_promotion_wrote(statement: str, command: str) -> None:
    fact = extract_fact(statement, MemoryType.PROFILE)
    parsed = parse_forget_command(command)
    assert fact is not None and parsed is not None and parsed.topic is not None
    assert fact.key in topic_keys(parsed.topic)


def test_topic_keys_refuses_empty() -> None:
    with pytest.raises(InvalidInput, match=r"^topic: "):
        topic_keys(" ")


def test_non_string_is_refused() -> None:
    with pytest.raises(InvalidInput, match=r"^text: "):
        parse_forget_command(None)  # type: ignore[arg-type]


def test_no_catastrophic_backtracking() -> None:
    nasty = [
        "please " * 500 + "forget",
        "请" * 1000 + "忘记",
        "forget " + "my " * 1000 + "?",
        "把" + "我的" * 1000 + "忘",
        "delete " + "all " * 1000 + "x",
    ]
    # Catastrophic backtracking on these inputs is exponential in their hundreds of
    # repetitions (it would not end); polynomial matching takes well under a second. The
    # bound only separates the two, so a busy machine cannot fail it.
    start = time.perf_counter()
    for text in nasty:
        parse_forget_command(text)
    assert time.perf_counter() - start < BACKTRACKING_BOUND_S


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=60))
def test_any_text_parses_to_a_valid_command_or_none(text: str) -> None:
    command = parse_forget_command(text)
    assert command is None or command.scope in ("topic", "everything", "session")
    assert is_forget_command(text) is (command is not None)

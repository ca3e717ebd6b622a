"""The rule-based intent filter: what goes to short-term memory, in Chinese and English."""

from __future__ import annotations

import time

import pytest

from reference.models import MemoryType
from reference.policy.intent import RuleIntentFilter, is_forget_command, is_stable_preference
from reference.text_interfaces import IntentFilter

INSTRUCTION = MemoryType.INSTRUCTION
PREFERENCE = MemoryType.PREFERENCE
PROFILE = MemoryType.PROFILE
FACT = MemoryType.FACT

KEPT: list[tuple[str, MemoryType]] = [
    # instructions and requests
    ("帮我订明天下午3点去机场的车", INSTRUCTION),
    ("查一下订单号ORD-2024-001的物流状态", INSTRUCTION),
    ("把收货地址改成北京市朝阳区建国路1号", INSTRUCTION),
    ("请把上周三的会议纪要发我", INSTRUCTION),
    ("我想退货", INSTRUCTION),
    ("设置一个明早7点的闹钟", INSTRUCTION),
    ("谢谢，帮我订明天的机票", INSTRUCTION),
    ("你好，我想查一下我的订单", INSTRUCTION),
    ("查一下明天北京的天气", INSTRUCTION),
    ("Book a table for two at 7pm", INSTRUCTION),
    ("send the report to Bob", INSTRUCTION),
    ("Find me a hotel near the station", INSTRUCTION),
    ("Please call me later", INSTRUCTION),
    ("remind me to buy milk", INSTRUCTION),
    ("I'd like to book a flight to Tokyo", INSTRUCTION),
    ("Can you help me with my refund?", INSTRUCTION),
    ("Where is my package?", INSTRUCTION),
    ("How much is the shipping fee?", INSTRUCTION),
    ("Thanks! Now cancel my subscription.", INSTRUCTION),
    # forget commands are instructions
    ("忘记我的地址", INSTRUCTION),
    ("请忘掉我刚才说的电话", INSTRUCTION),
    ("重置对话", INSTRUCTION),
    ("forget my address", INSTRUCTION),
    ("Forget everything about me", INSTRUCTION),
    ("reset the conversation", INSTRUCTION),
    # preferences
    ("我喜欢靠窗的座位", PREFERENCE),
    ("默认用顺丰发货", PREFERENCE),
    ("以后都用中文回复我", PREFERENCE),
    ("我不吃香菜", PREFERENCE),
    ("我对花生过敏", PREFERENCE),
    ("我一直用顺丰", PREFERENCE),
    ("I prefer aisle seats", PREFERENCE),
    ("Always ship with SF Express", PREFERENCE),
    ("By default, send invoices to my work email", PREFERENCE),
    ("From now on reply in English", PREFERENCE),
    ("never call me before 9am", PREFERENCE),
    ("My favorite color is blue", PREFERENCE),
    ("I'm allergic to peanuts", PREFERENCE),
    # profile facts
    ("我的地址是北京市海淀区中关村大街1号", PROFILE),
    ("我住在上海浦东", PROFILE),
    ("我叫张三", PROFILE),
    ("我在腾讯工作", PROFILE),
    ("我们公司在深圳", PROFILE),
    ("My address is 12 Baker Street", PROFILE),
    ("I live in Berlin", PROFILE),
    ("My name is Alice", PROFILE),
    ("I work at Acme Corp", PROFILE),
    ("Hi, I'm Tom", PROFILE),
    ("I moved to Shenzhen last month", PROFILE),
    # facts
    ("my flight is on May 3", FACT),
    ("我的订单号是123", FACT),
    ("我的航班是明天早上8点", FACT),
    ("The meeting is at 3pm tomorrow", FACT),
    ("空调不制冷了", FACT),
    ("I never received my package", FACT),
    ("Alice is my manager", FACT),
    ("We have a meeting with Acme Corp on Friday", FACT),
    ("快递单号SF1234567890已经签收", FACT),
    ("我的车牌号是京A12345", FACT),
    ("预算在500元以内", FACT),
    ("我们一家四口，两个大人两个小孩", FACT),
    ("Budget is under 200 euros a night", FACT),
    ("We're traveling with two kids", FACT),
    ("My order #A1234 hasn't arrived yet", FACT),
    # personal events, as in LoCoMo's conversations
    ("I went to a LGBTQ support group yesterday and it was so powerful.", FACT),
    ("Well I also made a dairy-free chocolate cake the other day!", FACT),
    ("I'll call her tomorrow.", FACT),
    ("我昨天去医院复查了", FACT),
    # requirements inside a task
    ("酒店要靠近地铁站的", INSTRUCTION),
    ("I'm vegetarian", PREFERENCE),
    ("I'm a big fan of pottery", PREFERENCE),
]

REJECTED: list[tuple[str, str]] = [
    ("你好", "greeting"),
    ("您好！", "greeting"),
    ("Hi there!", "greeting"),
    ("Good morning!", "greeting"),
    ("how are you doing today?", "greeting"),
    ("你好吗", "greeting"),
    ("再见", "greeting"),
    ("谢谢！", "thanks"),
    ("thank you so much!", "thanks"),
    ("Thanks a lot", "thanks"),
    ("好嘞，辛苦了", "thanks"),
    ("ok", "acknowledgement"),
    ("好的", "acknowledgement"),
    ("好的谢谢", "acknowledgement"),
    ("嗯嗯", "acknowledgement"),
    ("收到，谢谢", "acknowledgement"),
    ("sounds good to me", "acknowledgement"),
    ("I see", "acknowledgement"),
    ("That's all for now, thanks", "acknowledgement"),
    ("Nope, that's it", "acknowledgement"),
    ("好的，就这些", "acknowledgement"),
    ("没有了，谢谢", "acknowledgement"),
    ("haha", "laughter"),
    ("lol", "laughter"),
    ("哈哈哈哈", "laughter"),
    ("haha ok bye", "laughter"),
    ("今天天气真好", "small talk"),
    ("nice weather today", "small talk"),
    ("今天好累啊", "small talk"),
    ("你是机器人吗", "small talk"),
    ("tell me a joke", "small talk"),
    ("😀😀", "punctuation or emoji only"),
    ("???", "punctuation or emoji only"),
    ("……", "punctuation or emoji only"),
    ("   ", "punctuation or emoji only"),
]

#: Seconds within which the worst-case texts must be parsed (see the backtracking test).
BACKTRACKING_BOUND_S = 30.0


@pytest.fixture(scope="module")
def rules() -> RuleIntentFilter:
    return RuleIntentFilter()


@pytest.mark.parametrize(("text", "kind"), KEPT)
def test_kept_with_kind(rules: RuleIntentFilter, text: str, kind: MemoryType) -> None:
    decision = rules.classify(text)
    assert decision.keep, decision
    assert decision.kind is kind, decision
    assert decision.reason


@pytest.mark.parametrize(("text", "reason"), REJECTED)
def test_chitchat_rejected_with_reason(rules: RuleIntentFilter, text: str, reason: str) -> None:
    decision = rules.classify(text)
    assert not decision.keep, decision
    assert decision.kind is None
    assert decision.reason == f"chit-chat: {reason}"


@pytest.mark.parametrize("text", ["那就这样吧", "this is great", "I'm fine", "emm"])
def test_other_contentless_rejected(rules: RuleIntentFilter, text: str) -> None:
    decision = rules.classify(text)
    assert not decision.keep
    assert decision.reason.startswith("chit-chat")


@pytest.mark.parametrize(
    ("text", "stable"),
    [
        ("Always ship with SF Express", True),
        ("use SF Express by default", True),
        ("from now on, reply in English", True),
        ("默认用顺丰发货", True),
        ("我总是坐靠窗的位置", True),
        ("以后都用中文回复我", True),
        ("我一直用支付宝付款", True),
        ("I prefer aisle seats", False),
        ("我喜欢靠窗的座位", False),
        ("我一直在等快递", False),  # "all along", not a habit
        ("The app always crashes", False),  # a complaint
        ("I never received my package", False),
        ("以后再说吧", False),
        ("忘记我的默认地址", False),  # a forget command is no preference
    ],
)
def test_is_stable_preference(text: str, stable: bool) -> None:
    assert is_stable_preference(text) is stable


@pytest.mark.parametrize(
    ("text", "forget"),
    [
        ("忘记我的地址", True),
        ("删除关于我的所有记录", True),
        ("重置对话", True),
        ("forget my address", True),
        ("reset the conversation", True),
        ("please delete my personal data", True),
        ("Don't remember this", True),
        ("don't forget my birthday", False),  # asks to remember
        ("别忘了我的生日", False),
        ("不要忘记我的生日", False),
        ("删除我的订单", False),  # an order action, not a forget command
        ("我的地址是北京", False),
        ("remind me tomorrow", False),
    ],
)
def test_is_forget_command(text: str, forget: bool) -> None:
    assert is_forget_command(text) is forget


def test_long_text_is_not_dismissed_as_chitchat(rules: RuleIntentFilter) -> None:
    text = "hahaha " * 200 + "please book a room at the Hilton"
    assert rules.classify(text).keep


def test_no_catastrophic_backtracking(rules: RuleIntentFilter) -> None:
    # Repeated chit-chat pieces with no separator are the worst case for regex backtracking.
    nasty = ["ha" * 400 + "!x", "好" * 500 + "吗?", "ok " * 300 + "zz", "我的" * 300]
    # Catastrophic backtracking on these inputs is exponential in their hundreds of
    # repetitions (it would not end); polynomial matching takes well under a second. The
    # bound only separates the two, so a busy machine cannot fail it.
    start = time.perf_counter()
    for text in nasty:
        rules.classify(text)
    assert time.perf_counter() - start < BACKTRACKING_BOUND_S


def test_conftest_fixture_is_the_rule_filter(intent: IntentFilter) -> None:
    assert isinstance(intent, RuleIntentFilter)
    assert intent.classify("帮我订票").keep

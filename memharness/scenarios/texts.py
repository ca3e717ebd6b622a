"""Phrases the generators draw from, per domain, in English and Chinese.

Queries repeat the words of the statement they probe (the topic word and "prefer" /
"默认"), so a memory that retrieves by meaning or by words can answer them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Lang = Literal["en", "zh"]
DOMAINS = ("ecommerce", "hotline", "assistant", "travel")


@dataclass(frozen=True, slots=True)
class PrefSpec:
    """A preference topic: how it is said, changed and asked for; values as (en, zh)."""

    label_en: str
    label_zh: str
    values: tuple[tuple[str, str], ...]

    def say(self, lang: Lang, value: tuple[str, str]) -> str:
        if lang == "en":
            return f"For {self.label_en}, I always prefer {value[0]}."
        return f"{self.label_zh}我默认选{value[1]}。"

    def drift(self, lang: Lang, value: tuple[str, str]) -> str:
        if lang == "en":
            return f"From now on, for {self.label_en}, I always prefer {value[0]} instead."
        return f"以后{self.label_zh}我默认改成{value[1]}。"

    def query(self, lang: Lang) -> str:
        if lang == "en":
            return f"What do I prefer for {self.label_en}?"
        return f"{self.label_zh}我默认选什么？"


PREFS: dict[str, dict[str, PrefSpec]] = {
    "ecommerce": {
        "shipping": PrefSpec(
            "shipping delivery",
            "快递配送",
            (
                ("standard delivery", "中通快递"),
                ("express delivery", "顺丰快递"),
                ("a pickup locker", "快递柜自提"),
            ),
        ),
        "payment": PrefSpec(
            "payment",
            "支付方式",
            (("Alipay", "支付宝"), ("WeChat Pay", "微信支付"), ("a credit card", "信用卡")),
        ),
    },
    "hotline": {
        "contact": PrefSpec(
            "being contacted",
            "联系方式",
            (("a phone call", "电话联系"), ("a text message", "短信通知"), ("email", "邮件")),
        ),
        "language": PrefSpec(
            "the service language",
            "服务语言",
            (("English", "英文"), ("Chinese", "中文"), ("Cantonese", "粤语")),
        ),
    },
    "assistant": {
        "drink": PrefSpec(
            "my coffee or tea",
            "咖啡饮品",
            (("a latte", "拿铁咖啡"), ("green tea", "绿茶"), ("an americano", "美式咖啡")),
        ),
        "schedule": PrefSpec(
            "meeting times",
            "会议时间",
            (("the morning", "上午"), ("the afternoon", "下午"), ("the evening", "晚上")),
        ),
    },
    "travel": {
        "seat": PrefSpec(
            "my flight seat",
            "航班座位",
            (
                ("a window seat", "靠窗座位"),
                ("an aisle seat", "过道座位"),
                ("an exit row seat", "安全出口座位"),
            ),
        ),
        "hotel": PrefSpec(
            "my hotel room",
            "酒店房间",
            (
                ("a quiet room", "安静的房间"),
                ("a high floor room", "高楼层房间"),
                ("a non-smoking room", "无烟房间"),
            ),
        ),
    },
}


@dataclass(frozen=True, slots=True)
class EventSpec:
    """A business event and the task-scoped fact it invalidates.

    `say` and `query` are formatted with `ref` (the order, ticket or booking id) and
    `value`; `ref_field` is the metadata and payload field the event matches on.
    """

    event: str
    ref_field: str
    prefix: str
    fact_type: str
    key: str
    say: dict[Lang, str]
    query: dict[Lang, str]
    values: dict[Lang, tuple[str, ...]]


EVENTS: dict[str, EventSpec] = {
    "ecommerce": EventSpec(
        event="order_completed",
        ref_field="order_id",
        prefix="A",
        fact_type="preference",
        key="order_note",
        say={
            "en": "For order {ref}, please {value}.",
            "zh": "订单{ref}请{value}。",
        },
        query={"en": "How should order {ref} be handled?", "zh": "订单{ref}要怎么处理？"},
        values={
            "en": ("gift-wrap it", "deliver it after 6 pm", "leave it at the front desk"),
            "zh": ("包装成礼物", "晚上6点后送达", "放在前台"),
        },
    ),
    "hotline": EventSpec(
        event="ticket_closed",
        ref_field="ticket_id",
        prefix="T",
        fact_type="fact",
        key="claim",
        say={
            "en": "I want to report for ticket {ref}: {value}.",
            "zh": "我要报修，工单{ref}：{value}。",
        },
        query={"en": "What is the status of ticket {ref}?", "zh": "工单{ref}处理得怎么样了？"},
        values={
            "en": (
                "the streetlight on my street is broken",
                "a water pipe burst by the school",
                "the lift in my building is stuck",
            ),
            "zh": ("我家门口的路灯坏了", "学校旁边的水管爆了", "我们楼的电梯停运了"),
        },
    ),
    "assistant": EventSpec(
        event="profile_updated",
        ref_field="fields",
        prefix="",
        fact_type="profile",
        key="address",
        say={"en": "My address is {value}.", "zh": "我的地址是{value}。"},
        query={"en": "What is my address?", "zh": "我的地址是哪里？"},
        values={
            "en": ("12 Elm Street", "48 Oak Avenue", "7 Harbour Lane", "3 Mill Road"),
            "zh": (
                "北京市海淀区中关村大街1号",
                "上海市浦东新区世纪大道100号",
                "杭州市西湖区文三路8号",
            ),
        },
    ),
    "travel": EventSpec(
        event="order_completed",
        ref_field="order_id",
        prefix="B",
        fact_type="preference",
        key="booking_note",
        say={
            "en": "For booking {ref}, I need {value}.",
            "zh": "预订{ref}我需要{value}。",
        },
        query={"en": "What do I need for booking {ref}?", "zh": "预订{ref}我需要什么？"},
        values={
            "en": ("a late check-in", "an airport pickup", "a baby cot in the room"),
            "zh": ("晚点入住", "接机服务", "房间加婴儿床"),
        },
    ),
}

NOISE: dict[Lang, tuple[str, ...]] = {
    "en": (
        "Hi there!",
        "Thanks, that's helpful.",
        "Haha, okay.",
        "The weather is nice today.",
        "Hmm, let me think.",
        "Good morning!",
        "Cool, cool.",
        "You're great, thank you!",
    ),
    "zh": (
        "你好呀！",
        "谢谢，很有帮助。",
        "哈哈，好的。",
        "今天天气不错。",
        "嗯，我想想。",
        "早上好！",
        "好嘞。",
        "辛苦啦，谢谢你！",
    ),
}

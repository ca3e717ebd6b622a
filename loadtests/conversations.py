"""Scripted conversations that the load test plays, English and Chinese.

A conversation is a short list of utterance templates with `{slot}` fields, filled per
play from a seeded RNG: users talk about the same things in different words and numbers,
so most query embeddings miss the cache the way real traffic does, while the intent
filter, PII masking and promotion still see the shapes they are built for (chit-chat,
instructions, stable preferences, profile facts, phone numbers and e-mails).

`load_conversations` is the one entry point the locustfile calls; the scenario YAML files
of a later issue replace it without touching the user class.
"""

from __future__ import annotations

import random
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["BUILTIN", "SLOTS", "Conversation", "load_conversations", "render"]


@dataclass(frozen=True, slots=True)
class Conversation:
    """One scripted conversation: a name, a language, and its utterance templates."""

    name: str
    lang: str
    turns: tuple[str, ...]


# Slot values. A template may use any of these; missing slots are a bug caught by the tests.
SLOTS: Mapping[str, Sequence[str]] = {
    "n": ("two", "three", "four", "five", "six"),
    "hour": ("6pm", "7pm", "7:30pm", "8pm", "noon", "9am"),
    "day": ("tomorrow", "Friday", "Saturday", "next Monday", "the 14th"),
    "restaurant": ("Luigi's", "the Golden Dragon", "Chez Paul", "Sakura", "the Blue Door"),
    "city": ("Berlin", "Lisbon", "Osaka", "Toronto", "Nairobi", "Lima", "Hanoi"),
    "courier": ("SF Express", "DHL", "UPS", "FedEx", "JD Logistics"),
    "seat": ("window", "aisle"),
    "drink": ("green tea", "a flat white", "an oat latte", "black coffee", "jasmine tea"),
    "diet": ("vegetarian", "vegan", "gluten-free", "halal"),
    "item": ("a printer", "headphones", "a desk lamp", "running shoes", "a kettle"),
    "order": tuple(f"A{n}" for n in range(10_000, 10_060, 7)),
    "street": ("Maple Street", "Harbour Road", "King's Avenue", "Elm Close", "Station Lane"),
    "zh_city": ("上海", "北京", "深圳", "杭州", "成都", "武汉"),
    "zh_district": ("浦东新区", "海淀区", "南山区", "西湖区", "武侯区", "江汉区"),
    "zh_road": ("世纪大道", "中关村大街", "科技园路", "文三路", "人民南路", "解放大道"),
    "zh_courier": ("顺丰", "京东物流", "中通", "圆通", "EMS"),
    "zh_drink": ("绿茶", "美式咖啡", "拿铁", "乌龙茶", "豆浆"),
    "zh_time": ("上午", "下午", "晚上", "周末"),
    "zh_item": ("打印机", "耳机", "台灯", "跑鞋", "电水壶"),
}

BUILTIN: tuple[Conversation, ...] = (
    Conversation(
        "en-dinner",
        "en",
        (
            "Hi there!",
            "Please book a table for {n} at {hour} {day} at {restaurant}.",
            "My email is {email} and my phone is {phone}.",
            "I am {diet}, please remember that for every booking.",
            "What time did I book the table for?",
        ),
    ),
    Conversation(
        "en-shipping",
        "en",
        (
            "Hello, I have a question about order {order}.",
            "I always want deliveries by {courier}.",
            "My address is {house} {street}, {city}.",
            "Please ship {item} to that address by {day}.",
            "How will my parcel be delivered?",
        ),
    ),
    Conversation(
        "en-travel",
        "en",
        (
            "Good morning!",
            "I need a flight to {city} on {day}.",
            "I prefer {seat} seats on every flight.",
            "From now on I drink {drink} in the morning.",
            "Where am I flying and which seat do I like?",
            "Thanks, that's all.",
        ),
    ),
    Conversation(
        "zh-shipping",
        "zh",
        (
            "你好",
            "我的地址是{zh_city}市{zh_district}{zh_road}{house}号",
            "以后发货默认用{zh_courier}",
            "请帮我买一个{zh_item}，寄到家里",
            "我的手机号是{phone}",
            "我的快递用哪家？",
        ),
    ),
    Conversation(
        "zh-assistant",
        "zh",
        (
            "今天天气真好",
            "请提醒我{zh_time}开会",
            "我每天早上都喝{zh_drink}，以后默认帮我点这个",
            "我的邮箱是{email}",
            "我早上喜欢喝什么？",
        ),
    ),
    Conversation(
        "mixed-support",
        "mixed",
        (
            "Hi, my {item} stopped working.",
            "订单号是{order}，请帮我查一下",
            "My phone is {phone}, call me after {hour}.",
            "我的地址改成{zh_city}市{zh_district}{zh_road}{house}号",
            "Please open a repair ticket for order {order}.",
            "What is my current address?",
        ),
    ),
)


def load_conversations() -> tuple[Conversation, ...]:
    """The conversations the load test plays: the built-in set for now."""
    return BUILTIN


def render(conversation: Conversation, rng: random.Random) -> list[str]:
    """The utterances of one play: slots filled from `rng`, one value per slot per play.

    A slot keeps its value for the whole conversation, so "order {order}" names the same
    order twice, the way a user would.
    """
    values = {name: rng.choice(options) for name, options in SLOTS.items()}
    values["phone"] = "1" + rng.choice("3589") + "".join(rng.choices(string.digits, k=9))
    values["email"] = "".join(rng.choices(string.ascii_lowercase, k=7)) + "@example.com"
    values["house"] = str(rng.randint(1, 999))
    return [turn.format_map(values) for turn in conversation.turns]

"""Scripted conversations that the load test plays, English and Chinese.

A conversation is a short list of utterance templates with `{slot}` fields, filled per
play from a seeded RNG: users talk about the same things with different names, numbers,
dates and times, so most query embeddings miss the cache the way real traffic does
(greetings, questions and PII-masked sentences repeat, and hit it), while the intent
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


# Slot values drawn from fixed pools. Numbers, dates, times, order ids, phones and e-mails
# are generated in `render`, so that most utterances are new to the embedding cache.
SLOTS: Mapping[str, Sequence[str]] = {
    "restaurant": ("Luigi's", "the Golden Dragon", "Chez Paul", "Sakura", "the Blue Door"),
    "city": ("Berlin", "Lisbon", "Osaka", "Toronto", "Nairobi", "Lima", "Hanoi", "Oslo"),
    "courier": ("SF Express", "DHL", "UPS", "FedEx", "JD Logistics"),
    "seat": ("window", "aisle"),
    "drink": ("green tea", "a flat white", "an oat latte", "black coffee", "jasmine tea"),
    "diet": ("vegetarian", "vegan", "gluten-free", "halal"),
    "item": ("printer", "headphones", "desk lamp", "running shoes", "kettle", "router"),
    "street": ("Maple Street", "Harbour Road", "King's Avenue", "Elm Close", "Station Lane"),
    "name": ("Anna", "Ben", "Chloe", "David", "Emma", "Farid", "Grace", "Hiro", "Ines", "Jon"),
    "zh_city": ("上海", "北京", "深圳", "杭州", "成都", "武汉"),
    "zh_district": ("浦东新区", "海淀区", "南山区", "西湖区", "武侯区", "江汉区"),
    "zh_road": ("世纪大道", "中关村大街", "科技园路", "文三路", "人民南路", "解放大道"),
    "zh_courier": ("顺丰", "京东物流", "中通", "圆通", "EMS"),
    "zh_drink": ("绿茶", "美式咖啡", "拿铁", "乌龙茶", "豆浆"),
    "zh_item": ("打印机", "耳机", "台灯", "跑鞋", "电水壶", "路由器"),
    "zh_name": ("小王", "李姐", "张老师", "陈总", "刘阿姨", "赵医生"),
}
_MONTHS: tuple[str, ...] = ("January", "February", "March", "April", "May", "June", "July")
_MONTHS += ("August", "September", "October", "November", "December")

BUILTIN: tuple[Conversation, ...] = (
    Conversation(
        "en-dinner",
        "en",
        (
            "Hi there!",
            "Please book a table for {n} at {time} on {date} at {restaurant}.",
            "My email is {email} and my phone is {phone}.",
            "I am {diet}, please remember that for every booking.",
            "Can you move the booking for {name} to {time2}?",
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
            "Please ship {n} {item}s to that address by {date}.",
            "How will my parcel for order {order} be delivered?",
        ),
    ),
    Conversation(
        "en-travel",
        "en",
        (
            "Good morning!",
            "I need a flight to {city} on {date}, leaving after {time}.",
            "I prefer {seat} seats on every flight.",
            "From now on I drink {drink} in the morning.",
            "Book a hotel in {city} for {n} nights from {date}, check-in at {time2}.",
            "Where am I flying and which seat do I like?",
        ),
    ),
    Conversation(
        "zh-shipping",
        "zh",
        (
            "你好",
            "我的地址是{zh_city}市{zh_district}{zh_road}{house}号",
            "以后发货默认用{zh_courier}",
            "请帮我买{n}个{zh_item}，{zh_date}前寄到家里",
            "我的手机号是{phone}",
            "订单{order}的快递用哪家？",
        ),
    ),
    Conversation(
        "zh-assistant",
        "zh",
        (
            "今天天气真好",
            "请提醒我{zh_date}{time}和{zh_name}开会",
            "我每天早上都喝{zh_drink}，以后默认帮我点这个",
            "我的邮箱是{email}",
            "帮我记一下，{zh_name}的生日是{zh_date}",
            "我早上喜欢喝什么？",
        ),
    ),
    Conversation(
        "mixed-support",
        "mixed",
        (
            "Hi, my {item} stopped working after {n} days.",
            "订单号是{order}，请帮我查一下",
            "My phone is {phone}, call me after {time}.",
            "我的地址改成{zh_city}市{zh_district}{zh_road}{house}号",
            "Please open a repair ticket for order {order}, {name} will be home on {date}.",
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
    month, day = rng.randint(1, 12), rng.randint(1, 28)
    values.update(
        n=str(rng.randint(2, 12)),
        time=f"{rng.randint(6, 21)}:{rng.choice(('00', '15', '30', '45'))}",
        time2=f"{rng.randint(6, 21)}:{rng.choice(('05', '20', '35', '50'))}",
        date=f"{_MONTHS[month - 1]} {day}",
        zh_date=f"{month}月{day}日",
        order=f"A{rng.randint(10_000, 99_999)}",
        house=str(rng.randint(1, 999)),
        phone="1" + rng.choice("3589") + "".join(rng.choices(string.digits, k=9)),
        email="".join(rng.choices(string.ascii_lowercase, k=7)) + "@example.com",
    )
    return [turn.format_map(values) for turn in conversation.turns]

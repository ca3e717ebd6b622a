"""Promotion: which short-term utterances become long-term facts, under which key.

A simple rule, as the design asks for now: an utterance is promoted when it states a
stable default ("always", "by default", "默认", ...), declares a profile fact ("my address
is ...", "我的地址是..."), or repeats what the user said before in short-term memory.
The key decides what a newer statement supersedes: "my X is Y" / "我的X是Y" key on X;
preferences key on a topic from a small lexicon (so "I prefer window seats" and later
"I prefer aisle seats" share the key `seat`).
"""

from __future__ import annotations

import functools
import hashlib
import re
from dataclasses import dataclass

from reference.intent import MEMO_MAX_CHARS, MEMO_SIZE, is_stable_preference
from reference.models import Category, MemoryType

# Topic lexicon for preference keys. Order matters: the first topic that matches wins.
# TOPICS and PROFILE_KEYS are public: forget commands map a topic to keys with them.
TOPICS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "shipping",
        ("ship", "deliver", "courier", "express", "parcel", "快递", "发货", "顺丰", "配送", "物流"),
    ),
    ("seat", ("seat", "aisle", "window seat", "座位", "靠窗", "过道")),
    (
        "payment",
        (
            "pay ",
            "payment",
            "credit card",
            "alipay",
            "wechat pay",
            "支付",
            "付款",
            "支付宝",
            "微信支付",
        ),
    ),
    ("language", ("language", "english", "chinese", "中文", "英文", "语言")),
    ("diet", ("vegetarian", "vegan", "spicy", "allerg", "gluten", "素食", "辣", "过敏", "忌口")),
    ("notification", ("notify", "notification", "remind", "text me", "通知", "提醒", "短信")),
    ("hotel", ("hotel", "room", "酒店", "房间")),
    ("airline", ("airline", "flight", "fly with", "航空", "航班")),
    ("drink", ("coffee", "tea", "latte", "咖啡", "茶")),
    ("schedule", ("morning", "afternoon", "evening", "weekend", "上午", "下午", "晚上", "周末")),
    ("contact", ("call me", "email me", "联系", "电话")),
)

_MY_X_IS_EN = re.compile(r"\bmy ([a-z][a-z ]{1,30}?) (?:is|are|was|=) (.+)", re.IGNORECASE)
_MY_X_IS_ZH = re.compile(r"我的([\u4e00-\u9fff]{1,8}?)(?:是|为|叫|改成|换成)(.+)")
PROFILE_KEYS = {
    "address": ("address", "home address", "地址", "住址", "家庭住址"),
    "company": ("company", "employer", "公司", "单位"),
    "name": ("name", "名字", "姓名"),
    "phone": ("phone", "phone number", "mobile", "number", "电话", "手机", "手机号"),
    "email": ("email", "e-mail", "邮箱"),
    "birthday": ("birthday", "date of birth", "生日"),
    "city": ("city", "hometown", "城市"),
    "job": ("job", "occupation", "role", "title", "职位", "工作"),
}


@dataclass(frozen=True, slots=True)
class FactCandidate:
    """A structured fact proposed for long-term memory."""

    category: Category
    key: str
    value: str


def extract_fact(
    text: str, kind: MemoryType | None, *, remember: bool = True
) -> FactCandidate | None:
    """The fact an utterance states, with the key a newer statement would supersede.

    Memoised as the intent rules are (`reference.intent.memoised`): a turn extracts from
    the same text more than once, and candidates are frozen. `remember=False` for text
    that may hold raw PII (the unmasked utterance), which no process-wide cache may keep.
    """
    if remember and len(text) <= MEMO_MAX_CHARS:
        return _extract_remembered(text, kind)
    return _extract(text, kind, remember=remember)


def _extract(text: str, kind: MemoryType | None, *, remember: bool = True) -> FactCandidate | None:
    stripped = text.strip().rstrip("。.!！")
    for pattern in (_MY_X_IS_EN, _MY_X_IS_ZH):
        match = pattern.search(stripped)
        if match:
            subject, value = match.group(1).strip().lower(), match.group(2).strip()
            return FactCandidate(Category.PROFILE, _profile_key(subject), value)
    if kind is MemoryType.PREFERENCE or is_stable_preference(stripped, remember=remember):
        return FactCandidate(Category.PREFERENCE, _topic(stripped), stripped)
    if kind in (MemoryType.PROFILE, MemoryType.FACT):
        return FactCandidate(Category.FACT, _fingerprint(stripped), stripped)
    return None


# typed: MemoryType.FACT == "fact", but only the member takes the `is` paths above.
_extract_remembered = functools.lru_cache(maxsize=MEMO_SIZE, typed=True)(_extract)


def should_promote(text: str, kind: MemoryType | None, *, said_before: bool) -> bool:
    """Stable when repeated, stated as a default, or a declared profile fact ("my X is Y")."""
    return said_before or kind is MemoryType.PROFILE or is_stable_preference(text)


def _profile_key(subject: str) -> str:
    for key, synonyms in PROFILE_KEYS.items():
        if subject in synonyms:
            return key
    return re.sub(r"\s+", "_", subject)


def _topic(text: str) -> str:
    lowered = text.lower()
    for topic, words in TOPICS:
        if any(word in lowered for word in words):
            return topic
    return _fingerprint(text)


def _fingerprint(text: str) -> str:
    """A key that only the same statement shares (so unrelated facts never supersede)."""
    normal = re.sub(r"\W+", " ", text.lower()).strip()
    return "stmt_" + hashlib.blake2b(normal.encode(), digest_size=6).hexdigest()

"""The key vocabulary of qualified profile fields: a canonical field plus a qualifier, in
English and Chinese. Promotion keys a stated value with it, event invalidation selects
with it, forget commands find a family with it: one vocabulary, so what a statement is
stored under is what an event or a command names.

A key is the field, or `<qualifier>_<field>`:

| said | key |
|---|---|
| "my address", "my home address", 地址, 住址, 家庭住址 | `address` |
| "my delivery / shipping / mailing address", 收货地址, 送货地址 | `delivery_address` |
| "my billing address", 账单地址, 发票地址 | `billing_address` |
| "my work / office address", 公司地址, 单位地址 | `work_address` |
| "my phone number", "my mobile", "cell", 电话, 手机, 手机号 | `phone` |
| "my home phone", "landline", 座机, 家里电话 | `home_phone` |
| "my work / office phone", 工作电话, 办公电话, 公司电话 | `work_phone` |
| "my email", "personal email", 邮箱, 个人邮箱 | `email` |
| "my work email", 工作邮箱, 公司邮箱 | `work_email` |

An unqualified field is its default qualifier: an address said without a qualifier is
where the user lives (home), a phone number the mobile, an e-mail the personal one. So
"my address is X" and later "my home address is Y" supersede each other, and neither
supersedes "my delivery address is Z". A qualifier the vocabulary does not know keeps
today's reading: "my old address" is `old_address`, still of the `address` family.

An event (or a forget command) naming the bare field (`address`, 地址, `phone`, 电话)
selects the whole family: every key of that field, whatever its qualifier. Naming a
qualified field (`delivery_address`, 收货地址, `home_address`, 手机) selects that key only.
Any other name selects the key of that name (compared case- and space-insensitively).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from itertools import product

__all__ = [
    "FIELDS",
    "FieldName",
    "KeySelector",
    "canonical_key",
    "field_of",
    "field_synonyms",
    "parse_field",
]


@dataclass(frozen=True, slots=True)
class Field:
    """One canonical field: the words that name it, its qualifiers and which one the bare
    field means, and whole words that name a qualified field at once (手机, "landline")."""

    words: tuple[str, ...]
    default: str
    qualifiers: dict[str, tuple[str, ...]]
    aliases: dict[str, str]


_WORK = ("work", "office", "business", "company", "工作", "办公", "公司", "单位")

FIELDS: dict[str, Field] = {
    "address": Field(
        words=("address", "地址", "住址"),
        default="home",
        qualifiers={
            "home": ("home", "house", "residential", "家", "家庭", "家里", "住宅", "居住"),
            "delivery": (
                "delivery",
                "shipping",
                "mailing",
                "postal",
                "收货",
                "送货",
                "配送",
                "邮寄",
                "快递",
            ),
            "billing": ("billing", "invoice", "invoicing", "账单", "发票", "开票"),
            "work": _WORK,
        },
        aliases={},
    ),
    "phone": Field(
        words=(
            "phone number",
            "phone",
            "telephone number",
            "telephone",
            "number",
            "电话号码",
            "电话",
        ),
        default="mobile",
        qualifiers={
            "mobile": ("mobile", "cell", "cellphone", "手机", "移动"),
            "home": ("home", "house", "landline", "家", "家庭", "家里", "座机", "固定"),
            "work": _WORK,
        },
        aliases={
            "mobile": "mobile",
            "cell": "mobile",
            "cellphone": "mobile",
            "手机": "mobile",
            "手机号": "mobile",
            "手机号码": "mobile",
            "landline": "home",
            "座机": "home",
            "座机号": "home",
            "座机号码": "home",
        },
    ),
    "email": Field(
        words=(
            "email address",
            "e-mail address",
            "email",
            "e-mail",
            "邮箱",
            "电子邮箱",
            "邮箱地址",
        ),
        default="personal",
        qualifiers={
            "personal": ("personal", "private", "home", "个人", "私人"),
            "work": _WORK,
        },
        aliases={},
    ),
}

_SPACES = re.compile(r"[\s_]+")
_ZH_LINK = re.compile("的$")


@dataclass(frozen=True, slots=True)
class FieldName:
    """What a name of a field says: the field, and the qualifier when one was named
    (None: the bare field, which selects the family)."""

    field: str
    qualifier: str | None

    @property
    def key(self) -> str:
        """The key a value of this field is stored under (the bare field: the default)."""
        qualifier = self.qualifier or FIELDS[self.field].default
        if qualifier == FIELDS[self.field].default:
            return self.field
        return f"{qualifier}_{self.field}"


def _normal(name: str) -> str:
    return _SPACES.sub(" ", name.strip().casefold()).strip()


def parse_field(name: str) -> FieldName | None:
    """The field and qualifier a subject names ("delivery address", "收货地址",
    "delivery_address", "手机"), or None when it names no field of the vocabulary or
    carries a qualifier the vocabulary does not know."""
    text = _normal(name)
    if not text:
        return None
    for field, spec in FIELDS.items():
        if text in spec.aliases:
            return FieldName(field, spec.aliases[text])
        for word in spec.words:
            if text == word:
                return FieldName(field, None)
            if not text.endswith(word):
                continue
            rest = text[: -len(word)]
            if word.isascii():
                if not rest.endswith(" "):
                    continue
                rest = rest.strip()
            else:
                rest = _ZH_LINK.sub("", rest.strip())
            for qualifier, words in spec.qualifiers.items():
                if rest in words:
                    return FieldName(field, qualifier)
    return None


def canonical_key(name: str) -> str:
    """The key a name stands for: a field's canonical key (`delivery_address` for
    "Shipping Address" or 收货地址), else the name casefolded, spaces as underscores."""
    parsed = parse_field(name)
    return parsed.key if parsed is not None else _normal(name).replace(" ", "_")


def field_of(key: str) -> str | None:
    """The field a stored key belongs to: "delivery_address" -> "address", "phone" ->
    "phone", "old_address" -> "address"; None for a key of no field ("seat")."""
    base = _normal(key).replace(" ", "_")
    for field in FIELDS:
        if base == field or base.endswith("_" + field):
            return field
    parsed = parse_field(base)
    return parsed.field if parsed is not None else None


@dataclass(frozen=True, slots=True)
class KeySelector:
    """The keys an event's names select: whole families (a bare field) and exact keys."""

    families: frozenset[str]
    exact: frozenset[str]

    @classmethod
    def of(cls, names: list[str]) -> KeySelector:
        families: set[str] = set()
        exact: set[str] = set()
        for name in names:
            parsed = parse_field(name)
            if parsed is not None and parsed.qualifier is None:
                families.add(parsed.field)
            else:
                exact.add(canonical_key(name))
        return cls(frozenset(families), frozenset(exact))

    def __bool__(self) -> bool:
        return bool(self.families or self.exact)

    def matches(self, key: object) -> bool:
        """Whether a stored key (a fact's key, an STM record's topic) is selected."""
        if not isinstance(key, str) or not key.strip():
            return False
        if canonical_key(key) in self.exact:
            return True
        return bool(self.families) and "@" not in key and field_of(key) in self.families


def field_synonyms(field: str) -> tuple[str, ...]:
    """Every way of naming a field the vocabulary knows, qualified or not: the words a
    text mentions when it speaks of that field (forget commands, segmentation)."""
    spec = FIELDS[field]
    words = list(spec.words) + list(spec.aliases)
    zh_fields = [w for w in spec.words if not w.isascii()]
    for qualifiers in spec.qualifiers.values():
        zh = [q for q in qualifiers if not q.isascii()]
        words += [q + w for q, w in product(zh, zh_fields)]
    return tuple(dict.fromkeys(words))

"""Personal values the generators say, each with its kind (`model.PII_KINDS`) and the
statement and question around it, in English and Chinese.

The first three kinds (a Chinese resident ID, a Chinese mobile number, a bank card) are
drawn from the user's own generator as they always were; the other kinds (international
and landline phone numbers, US social security numbers, person names, street addresses)
replace them for a share of users, drawn from a second generator of that user
(`draw_pii`), so every other draw of a user, and so every other step, stays as it was.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from memharness.scenarios.texts import Lang
from reference.pii import is_valid_cn_id, luhn_ok

__all__ = ["NEW_KINDS_SHARE", "PiiDisclosure", "draw_pii"]

#: The share of PII disclosures that say one of the newer values (5 of 8 sorts, each as
#: likely: a landline, a phone abroad, an SSN, a name, an address).
NEW_KINDS_SHARE = 5 / 8


@dataclass(frozen=True, slots=True)
class PiiDisclosure:
    """A statement disclosing `value` (of `kind`), the fact key it states, and a question."""

    key: str
    kind: str
    value: str
    said: str
    query: str


def draw_pii(rng: random.Random, extra: random.Random, lang: Lang) -> PiiDisclosure:
    """A PII disclosure: one of the first kinds from `rng` (its draws as before), or, with
    probability `NEW_KINDS_SHARE`, a newer kind drawn from `extra` instead."""
    first = _first_kinds(rng, lang)
    if extra.random() >= NEW_KINDS_SHARE:
        return first
    return extra.choice(_NEWER)(extra, lang)


def _first_kinds(rng: random.Random, lang: Lang) -> PiiDisclosure:
    key = rng.choice(("id_number", "phone", "bank_card"))
    if key == "id_number":
        value = _cn_id(rng)
        if lang == "en":
            return PiiDisclosure(
                key, "cn_id", value, f"My ID number is {value}.", "What is my ID number?"
            )
        return PiiDisclosure(
            key, "cn_id", value, f"我的身份证号是{value}。", "我的身份证号是多少？"
        )
    if key == "phone":
        value = f"1{rng.choice('3456789')}{rng.randint(0, 999_999_999):09d}"
        if lang == "en":
            said, query = f"My phone number is {value}.", "What is my phone number?"
            return PiiDisclosure(key, "mobile", value, said, query)
        return PiiDisclosure(key, "mobile", value, f"我的手机号是{value}。", "我的手机号是多少？")
    value = _card(rng)
    if lang == "en":
        said, query = f"My bank card number is {value}.", "What is my bank card number?"
        return PiiDisclosure(key, "bank_card", value, said, query)
    return PiiDisclosure(
        key, "bank_card", value, f"我的银行卡号是{value}。", "我的银行卡号是多少？"
    )


def _cn_id(rng: random.Random) -> str:
    """A resident ID with a real province, birth date and a valid checksum."""
    province = rng.choice(("11", "31", "32", "33", "44", "51"))
    born = f"{rng.randint(1950, 2005)}{rng.randint(1, 12):02d}{rng.randint(1, 28):02d}"
    body = f"{province}{rng.randint(0, 9999):04d}{born}{rng.randint(0, 999):03d}"
    return next(body + c for c in "0123456789X" if is_valid_cn_id(body + c))


def _card(rng: random.Random) -> str:
    body = "6222" + "".join(str(rng.randint(0, 9)) for _ in range(11))
    return next(body + c for c in "0123456789" if luhn_ok(body + c))


# ---------------------------------------------------------------------- newer kinds
def _digits(rng: random.Random, n: int, first: str = "123456789") -> str:
    return rng.choice(first) + "".join(rng.choice("0123456789") for _ in range(n - 1))


def _foreign_phone(rng: random.Random) -> str:
    """A valid US, UK, German or French number, in international or US national form."""
    form = rng.randrange(5)
    if form == 0:  # US, national
        area = rng.choice(("212", "415", "646", "312", "617", "206"))
        return f"({area}) {_digits(rng, 3, '23456789')}-{_digits(rng, 4, '0123456789')}"
    if form == 1:  # US, international
        area = rng.choice(("212", "415", "646", "312", "617", "206"))
        return f"+1 {area}-{_digits(rng, 3, '23456789')}-{_digits(rng, 4, '0123456789')}"
    if form == 2:  # London
        return f"+44 20 7{_digits(rng, 3, '0123456789')} {_digits(rng, 4, '0123456789')}"
    if form == 3:  # Berlin
        return f"+49 30 {_digits(rng, 8)}"
    pairs = " ".join(_digits(rng, 2, "0123456789") for _ in range(4))
    return f"+33 1 {pairs}"  # Paris


def _landline(rng: random.Random) -> str:
    """A Chinese landline with its area code (Beijing, Shanghai, Guangzhou, Shenzhen)."""
    area = rng.choice(("010", "021", "020", "0755"))
    return f"{area}-{_digits(rng, 8, '2345678')}"


def _landline_phone(rng: random.Random, lang: Lang) -> PiiDisclosure:
    value = _landline(rng)
    if lang == "en":
        said = f"My office landline is {value}, you can reach me there."
        return PiiDisclosure("landline", "phone", value, said, "What is my office landline?")
    said = f"我的办公室座机是{value}，有事可以打。"
    return PiiDisclosure("landline", "phone", value, said, "我的办公室座机是多少？")


def _abroad_phone(rng: random.Random, lang: Lang) -> PiiDisclosure:
    value = _foreign_phone(rng)
    if lang == "en":
        said = f"Call me on {value} while I am abroad."
        return PiiDisclosure("phone", "phone", value, said, "Which number do I use abroad?")
    said = f"我在国外的时候请打{value}找我。"
    return PiiDisclosure("phone", "phone", value, said, "我在国外用哪个号码？")


def _ssn(rng: random.Random, lang: Lang) -> PiiDisclosure:
    """A US social security number in a valid range (area not 000, 666 or 9xx)."""
    area = rng.choice([n for n in range(1, 900) if n != 666])
    value = f"{area:03d}-{rng.randint(1, 99):02d}-{rng.randint(1, 9999):04d}"
    if lang == "en":
        said = f"My social security number is {value}, for the tax form."
        return PiiDisclosure("ssn", "ssn", value, said, "What is my social security number?")
    said = f"我的美国社保号是{value}，报税要用。"
    return PiiDisclosure("ssn", "ssn", value, said, "我的美国社保号是多少？")


_GIVEN_EN = ("Emily", "James", "Olivia", "Michael", "Sophia", "Daniel", "Hannah", "Robert")
_FAMILY_EN = ("Carter", "Nguyen", "Patel", "Schmidt", "Johnson", "Okafor", "Rossi", "Walsh")
_FAMILY_ZH = ("王", "李", "张", "刘", "陈", "杨", "赵", "黄", "周", "吴")
_GIVEN_ZH = ("秀英", "建国", "丽娟", "志强", "晓明", "婷婷", "海燕", "子轩", "雨涵", "伟")


def _name(rng: random.Random, lang: Lang) -> PiiDisclosure:
    if lang == "en":
        value = f"{rng.choice(_GIVEN_EN)} {rng.choice(_FAMILY_EN)}"
        said = f"My name is {value}, please put it on the booking."
        return PiiDisclosure("name", "name", value, said, "What is my name?")
    value = rng.choice(_FAMILY_ZH) + rng.choice(_GIVEN_ZH)
    return PiiDisclosure("name", "name", value, f"我叫{value}，预订用这个名字。", "我叫什么名字？")


_STREETS_EN = ("Maple Avenue", "Oak Street", "Sunset Boulevard", "Pine Road", "Cedar Lane")
_TOWNS_EN = ("Springfield, IL 62704", "Portland, OR 97205", "Austin, TX 78701")
_CITIES_ZH = ("上海市徐汇区", "北京市朝阳区", "广州市天河区", "成都市武侯区")
_ROADS_ZH = ("漕溪北路", "建国路", "天河路", "人民南路")


def _address(rng: random.Random, lang: Lang) -> PiiDisclosure:
    if lang == "en":
        value = f"{rng.randint(1, 999)} {rng.choice(_STREETS_EN)}, {rng.choice(_TOWNS_EN)}"
        said = f"I live at {value}, send the documents there."
        return PiiDisclosure("address", "address", value, said, "Where do I live?")
    road = rng.choice(_ROADS_ZH)
    value = f"{rng.choice(_CITIES_ZH)}{road}{rng.randint(1, 300)}号{rng.randint(1, 30)}栋"
    value += f"{rng.randint(1, 30)}0{rng.randint(1, 4)}室"
    said = f"我住在{value}，材料寄到这里。"
    return PiiDisclosure("address", "address", value, said, "我住在哪里？")


_NEWER = (_landline_phone, _abroad_phone, _ssn, _name, _address)

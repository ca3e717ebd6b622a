"""The new PII kinds (phone, ssn, name, address) in both languages, masks, and the evaluator."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.pii_detector import Labelled, load, score
from reference.pii import RegexPiiMasker
from reference.text_interfaces import PiiMatch

DETECTOR = RegexPiiMasker(cache_size=0)

POSITIVES = [
    ("Call me at +1 415-555-2671 tomorrow.", "+1 415-555-2671", "phone"),
    ("Ring the shop on 020 7946 0958.", "020 7946 0958", "phone"),
    ("In Paris call 06 12 34 56 78.", "06 12 34 56 78", "phone"),
    ("我的电话是010-12345678。", "010-12345678", "phone"),
    ("座机（021）6234 5678。", "（021）6234 5678", "phone"),
    ("My SSN is 123-45-6789.", "123-45-6789", "ssn"),
    ("My name is John Smith.", "John Smith", "name"),
    ("Ms. Garcia will pick it up.", "Garcia", "name"),
    ("My manager is Will Turner.", "Will Turner", "name"),
    ("我叫王小明。", "王小明", "name"),
    ("李娜给我打了电话。", "李娜", "name"),
    (
        "Ship it to 350 Fifth Avenue, New York, NY 10118.",
        "350 Fifth Avenue, New York, NY 10118",
        "address",
    ),
    ("我的地址是上海市浦东新区世纪大道100号。", "上海市浦东新区世纪大道100号", "address"),
    (
        "寄到广州市天河区体育西路123号5栋2单元301室",
        "广州市天河区体育西路123号5栋2单元301室",
        "address",
    ),
]

NEGATIVES = [
    "Order number 20240315123456 has shipped.",
    "订单号20240105123，金额128元。",
    "The meeting is on 2024-03-15 at 10:30.",
    "The reference 000-12-3456 is a template.",
    "Will you remind me tomorrow?",
    "In May we are going to Spain.",
    "We played Street Fighter all night.",
    "I live on Main Street.",
    "王府井的小吃不错。",
    "谢谢，很有帮助。",
    "昨天和陈经理开会了。",
    "我3号去上海出差。",
    "退款打到这张卡。",
    "欧阳",  # a compound surname alone: its mask (欧阳**) would be found again, forever
    "我叫欧阳",
]


@pytest.mark.parametrize(("text", "value", "kind"), POSITIVES)
def test_finds_the_value_and_masks_all_of_it(text: str, value: str, kind: str) -> None:
    found = [(m.text, m.kind) for m in DETECTOR.detect(text)]
    assert (value, kind) in found
    masked = DETECTOR.mask(text)
    assert value not in masked
    assert DETECTOR.mask(masked) == masked  # idempotent: the mask is not detected again


@pytest.mark.parametrize("text", NEGATIVES)
def test_finds_nothing_in_ordinary_text(text: str) -> None:
    assert DETECTOR.detect(text) == []


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        ("Call +1 415-555-2671", "Call +1 415-***-**71"),
        ("SSN 123-45-6789", "SSN ***-**-6789"),
        ("My name is John Smith", "My name is J** S**"),
        ("我叫王小明", "我叫王**"),
        ("at 12 Elm Street, Springfield", "at ** *** Street, Springfield"),
        ("住在北京市海淀区中关村大街1号", "住在北京市海淀区*******"),
    ],
)
def test_masks_keep_the_shape(text: str, masked: str) -> None:
    assert DETECTOR.mask(text) == masked


def test_mobile_card_and_id_are_not_phones() -> None:
    kinds = {m.kind for m in DETECTOR.detect("手机13812345678，卡6222020200112230")}
    assert kinds == {"mobile", "bank_card"}
    assert [m.kind for m in DETECTOR.detect("身份证110101199003072316")] == ["cn_id"]


def test_evaluator_counts_tp_fp_fn_per_kind() -> None:
    items = [
        Labelled("My name is John Smith.", (("John Smith", "name"),), "a"),  # tp
        Labelled("Call (415) 555-2671.", (), "b"),  # fp: a phone nobody labelled
        Labelled("Emma came.", (("Emma", "name"), ("came", "address")), "c"),  # tp + fn
    ]
    tallies = score(items, DETECTOR)
    assert (tallies["name"].tp, tallies["name"].fp, tallies["name"].fn) == (2, 0, 0)
    assert (tallies["phone"].tp, tallies["phone"].fp, tallies["phone"].fn) == (0, 1, 0)
    assert (tallies["address"].tp, tallies["address"].fn) == (0, 1)
    assert tallies["name"].precision == 1.0 and tallies["address"].recall == 0.0


def test_labelled_files_load_and_are_big_enough() -> None:
    data = Path(__file__).parent / "data"
    items = load(data / "pii_labelled.yaml") + load(data / "pii_heldout.yaml")
    assert len(items) >= 400
    tallies = score(items, DETECTOR)
    assert sum(t.tp + t.fn for t in tallies.values()) == sum(len(i.values) for i in items)


def test_a_label_not_in_its_text_is_an_error_naming_the_entry(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text('- {text: "hello", pii: [{value: "Bob", kind: name}]}\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad.yaml: entry 1: field 'pii.value'"):
        load(bad)


def test_a_mask_found_again_is_hidden_whole_so_masking_ends() -> None:
    class Finder(RegexPiiMasker):
        # Finds "abc" as a card: the card mask keeps 4 + 4 characters, so "abc" stays.
        def detect(self, text: str) -> list[PiiMatch]:
            start = text.find("abc")
            return [] if start < 0 else [PiiMatch("bank_card", start, start + 3, "abc")]

    assert Finder(cache_size=0).mask("x abc y") == "x *** y"

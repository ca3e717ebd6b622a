"""The simulator's masker gives the reference detector's answers, each computed once."""

from __future__ import annotations

from memharness.sim.masking import ScenarioMasker
from reference.pii import RegexPiiMasker
from reference.text_interfaces import PiiMatch

TEXTS = [
    "My card is 4111 1111 1111 1111 and my email is jane.doe@example.com.",
    "我叫王小明，手机号13812345678。",
    "For order A466803, please gift-wrap it.",
]


class _Counting(RegexPiiMasker):
    def __init__(self) -> None:
        super().__init__(cache_size=0)  # every mask detects: the calls show
        self.detected: list[str] = []

    def detect(self, text: str) -> list[PiiMatch]:
        self.detected.append(text)
        return super().detect(text)


def test_answers_are_the_detectors_and_a_text_is_detected_once() -> None:
    reference, inner = RegexPiiMasker(), _Counting()
    masker = ScenarioMasker(inner)
    for _ in range(3):
        for text in TEXTS:
            assert masker.mask(text) == reference.mask(text)
            assert masker.detect(text) == reference.detect(text)
    first = len(inner.detected)
    for text in TEXTS:
        masker.mask(text)
        masker.detect(text)
    assert len(inner.detected) == first  # remembered: no detection the second time round
    assert masker.mask(TEXTS[0]) != TEXTS[0]  # the PII was masked


def test_a_full_cache_starts_over_and_answers_alike() -> None:
    masker = ScenarioMasker(cache_texts=2)
    reference = RegexPiiMasker()
    for text in TEXTS * 2:
        assert masker.mask(text) == reference.mask(text)
        assert masker.detect(text) == reference.detect(text)

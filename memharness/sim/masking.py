"""`ScenarioMasker`: the reference's PII masker, each text's answer computed once per worker.

A replay masks and detects the same texts again and again: a statement is masked by the
turn, the session and STM layers, and detected again for the kinds it disclosed; a fact's
value is masked when it is sealed; and every strategy replays the same statements. The
reference's own cache (`RegexPiiMasker.mask`) keeps only text without PII, so raw PII
never sits in a serving process's cache; the simulator's worker holds the scenario's raw
texts anyway, so here both answers are remembered by text, whatever they hold. Detection
is a pure function of the text: the answers are the detector's, bit for bit.
"""

from __future__ import annotations

from reference.pii import RegexPiiMasker
from reference.text_interfaces import PiiMasker, PiiMatch

#: Texts remembered (each answer, emptied when full): a cohort's statements and values.
CACHE_TEXTS = 200_000
#: Longer texts are not remembered (statements are short).
MAX_CHARS = 1_000


class ScenarioMasker(PiiMasker):
    """`RegexPiiMasker` with its `mask` and `detect` answers remembered per text."""

    def __init__(self, inner: PiiMasker | None = None, *, cache_texts: int = CACHE_TEXTS) -> None:
        self.inner = inner or RegexPiiMasker()
        self.cache_texts = cache_texts
        self._masked: dict[str, str] = {}
        self._found: dict[str, tuple[PiiMatch, ...]] = {}

    def mask(self, text: str) -> str:
        masked = self._masked.get(text)
        if masked is None:
            masked = self.inner.mask(text)
            if len(text) <= MAX_CHARS:
                if len(self._masked) >= self.cache_texts:
                    self._masked.clear()
                self._masked[text] = masked
        return masked

    def detect(self, text: str) -> list[PiiMatch]:
        found = self._found.get(text)
        if found is None:
            found = tuple(self.inner.detect(text))
            if len(text) <= MAX_CHARS:
                if len(self._found) >= self.cache_texts:
                    self._found.clear()
                self._found[text] = found
        return list(found)

    def clear(self) -> None:
        """Forget every answer (a new cohort's texts come next)."""
        self._masked.clear()
        self._found.clear()


__all__ = ["ScenarioMasker"]

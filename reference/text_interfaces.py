"""Interfaces of the text components a turn uses: embedder, intent filter, PII masker.

Implementations live in `embedding.py`, `policy/intent.py` and `pii/`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from reference.models import MemoryType
from reference.records import fast_init


class Embedder(ABC):
    """Turns texts into L2-normalised float32 vectors of `dim` dimensions."""

    dim: int = 384
    name: str = "embedder"
    #: Which model, runtime and precision make the vectors: a store records the identity
    #: of the embedder that wrote it and refuses another (vectors of two embedders do not
    #: mix). Two embedders with one identity give the same vectors.
    identity: str = "embedder"

    @abstractmethod
    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """A `(len(texts), dim)` float32 array, each row of unit length."""

    def embed_one(self, text: str) -> np.ndarray:
        return self.embed([text])[0]

    def clear(self) -> None:
        """Drop whatever this embedder caches (its vectors are unchanged: a cache only)."""


@fast_init
@dataclass(frozen=True, slots=True)
class IntentDecision:
    """Whether an utterance is worth short-term memory, and why."""

    keep: bool
    kind: MemoryType | None  # instruction / preference / fact / profile ... when kept
    reason: str


class IntentFilter(ABC):
    """Decides which utterances go to STM: instructions and facts do, chit-chat does not."""

    @abstractmethod
    def classify(self, text: str) -> IntentDecision: ...


@dataclass(frozen=True, slots=True)
class PiiMatch:
    kind: str  # cn_id | mobile | phone | email | bank_card | passport | ssn | name | address
    start: int
    end: int
    text: str


class PiiMasker(ABC):
    """Finds personal data in text and masks it so no layer stores it raw."""

    @abstractmethod
    def detect(self, text: str) -> list[PiiMatch]: ...

    @abstractmethod
    def mask(self, text: str) -> str:
        """The text with every detected item masked; idempotent (mask(mask(t)) == mask(t))."""

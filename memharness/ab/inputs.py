"""The inputs both arms of the A/B gate are timed on: per-block texts, users and keys from
a seed (the same seed gives both arms the same inputs), and the busy wait of an injected
slowdown. Standard library only: `worker.py` loads it by path, beside itself in the
candidate's tree, since it runs without `memharness`."""

from __future__ import annotations

import random
import string
import time
from collections.abc import Callable

# The texts both arms are timed on: the worker's own copy of bench/seed.py's vocabulary,
# because it imports bench.seed from each arm's tree, whose version may differ.
_VOCABULARY = (
    "ship deliver express parcel seat aisle window hotel room flight coffee tea address "
    "office meeting invoice refund order ticket repair heater printer budget report "
    "vegetarian spicy morning evening weekend airport taxi train museum doctor dentist "
    "garden bicycle laptop password account balance salary visa passport holiday"
)
_WORDS = tuple(_VOCABULARY.split())


def busy_wait(delay_s: float) -> None:
    """Spin for `delay_s` (busy, not sleep: exact, independent of timer slack)."""
    end = time.perf_counter() + delay_s
    while time.perf_counter() < end:
        pass


class Inputs:
    """Per-block inputs from a seed: both arms get the same texts, users and keys."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.rng = random.Random(seed)

    def sentence(self, low: int = 5, high: int = 12) -> str:
        return " ".join(self.rng.choice(_WORDS) for _ in range(self.rng.randint(low, high)))

    def nonce(self) -> str:
        # Letters only: digits could look like phone numbers to the PII masker.
        return "".join(self.rng.choice(string.ascii_lowercase) for _ in range(10))

    def fresh(self, lead: str) -> str:
        """A sentence no one has embedded yet (a cache miss)."""
        return f"{lead} {self.sentence()} ref {self.nonce()}"

    def utterance(self) -> str:
        """A turn's utterance: instructions, preferences, facts and chit-chat, fresh."""
        kind = self.rng.randrange(4)
        tail = f"{self.sentence(3, 8)} ref {self.nonce()}"
        lead = ("Please book the", "I always prefer the", "My", "haha ok thanks")[kind]
        if kind == 1:
            return f"{lead} {self.rng.choice(_WORDS)} option, {tail}"
        if kind == 2:
            return f"{lead} {self.rng.choice(_WORDS)} is {tail}"
        return f"{lead} {tail}"


Call = Callable[[], object]
Setup = Callable[[Inputs, int], Call]

"""What the bench suites measure at each size, and the cases they measure.

Sizes are stated here and seeded once per bench session (bench/seed.py). `small` is the
CI gate's size; `full` the issue's (STM 100,000 records in the collection, LTM 10,000
and 100,000 rows); `--ltm-1m` adds a 1,000,000-row LTM table to either.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from reference.policy.strategy import Strategy
from reference.system import MemorySystem


@dataclass(frozen=True, slots=True)
class BenchSizes:
    """What the stores hold while they are measured."""

    sessions: int  # live sessions in the session store
    stm_session: int  # records in the measured STM session
    stm_collection: int  # records in the whole STM collection (the measured session's too)
    ltm_rows: tuple[int, ...]  # facts in the LTM table; one measured table per size
    ltm_facts_per_user: int  # facts of each user, so a query scans a user this size
    rounds: int  # measured calls per operation (after warm-up)
    warmup: int

    def describe(self) -> dict[str, Any]:
        return {
            "sessions": self.sessions,
            "stm_session_records": self.stm_session,
            "stm_collection_records": self.stm_collection,
            "ltm_rows": list(self.ltm_rows),
            "ltm_facts_per_user": self.ltm_facts_per_user,
            "rounds": self.rounds,
            "warmup": self.warmup,
        }


SIZES: dict[str, BenchSizes] = {
    "small": BenchSizes(
        sessions=1_000,
        stm_session=1_000,
        stm_collection=5_000,
        ltm_rows=(10_000,),
        ltm_facts_per_user=100,
        rounds=300,
        warmup=20,
    ),
    "full": BenchSizes(
        sessions=10_000,
        stm_session=1_000,
        stm_collection=100_000,
        ltm_rows=(10_000, 100_000),
        ltm_facts_per_user=100,
        rounds=1_000,
        warmup=50,
    ),
}
LTM_1M = 1_000_000


#: The strategy the suites' system runs unless told: the most complete policy (hybrid).
DEFAULT_STRATEGY = "hybrid"


@dataclass(frozen=True, slots=True)
class BenchConfig:
    """The options of one bench session (see bench/conftest.py)."""

    strategy: Strategy
    size: str
    sizes: BenchSizes
    embedder: str
    rounds: int
    warmup: int
    ltm_rows: tuple[int, ...]
    min_samples: int
    #: Injected delay (ms) per operation name (`--bench-slow`), on the real backend only.
    slow_ms: dict[str, float] = field(default_factory=dict)


#: The measured STM session, and its user (also a seeded LTM user, for the turn).
STM_USER, STM_SESSION = "lu0", "stm-s0"


@dataclass(slots=True)
class BenchCase:
    """A memory system under measurement and what was seeded into it."""

    backend: str  # "real" or "null"
    system: MemorySystem
    sessions: list[tuple[str, str]]  # seeded (user_id, session_id) pairs
    ltm_rows: int
    ltm_users: int
    per_user: int
    label: str = ""  # e.g. "10k" for an LTM table size


def size_label(rows: int) -> str:
    """A table size as a label: 10000 -> "10k", 1000000 -> "1m"."""
    return f"{rows // 1_000_000}m" if rows >= 1_000_000 else f"{rows // 1000}k"

"""What a stored memory weighs: the payload bytes a footprint counts per layer.

One definition for every backend and for the harness: an STM record is its text, its
metadata as JSON and its float32 vector; an LTM fact its text, its value as JSON and its
vector; a session its state as JSON. Index and engine overheads are not in it (the
capacity formulas add them per backend).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from typing import Any

from reference.models import Fact, MemoryRecord, SessionState
from reference.records import fast_init
from reference.validation import dump_json


@fast_init
@dataclass(frozen=True, slots=True)
class Usage:
    """Live records of a layer and their payload bytes."""

    records: int = 0
    bytes: int = 0


def record_bytes(memory: MemoryRecord | Fact, dim: int) -> int:
    """The payload bytes of an STM record or an LTM fact with a `dim`-float vector."""
    body = memory.value if isinstance(memory, Fact) else memory.metadata
    return len(memory.text.encode()) + len(_json(body)) + 4 * dim


def scanned_usage(
    scan: Callable[[str | None, int], Sequence[MemoryRecord | Fact]], dim: int, now: float
) -> Usage:
    """The live records among every page of `scan(after, limit)` (by id), and their
    bytes: the footprint of a backend that keeps no counters."""
    records = size = 0
    after: str | None = None
    while True:
        page = scan(after, 1000)
        for memory in page:
            if memory.is_live(now):
                records += 1
                size += record_bytes(memory, dim)
        if len(page) < 1000:
            return Usage(records, size)
        last = page[-1]
        after = last.fact_id if isinstance(last, Fact) else last.record_id


def session_bytes(state: SessionState) -> int:
    """The payload bytes of a session's state."""
    return len(_json({f.name: getattr(state, f.name) for f in fields(state)}))


def _json(value: Any) -> bytes:
    return dump_json(value).encode()


__all__ = ["Usage", "record_bytes", "session_bytes"]

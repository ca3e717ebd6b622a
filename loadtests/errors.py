"""Errors per operation in a load run: how many, their first messages, their time to error.

A failed operation is not a fast success. When a layer raises (a server died, a
connection dropped, a timeout) the load test fires a Locust *failure* under that layer's
name, and records it here instead of in the latency histogram: a failure that took 2 ms
to raise must not pull the layer's p95 down. Each process keeps, per operation, the
count, the first `MAX_MESSAGES` distinct messages (with their counts; the rest are
counted as `OTHER`), and an HDR histogram of the time to error (how long a caller waited
to hear that it failed). Workers ship the delta since their last report, like
`OpHistograms`; the master merges. Memory stays bounded however many errors there are.

Which layer of a turn failed, and the timings of the layers that finished before it, come
from the error itself (`reference.errors.layer_failure`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from loadtests.hdr import OpHistograms

__all__ = [
    "MAX_MESSAGES",
    "OTHER",
    "ErrorLog",
    "describe",
]

MAX_MESSAGES = 5
MESSAGE_CHARS = 300
OTHER = "(other messages)"


def describe(exc: BaseException) -> str:
    """`Type: message`, on one line, at most MESSAGE_CHARS characters."""
    text = " ".join(f"{type(exc).__name__}: {exc}".split())
    return text if len(text) <= MESSAGE_CHARS else text[: MESSAGE_CHARS - 1] + "…"


@dataclass
class _OpErrors:
    count: int = 0
    messages: dict[str, int] = field(default_factory=dict)

    def add(self, message: str, n: int = 1) -> None:
        self.count += n
        if message in self.messages or len(self.messages) < MAX_MESSAGES:
            self.messages[message] = self.messages.get(message, 0) + n
        else:
            self.messages[OTHER] = self.messages.get(OTHER, 0) + n


class ErrorLog:
    """Failures per operation name: count, first distinct messages, time to error."""

    def __init__(self) -> None:
        self._ops: dict[str, _OpErrors] = {}
        self.time_to_error = OpHistograms()

    def __contains__(self, op: str) -> bool:
        return op in self._ops

    @property
    def ops(self) -> list[str]:
        return list(self._ops)

    def count(self, op: str) -> int:
        entry = self._ops.get(op)
        return entry.count if entry else 0

    def counts(self) -> dict[str, int]:
        return {op: entry.count for op, entry in self._ops.items()}

    def messages(self, op: str) -> dict[str, int]:
        entry = self._ops.get(op)
        return dict(entry.messages) if entry else {}

    def total(self) -> int:
        return sum(entry.count for entry in self._ops.values())

    def record(self, op: str, ms: float, message: str) -> None:
        """One failure of `op` after `ms` milliseconds, with its message."""
        self._ops.setdefault(op, _OpErrors()).add(message)
        self.time_to_error.record_ms(op, ms)

    def reset(self) -> None:
        self._ops.clear()
        self.time_to_error.reset()

    def encode(self) -> dict[str, Any]:
        """What a worker sends: counts, messages and encoded time-to-error histograms."""
        return {
            "ops": {
                op: {"count": e.count, "messages": list(e.messages.items())}
                for op, e in self._ops.items()
            },
            "time_to_error": self.time_to_error.encode(),
        }

    def take_encoded(self) -> dict[str, Any]:
        encoded = self.encode()
        self.reset()
        return encoded

    def merge_encoded(self, encoded: Mapping[str, Any]) -> None:
        """Add what `encode` produced in this or another process."""
        for op, data in (encoded.get("ops") or {}).items():
            entry = self._ops.setdefault(op, _OpErrors())
            for message, n in data.get("messages") or []:
                entry.add(str(message), int(n))
        self.time_to_error.merge_encoded(encoded.get("time_to_error") or {})

    def report(self, successes: Mapping[str, int]) -> dict[str, dict[str, Any]]:
        """Per operation with errors: count, rate among all attempts, messages, time to error.

        `successes` holds each operation's successful count (its latency histogram).
        """
        out: dict[str, dict[str, Any]] = {}
        for op, entry in self._ops.items():
            attempts = entry.count + successes.get(op, 0)
            tte = self.time_to_error.summary(op)
            out[op] = {
                "count": entry.count,
                "attempts": attempts,
                "rate": round(entry.count / attempts, 6) if attempts else None,
                "messages": [{"message": m, "count": n} for m, n in entry.messages.items()],
                "time_to_error_ms": {
                    "p50": tte.p50_ms,
                    "p95": tte.p95_ms,
                    "max": tte.max_ms,
                }
                if tte.count
                else None,
            }
        return out

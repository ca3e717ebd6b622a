"""A Chroma read that races a delete in flight on the server is repeated, nothing else.

Seen under `memharness load --strategy hybrid`: the maintenance process purged STM
records while a turn queried the same collection, and the Chroma server answered
`InternalError: Error executing plan: Internal error: Error finding id`.
"""

from __future__ import annotations

from typing import Any

import pytest
from chromadb.errors import InternalError

from reference.resilience import DEFAULT_RETRY
from reference.stm.chroma_collection import RetryingCollection

RACE = "Error executing plan: Internal error: Error finding id"


class _Collection:
    """Raises the queued errors on each call, then answers."""

    def __init__(self, *errors: Exception) -> None:
        self.errors = list(errors)
        self.calls: list[str] = []

    def _call(self, name: str) -> Any:
        self.calls.append(name)
        if self.errors:
            raise self.errors.pop(0)
        return {"ids": [["a"]]}

    def query(self, **_: Any) -> Any:
        return self._call("query")

    def get(self, **_: Any) -> Any:
        return self._call("get")

    def delete(self, **_: Any) -> Any:
        return self._call("delete")


def _wrapped(inner: _Collection) -> Any:
    return RetryingCollection(inner, "Chroma at test", DEFAULT_RETRY)


@pytest.mark.parametrize("call", ["query", "get"])
def test_a_read_that_meets_a_delete_in_flight_is_read_again(call: str):
    inner = _Collection(InternalError(RACE))
    assert getattr(_wrapped(inner), call)() == {"ids": [["a"]]}
    assert inner.calls == [call, call]


def test_the_race_that_persists_is_raised_after_three_reads():
    inner = _Collection(*(InternalError(RACE) for _ in range(3)))
    with pytest.raises(InternalError, match="Error finding id"):
        _wrapped(inner).query()
    assert inner.calls == ["query"] * 3


def test_other_errors_and_writes_are_not_repeated():
    other = _Collection(InternalError("Error executing plan: something else"))
    with pytest.raises(InternalError, match="something else"):
        _wrapped(other).query()
    assert other.calls == ["query"]
    write = _Collection(InternalError(RACE))
    with pytest.raises(InternalError):
        _wrapped(write).delete()
    assert write.calls == ["delete"]

"""`GroupWrites`: a lone write goes at once; writes that meet share one call; a failed
call reaches every caller of its batch; every item is written exactly once."""

from __future__ import annotations

import threading
import time

import pytest

from reference.stm.group_writes import GroupWrites


def _until(condition, timeout_s: float = 5.0) -> None:
    """Wait for another thread to reach a state (synchronisation, not a timed check)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("the other threads never got there")
        time.sleep(0.001)


class BlockingWrite:
    """A write that records its batches and can hold the first call until released."""

    def __init__(self, *, hold_first: bool = False, fail_on: str | None = None) -> None:
        self.batches: list[list[str]] = []
        self.started = threading.Event()
        self.release = threading.Event()
        self.hold_first = hold_first
        self.fail_on = fail_on
        self.threads: list[str] = []

    def __call__(self, items: list[str]) -> None:
        self.batches.append(list(items))
        self.threads.append(threading.current_thread().name)
        if self.hold_first and len(self.batches) == 1:
            self.started.set()
            assert self.release.wait(5)
        if self.fail_on is not None and self.fail_on in items:
            raise RuntimeError(f"write of {self.fail_on} failed")


def test_a_lone_write_is_one_call_of_one_item() -> None:
    write = BlockingWrite()
    groups = GroupWrites(write)
    groups.put("a")
    groups.put("b")
    assert write.batches == [["a"], ["b"]]
    assert (groups.batches, groups.items) == (2, 2)


def test_writes_that_meet_share_one_call_each_written_once() -> None:
    write = BlockingWrite(hold_first=True)
    groups = GroupWrites(write)
    first = threading.Thread(target=groups.put, args=("first",), name="first")
    first.start()
    assert write.started.wait(5)
    others = [threading.Thread(target=groups.put, args=(f"r{i}",), name=f"r{i}") for i in range(5)]
    for thread in others:
        thread.start()
    _until(lambda: len(groups._queue) == 5)
    write.release.set()
    for thread in [first, *others]:
        thread.join(5)
        assert not thread.is_alive()
    assert write.batches[0] == ["first"]
    assert sorted(write.batches[1]) == [f"r{i}" for i in range(5)]
    assert len(write.batches) == 2
    # The second batch was written by one of its own callers, not by the first writer.
    assert write.threads[1] != "first"


def test_max_batch_bounds_a_call_and_nothing_is_lost() -> None:
    write = BlockingWrite(hold_first=True)
    groups = GroupWrites(write, max_batch=2)
    first = threading.Thread(target=groups.put, args=("first",))
    first.start()
    assert write.started.wait(5)
    others = [threading.Thread(target=groups.put, args=(f"r{i}",)) for i in range(5)]
    for thread in others:
        thread.start()
    _until(lambda: len(groups._queue) == 5)
    write.release.set()
    for thread in [first, *others]:
        thread.join(5)
        assert not thread.is_alive()
    assert all(len(batch) <= 2 for batch in write.batches)
    written = sorted(item for batch in write.batches for item in batch)
    assert written == sorted(["first", *(f"r{i}" for i in range(5))])


def test_a_failed_call_reaches_every_caller_of_its_batch_only() -> None:
    write = BlockingWrite(hold_first=True, fail_on="bad")
    groups = GroupWrites(write)
    errors: dict[str, BaseException | None] = {}

    def one(item: str) -> None:
        try:
            groups.put(item)
            errors[item] = None
        except RuntimeError as exc:
            errors[item] = exc

    first = threading.Thread(target=one, args=("first",))
    first.start()
    assert write.started.wait(5)
    others = [threading.Thread(target=one, args=(item,)) for item in ("bad", "good")]
    for thread in others:
        thread.start()
    _until(lambda: len(groups._queue) == 2)
    write.release.set()
    for thread in [first, *others]:
        thread.join(5)
    assert errors["first"] is None
    assert isinstance(errors["bad"], RuntimeError) and isinstance(errors["good"], RuntimeError)
    groups.put("after")  # the writer is free again
    assert write.batches[-1] == ["after"]


def test_a_write_raising_in_a_lone_call_is_raised() -> None:
    groups = GroupWrites(BlockingWrite(fail_on="x"))
    with pytest.raises(RuntimeError, match="write of x failed"):
        groups.put("x")
    groups.put("y")

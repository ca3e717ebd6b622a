"""When the service reclaims the servers' files after erasures (`memharness.serve.cleanup`):
before answering with `within_s` 0; otherwise once the first erasure not yet reclaimed is
`within_s` old, one reclaim for every erasure of that window, and at close. The reclaim
itself is replaced by a recorder; `tests/test_redteam_files.py` runs the real one."""

from __future__ import annotations

from pathlib import Path

import pytest

import memharness.serve.cleanup as cleanup_module
from memharness.serve.cleanup import FileCleanup
from reference.forgetting.reclaim import Reclaimed
from reference.keys import Namespace


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def reclaims(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """One entry per reclaim run."""
    started: list[float] = []
    monkeypatch.setattr(cleanup_module, "reclaim_files", lambda **_: started.append(0) or None)
    return started


def _cleanup(tmp_path: Path, within_s: float, clock: Clock) -> FileCleanup:
    return FileCleanup(
        data_dir=tmp_path, pg_url=None, namespace=Namespace("t"), within_s=within_s, clock=clock
    )


def _erase(cleanup: FileCleanup) -> Reclaimed | None:
    cleanup.erasure_begins()
    return cleanup.settle(cleanup.erasure_ends())


def test_with_no_delay_each_erasure_is_reclaimed_before_it_is_answered(
    tmp_path: Path, reclaims: list[float]
) -> None:
    cleanup = _cleanup(tmp_path, 0.0, Clock())
    assert not cleanup.deferred
    _erase(cleanup)
    _erase(cleanup)
    assert len(reclaims) == 2
    assert not cleanup.pending.exists()


def test_a_deferred_reclaim_waits_its_delay_then_covers_every_erasure_of_the_window(
    tmp_path: Path, reclaims: list[float]
) -> None:
    clock = Clock()
    cleanup = _cleanup(tmp_path, 3600.0, clock)
    assert cleanup.deferred
    _erase(cleanup)
    assert reclaims == [] and cleanup.pending.exists()
    clock.now += 1800
    _erase(cleanup)
    assert cleanup.reclaim_if_due() is None and reclaims == []
    clock.now += 1799.9
    assert not cleanup.due()
    clock.now += 0.1  # the first erasure is an hour old: one reclaim for both
    assert cleanup.due()
    cleanup.reclaim_if_due()
    assert len(reclaims) == 1
    assert not cleanup.pending.exists()
    assert not cleanup.due()
    clock.now += 7200  # nothing erased since: nothing to do
    assert cleanup.reclaim_if_due() is None and len(reclaims) == 1


def test_an_erasure_that_ends_during_a_reclaim_waits_from_that_reclaims_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock()
    cleanup = _cleanup(tmp_path, 60.0, clock)

    def slow_reclaim(**_: object) -> None:  # an erasure ends while the files are rewritten
        clock.now += 5
        cleanup.erasure_begins()
        cleanup.erasure_ends()

    monkeypatch.setattr(cleanup_module, "reclaim_files", slow_reclaim)
    _erase(cleanup)
    clock.now += 60
    began = clock.now
    cleanup.reclaim_if_due()
    assert cleanup.pending.exists()  # the later erasure is not covered yet
    clock.now = began + 59.9
    assert not cleanup.due()
    clock.now = began + 60
    assert cleanup.due()


def test_a_failed_reclaim_keeps_the_mark_and_stays_due(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock()
    cleanup = _cleanup(tmp_path, 10.0, clock)

    def down(**_: object) -> None:
        raise OSError("PostgreSQL is down")

    monkeypatch.setattr(cleanup_module, "reclaim_files", down)
    _erase(cleanup)
    clock.now += 10
    assert cleanup.reclaim_if_due() is None
    assert cleanup.pending.exists() and cleanup.due()


def test_close_reclaims_what_is_still_waiting(tmp_path: Path, reclaims: list[float]) -> None:
    cleanup = _cleanup(tmp_path, 3600.0, Clock())
    cleanup.start()
    _erase(cleanup)
    cleanup.close()
    assert len(reclaims) == 1
    assert not cleanup.pending.exists()
    cleanup.close()  # nothing waits any more
    assert len(reclaims) == 1

from datetime import UTC, datetime

import pytest

from reference.clock import SystemClock, VirtualClock, format_ts, to_epoch


def test_virtual_clock_moves_only_when_told() -> None:
    clock = VirtualClock(1000.0)
    assert clock.now() == 1000.0
    assert clock.advance(30) == 1030.0
    assert clock.set(2000.0) == 2000.0
    assert clock.now() == 2000.0
    assert not clock.is_wall_clock


def test_virtual_clock_refuses_to_go_backwards() -> None:
    clock = VirtualClock(1000.0)
    with pytest.raises(ValueError, match="seconds"):
        clock.advance(-1)
    with pytest.raises(ValueError, match="before the clock's now"):
        clock.set(999.0)


def test_virtual_clock_accepts_datetimes() -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    clock = VirtualClock(start)
    assert clock.now() == start.timestamp()
    assert to_epoch(datetime(2026, 1, 1)) == start.timestamp()  # naive means UTC
    assert format_ts(clock.now()) == "2026-01-01T00:00:00+00:00"


def test_system_clock_is_the_wall_clock() -> None:
    clock = SystemClock()
    assert clock.is_wall_clock
    assert clock.now() > 1_700_000_000

from datetime import UTC, datetime

import pytest

from reference.clock import ScaledClock, SystemClock, VirtualClock, format_ts, to_epoch


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


def test_scaled_clock_runs_scale_times_faster_from_its_origins() -> None:
    clock = ScaledClock(1000.0, origin=5_000.0, wall_origin=SystemClock().now() - 2.0)
    assert clock.scale == 1000.0
    assert clock.native_ttl_scale == 1000.0
    assert not clock.is_wall_clock
    # two wall seconds after the wall origin: two thousand clock seconds after the origin
    assert 7_000.0 <= clock.now() < 7_000.0 + 1000.0 * 60


def test_two_scaled_clocks_with_the_same_origins_agree() -> None:
    wall = SystemClock().now()
    a = ScaledClock(4320, origin=1_700_000_000.0, wall_origin=wall)
    b = ScaledClock(4320, origin=1_700_000_000.0, wall_origin=wall)
    first, second = a.now(), b.now()
    assert first <= second < first + 4320 * 5  # b read later, never earlier


def test_scaled_clock_defaults_its_origins_to_now() -> None:
    before = SystemClock().now()
    clock = ScaledClock(2.0)
    assert before <= clock.origin == clock.wall_origin <= SystemClock().now()


@pytest.mark.parametrize("scale", [0, -1.0, float("nan"), float("inf"), True, "2"])
def test_scaled_clock_rejects_a_bad_scale(scale: object) -> None:
    with pytest.raises(ValueError, match="scale"):
        ScaledClock(scale)  # type: ignore[arg-type]


def test_native_ttl_scale_per_clock() -> None:
    assert SystemClock().native_ttl_scale == 1.0
    assert VirtualClock().native_ttl_scale is None

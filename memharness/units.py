"""Seconds and bytes in the units people read: `3.0 d`, `1.5 KiB`."""

from __future__ import annotations


def human_duration(seconds: float | None) -> str:
    """`86400` -> `24.0 h`, `259200` -> `3.0 d`; hours up to 48 h, `-` for None."""
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{seconds:.1f} s"
    if seconds < 3600:
        return f"{seconds / 60:.1f} min"
    if seconds < 48 * 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"


def human_bytes(n: float | None) -> str:
    """Binary units: `900 B`, `1.5 KiB`, `2.0 MiB`, `1.1 GiB`; `-` for None."""
    if n is None:
        return "-"
    if n < 1024:
        return f"{n:.0f} B"
    for unit in ("KiB", "MiB"):
        n /= 1024
        if n < 1024:
            return f"{n:.1f} {unit}"
    return f"{n / 1024:.1f} GiB"


def binary_unit(n: float) -> tuple[str, int]:
    """The binary unit `human_bytes` writes `n` bytes in, and its size in bytes."""
    for power, unit in enumerate(("B", "KiB", "MiB")):
        if n < 1024 ** (power + 1):
            return unit, 1024**power
    return "GiB", 1024**3

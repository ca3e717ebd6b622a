"""Durations as a user writes them: `7d`, `1h`, `30m`, `45s`, `1h30m`, or plain seconds.

The one duration grammar of the project: strategy files, the commands' options
(`memharness.cli_settings.DURATION`) and the load's `--steps` all read durations here.
`parse_duration` turns one into float seconds (`parse_positive_duration`: more than
zero); `seconds_field` is the pydantic before-validator for fields that hold seconds, so
a YAML file may say `default_s: 7d`.
"""

from __future__ import annotations

import math
import re
from typing import Any

__all__ = ["UNITS", "DurationError", "parse_duration", "parse_positive_duration", "seconds_field"]

#: Each unit and its length in seconds, largest first (the order a duration is written in).
UNITS = {"d": 86_400.0, "h": 3_600.0, "m": 60.0, "s": 1.0}

_NUMBER = r"(\d+(?:\.\d*)?|\.\d+)"
_DURATION = re.compile("".join(f"(?:{_NUMBER}{unit})?" for unit in UNITS))
_HINT = "seconds (3600) or a number with a unit d, h, m or s (7d, 1h30m, 45s)"


class DurationError(ValueError):
    """A text that is not a duration; the message says what is accepted."""


def parse_duration(value: str | float) -> float:
    """Seconds from a number (seconds) or a text such as `7d`, `1h30m`, `90s`, `2.5h`.

    Refused: negative and non-finite values, unknown units (`7w`), units out of order or
    repeated (`30m1h`), and anything else that is not a number.
    """
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise DurationError(f"must be a duration: {_HINT}")
    if isinstance(value, str):
        text = "".join(value.split()).lower()
        if not text:
            raise DurationError(f"is empty; expected {_HINT}")
        seconds = float(text) if _is_number(text) else _from_units(text)
    else:
        seconds = float(value)
    if not math.isfinite(seconds):
        raise DurationError(f"must be a finite duration, got {value!r}")
    if seconds < 0:
        raise DurationError(f"must not be negative, got {value!r}")
    return seconds


def parse_positive_duration(value: str | float) -> float:
    """`parse_duration`, more than zero: a run time, an interval."""
    seconds = parse_duration(value)
    if seconds <= 0:
        raise DurationError(f"must be more than 0, got {value!r}")
    return seconds


def seconds_field(value: Any) -> Any:
    """Pydantic before-validator: a duration text becomes seconds; other values (numbers,
    None) pass through to the field's own checks."""
    if isinstance(value, str):
        return parse_duration(value)
    return value


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _from_units(text: str) -> float:
    if text.startswith("-"):
        raise DurationError(f"must not be negative, got {text!r}")
    match = _DURATION.fullmatch(text)
    if match is None or not any(match.groups()):
        unknown = sorted(set(re.findall(r"[\d.]([a-z]+)", text)) - set(UNITS))
        why = f"unknown unit {', '.join(map(repr, unknown))}; " if unknown else ""
        raise DurationError(f"{text!r} is not a duration: {why}expected {_HINT}")
    return sum(
        float(n) * length for n, length in zip(match.groups(), UNITS.values(), strict=True) if n
    )

"""Phone numbers other than Chinese mobiles, found by `phonenumbers` (Google's libphonenumber).

International numbers (`+44 20 7946 0958`, `0049 30 1234567`), national formats of the
regions in `REGIONS` (`(415) 555-2671`, `020 7946 0958`, `06 12 34 56 78`) and Chinese
landlines with their area code (`010-12345678`, `(021) 1234 5678`). Leniency VALID: the
number must be a valid number of its region (length, prefix, number range), so order
numbers, amounts and dates are not taken for phones.

`phonenumbers` is slow next to a regex (about 0.2 ms a region on a sentence), so it only
sees short candidate stretches: digits (at least 7) with the separators phone numbers
use, and a little context before them.
"""

from __future__ import annotations

import re

import phonenumbers

#: Regions whose national formats are recognised, in the order they are tried.
REGIONS = ("CN", "US", "GB", "DE", "FR")

# A stretch that could hold a phone number: an optional + or (, digits and separators.
_CANDIDATE_RE = re.compile(r"(?:\+|\(\s*)?\d[\d \-.()/]{5,}\d", re.ASCII)
_MIN_DIGITS = 7
_DECIMAL_RE = re.compile(r"\d+\.\d{1,2}", re.ASCII)
_KEYWORD_RE = re.compile(r"(?i)phone|tel\b|call|ring|number|电话|座机|号码|致电|打")
_CONTEXT = 8  # characters before a candidate the matcher sees (letters glued to it reject it)


def find_phones(norm: str) -> list[tuple[int, int]]:
    """Spans of valid phone numbers in `norm` (ASCII digits: full-width already mapped)."""
    found: list[tuple[int, int]] = []
    for cand in _CANDIDATE_RE.finditer(norm):
        if sum(ch.isdigit() for ch in cand.group()) < _MIN_DIGITS:
            continue
        if _DECIMAL_RE.fullmatch(cand.group()):
            continue  # 1767225600.0, 12345678.50: a number with a fraction, not a phone
        if cand.group().isdigit() and not (
            cand.group().startswith("0")
            and _KEYWORD_RE.search(norm, max(0, cand.start() - 20), cand.start())
        ):
            # Digits alone, no separator: an order number, an amount or a code as often as a
            # phone (1 281 234 5678 is a US number, 12812345678 a mistyped Chinese mobile).
            # Only with a leading 0 and a phone word just before ("tel 02079460958").
            continue
        lo = max(0, cand.start() - _CONTEXT)
        hi = min(len(norm), cand.end() + 1)
        window = norm[lo:hi]
        for region in REGIONS:
            spans = [
                (lo + m.start, lo + m.end)
                for m in phonenumbers.PhoneNumberMatcher(
                    window, region, leniency=phonenumbers.Leniency.VALID
                )
                # The context is there to reject glued letters, not to find numbers in it.
                if lo + m.end > cand.start() and lo + m.start >= cand.start() - 1
            ]
            if spans:
                found.extend(s for s in spans if s not in found)
                break
    return found


def mask_phone(value: str) -> str:
    """Keep the country code, three digits after it and the last two: `+1 415-***-**71`."""
    digits = [i for i, ch in enumerate(value) if ch.isdigit()]
    keep_head = 3
    stripped = value.lstrip(" (")
    if stripped.startswith(("+", "00")):
        keep_head += _country_code_len(value) + (2 if stripped.startswith("00") else 0)
    visible = set(digits[:keep_head]) | set(digits[-2:])
    if len(visible) >= len(digits) - 2:  # too short to keep that much: the last two only
        visible = set(digits[-2:])
    return "".join("*" if ch.isdigit() and i not in visible else ch for i, ch in enumerate(value))


def _country_code_len(value: str) -> int:
    try:
        number = phonenumbers.parse(value.translate({0x3000: 0x20}), None)
    except phonenumbers.NumberParseException:
        return 0
    return len(str(number.country_code or ""))

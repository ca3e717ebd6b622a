"""Detection and masking of personal data (PII): patterns with checksums, and libraries.

Kinds: `cn_id` (Chinese resident ID, date and ISO 7064 MOD 11-2 checked), `mobile`
(Chinese mobile numbers), `email`, `bank_card` (13-19 digits passing Luhn), `passport`,
`ssn` (US social security number, with its area/group/serial rules), `phone` (any other
phone number, by `phonenumbers`: `phones.py`), `name` and `address` (English: `english.py`;
German, French, Spanish, Italian: `european.py`; Chinese, by jieba: `chinese.py`).
Checksums and validity rules keep near-misses (a mistyped ID, a random long number) out,
so order numbers and amounts are not masked; but an ID-shaped number (a province and a
real birth date) said right after an ID cue ("ID number", "身份证") is an ID, even with a
wrong check character: the user said it was one. Masking keeps
the shape of the value (`1101**********231X`, `138****5678`, `a***@example.com`,
`E*****678`, `***-**-6789`, `+1 415-***-**71`, `J** S**`, `王**`, `** *** Street,
Springfield`, `北京市海淀区*******`) so a reader still sees what it was.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import date

from reference.pii import chinese, english, european, phones
from reference.text_interfaces import PiiMasker, PiiMatch

__all__ = [
    "RegexPiiMasker",
    "contains_raw_pii",
    "is_valid_cn_id",
    "luhn_ok",
]

MASK = "*"

# Chinese input methods often type full-width digits and letters ("１３８１２３４５６７８").
# They map one-to-one onto ASCII, so detection runs on the ASCII form and positions in it
# are positions in the original text. Patterns are ASCII-only (re.ASCII) after that.
_FULLWIDTH = {cp: cp - 0xFEE0 for cp in range(0xFF01, 0xFF5F)} | {0x3000: 0x20}
_A = re.ASCII

_ID_WEIGHTS = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
_ID_CHECK = "10X98765432"
# The first two digits name a province (GB/T 2260), plus 71 Taiwan, 81/82 Hong Kong and
# Macau, 83 the Taiwan residence permit and 91 the foreigner permanent residence ID.
_PROVINCES = frozenset(
    str(n)
    for n in (
        *range(11, 16),
        *range(21, 24),
        *range(31, 38),
        *range(41, 47),
        *range(50, 55),
        *range(61, 66),
        71,
        81,
        82,
        83,
        91,
    )
)

# Letters and digits on either side mean the number is part of a longer token
# (a serial, a hash, an order id), not a value of its own.
_CN_ID_RE = re.compile(r"(?<![0-9A-Za-z])[1-9]\d{16}[0-9Xx](?![0-9A-Za-z])", _A)
_EMAIL_RE = re.compile(
    r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9][A-Za-z0-9._%+-]*@"
    r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*"
    r"\.[A-Za-z]{2,24}(?![A-Za-z0-9-])",
    _A,
)
# 138 1234 5678, 138-1234-5678, +86 13812345678, 0086-138...; the country prefix is
# kept visible by the mask, only the subscriber digits are hidden.
_MOBILE_RE = re.compile(
    r"(?<![0-9A-Za-z])(?:(?:\+|00)?86[ -]?)?(?P<num>1[3-9]\d(?:[ -]?\d{4}){2})(?![0-9A-Za-z])",
    _A,
)
# Either one run of 13-19 digits, or groups of digits joined by one space or dash
# (4-4-4-4, 4-4-4-4-3, 6-13, 4-6-5 ...). Digit counts and Luhn are checked afterwards,
# on the longest run of groups that passes, so a number after the card does not hide it.
_CARD_RE = re.compile(r"(?<![0-9A-Za-z])\d{3,19}(?:[ -]\d{1,19})*(?![0-9A-Za-z])", _A)
_GROUP_RE = re.compile(r"\d+", _A)
_PASSPORT_STRICT_RE = re.compile(r"(?<![0-9A-Za-z])[EGeg]\d{8}(?![0-9A-Za-z])", _A)
_PASSPORT_LOOSE_RE = re.compile(r"(?<![0-9A-Za-z])[A-Za-z]{1,2}\d{7,8}(?![0-9A-Za-z])", _A)
_ANY_DIGIT = re.compile(r"\d", _A)
# 123-45-6789 (or spaced): area not 000, 666 or 9xx, group not 00, serial not 0000.
_SSN_RE = re.compile(
    r"(?<![\d-])(?!000|666|9\d\d)\d{3}(?P<sep>[- ])(?!00)\d{2}(?P=sep)(?!0000)\d{4}(?![\d-])", _A
)
# Nine digits in a row count only close after "SSN" / "social security".
_SSN_BARE_RE = re.compile(r"(?<!\d)(?!000|666|9\d\d)\d{3}(?!00)\d{2}(?!0000)\d{4}(?!\d)", _A)
_SSN_KEYWORD_RE = re.compile(r"(?i)\bssn\b|social security")
_SSN_WINDOW = 30
_UPPER_OR_CJK = re.compile(r"[A-ZÀ-ÖØ-Þ\u4e00-\u9fff]")
# A loose passport number only counts close after a keyword: "passport no. P1234567",
# "护照号码：EA1234567". The window is short so an unrelated code later on is not caught.
_PASSPORT_KEYWORD_RE = re.compile(r"(?i)passport|护照|護照")
_PASSPORT_WINDOW = 24
# "My ID number is ...", "身份证号 ...": an ID-shaped number within the window after
# it is taken for an ID whatever its check character.
_ID_CUE_RE = re.compile(r"(?i)身份证|身份證|证件号|\bID\b|\bidentity (?:card|number)")
_ID_CUE_WINDOW = 24

# The longest text `RegexPiiMasker.mask` remembers: utterances are short, and the cache
# then holds a few megabytes at most, whatever the input.
_CACHE_MAX_CHARS = 1_000

# Which kind wins when two candidates overlap: the more specific pattern first.
_PRIORITY = (
    "email",
    "cn_id",
    "mobile",
    "bank_card",
    "ssn",
    "passport",
    "phone",
    "address",
    "name",
)


def is_valid_cn_id(value: str) -> bool:
    """Whether `value` is an 18-character resident ID: province, birth date and checksum."""
    if len(value) != 18 or not (value[:17].isascii() and value[:17].isdigit()):
        return False
    last = value[17].upper()
    if not (last.isdigit() or last == "X") or not _looks_like_cn_id(value[:17] + "0"):
        return False
    total = sum(int(d) * w for d, w in zip(value[:17], _ID_WEIGHTS, strict=True))
    return _ID_CHECK[total % 11] == last


def _said_as_id(norm: str, start: int, value: str) -> bool:
    """An ID-shaped `value` at `start`, after an ID cue ending at most `_ID_CUE_WINDOW`
    characters before it (module docstring)."""
    if not _looks_like_cn_id(value[:17] + "0"):
        return False
    before = norm[max(0, start - _ID_CUE_WINDOW - 12) : start]
    return any(len(before) - cue.end() <= _ID_CUE_WINDOW for cue in _ID_CUE_RE.finditer(before))


def _looks_like_cn_id(digits: str) -> bool:
    """18 digits with a province prefix and a real birth date: an ID, even if mistyped."""
    if len(digits) != 18 or digits[:2] not in _PROVINCES:
        return False
    try:
        born = date(int(digits[6:10]), int(digits[10:12]), int(digits[12:14]))
    except ValueError:
        return False
    return 1900 <= born.year <= 2099


def luhn_ok(digits: str) -> bool:
    """The Luhn (mod 10) check that payment card numbers carry."""
    if not (digits.isascii() and digits.isdigit()):
        return False
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2 == 1:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


def _mask_keep(value: str, head: int, tail: int) -> str:
    """Mask the letters and digits of `value` except the first `head` and last `tail`.

    Separators (spaces, dashes) stay, so `6222 0212 3456 7890` keeps its grouping.
    """
    positions = [i for i, ch in enumerate(value) if ch.isalnum()]
    hidden = set(positions[head : len(positions) - tail] if tail else positions[head:])
    return "".join(MASK if i in hidden else ch for i, ch in enumerate(value))


def _mask_email(value: str) -> str:
    at = value.translate(_FULLWIDTH).index("@")  # the original may hold a full-width "＠"
    return f"{value[0]}{MASK * 3}{value[at:]}"


def _mask_match(match: PiiMatch) -> str:
    if match.kind == "email":
        return _mask_email(match.text)
    if match.kind == "mobile":
        # Only the subscriber number is masked: 3 visible, 4 hidden, 4 visible.
        digits = [i for i, ch in enumerate(match.text) if ch.isdigit()]
        hidden = set(digits[-8:-4])
        return "".join(MASK if i in hidden else ch for i, ch in enumerate(match.text))
    if match.kind == "passport":
        return _mask_keep(match.text, 1, 3)
    if match.kind == "ssn":
        return _mask_keep(match.text, 0, 4)
    if match.kind == "phone":
        return phones.mask_phone(match.text)
    if match.kind == "name":
        return " ".join(chinese.mask_name(word) for word in match.text.split())
    if match.kind == "address":
        if chinese.has_cjk(match.text):
            return chinese.mask_address(match.text)
        return european.mask_address(match.text) or english.mask_address(match.text)
    return _mask_keep(match.text, 4, 4)  # cn_id and bank_card


class RegexPiiMasker(PiiMasker):
    """Detects PII with precompiled patterns plus checksums, and masks it in place.

    `mask` repeats until nothing is detected, so its output never contains PII that
    `detect` would find, and masking is idempotent.

    `mask` remembers its answers for up to `cache_size` texts of up to 1,000 characters
    (emptied when full): a turn masks the same text more than once (the turn, then the
    store), and masked text masks to itself. Only text without PII is remembered (a
    masked output, or an input with nothing to mask): raw PII never sits in the cache.
    """

    def __init__(self, *, cache_size: int = 16_384, chinese_words: bool = True) -> None:
        self._cache_size = cache_size
        self._chinese = chinese_words
        self._masked: dict[str, str] = {}

    def detect(self, text: str) -> list[PiiMatch]:
        norm = text.translate(_FULLWIDTH)
        candidates: dict[str, list[PiiMatch]] = {kind: [] for kind in _PRIORITY}

        def add(kind: str, start: int, end: int) -> None:
            candidates[kind].append(PiiMatch(kind, start, end, text[start:end]))

        if "@" in norm:
            for m in _EMAIL_RE.finditer(norm):
                add("email", m.start(), m.end())
        if _ANY_DIGIT.search(norm):
            for m in _CN_ID_RE.finditer(norm):
                if is_valid_cn_id(m.group()) or _said_as_id(norm, m.start(), m.group()):
                    add("cn_id", m.start(), m.end())
            for m in _MOBILE_RE.finditer(norm):
                add("mobile", m.start(), m.end())
            for m in _CARD_RE.finditer(norm):
                for start, end in _cards_in(norm, m.start(), m.end()):
                    add("bank_card", start, end)
            for start, end in _passports(norm):
                add("passport", start, end)
            for start, end in _ssns(norm):
                add("ssn", start, end)
            for start, end in phones.find_phones(norm):
                add("phone", start, end)
        if _UPPER_OR_CJK.search(norm):
            self._add_names_and_addresses(norm, add)
        return _resolve(candidates)

    def _add_names_and_addresses(self, norm: str, add: Callable[[str, int, int], None]) -> None:
        for start, end in english.find_names(norm):
            add("name", start, end)
        for start, end in english.find_addresses(norm):
            add("address", start, end)
        for start, end in european.find_names(norm):
            add("name", start, end)
        for start, end in european.find_addresses(norm):
            add("address", start, end)
        if self._chinese and chinese.has_cjk(norm):
            names, addresses = chinese.find_names_and_addresses(norm)
            for start, end in names:
                add("name", start, end)
            for start, end in addresses:
                add("address", start, end)

    def mask(self, text: str) -> str:
        if type(text) is not str or len(text) > _CACHE_MAX_CHARS or not self._cache_size:
            return self._mask(text)
        masked = self._masked.get(text)
        if masked is None:
            masked = self._mask(text)
            if len(self._masked) >= self._cache_size:
                self._masked.clear()
            # Idempotent: the masked text masks to itself (and is what comes next, to the
            # store); an input that held PII is not kept.
            self._masked[masked] = masked
        return masked

    def _mask(self, text: str) -> str:
        # Masking turns at least one letter or digit of each match into '*', so every
        # round strictly shrinks what can match and the loop ends (one round in practice).
        # Looping to the fixed point is what makes mask idempotent.
        while matches := self.detect(text):
            masked = _apply(text, matches)
            if masked == text:
                # A kind's shape-keeping mask was found again as it stands: hide all of it,
                # so the loop still ends (a mask that keeps a value found must not hang a turn).
                masked = _apply(text, matches, keep_shape=False)
            text = masked
        return text


def _ssns(norm: str) -> list[tuple[int, int]]:
    found = [(m.start(), m.end()) for m in _SSN_RE.finditer(norm)]
    for kw in _SSN_KEYWORD_RE.finditer(norm):
        for m in _SSN_BARE_RE.finditer(norm, kw.end(), kw.end() + _SSN_WINDOW + 9):
            found.append((m.start(), m.end()))
    return found


def _passports(norm: str) -> list[tuple[int, int]]:
    found = [(m.start(), m.end()) for m in _PASSPORT_STRICT_RE.finditer(norm)]
    for kw in _PASSPORT_KEYWORD_RE.finditer(norm):
        window_end = kw.end() + _PASSPORT_WINDOW
        # No `endpos`: a window edge must not cut a longer token into a passport number.
        for m in _PASSPORT_LOOSE_RE.finditer(norm, kw.end()):
            if m.start() >= window_end:
                break
            if all(start != m.start() for start, _ in found):
                found.append((m.start(), m.end()))
    return found


def _cards_in(norm: str, start: int, end: int) -> list[tuple[int, int]]:
    """Card numbers inside one run of digit groups: greedy, longest passing span first."""
    groups = [(g.start(), g.end()) for g in _GROUP_RE.finditer(norm, start, end)]
    found: list[tuple[int, int]] = []
    i = 0
    while i < len(groups):
        best = None
        for j in range(len(groups) - 1, i - 1, -1):
            digits = "".join(norm[a:b] for a, b in groups[i : j + 1])
            if 13 <= len(digits) <= 19 and luhn_ok(digits) and not _looks_like_cn_id(digits):
                best = j
                break
        if best is None:
            i += 1
            continue
        found.append((groups[i][0], groups[best][1]))
        i = best + 1
    return found


def _resolve(candidates: dict[str, list[PiiMatch]]) -> list[PiiMatch]:
    """Non-overlapping matches, higher-priority kinds first, sorted by position."""
    taken: list[PiiMatch] = []
    for kind in _PRIORITY:
        for cand in candidates[kind]:
            if all(cand.end <= t.start or cand.start >= t.end for t in taken):
                taken.append(cand)
    taken.sort(key=lambda m: m.start)
    return taken


def _apply(text: str, matches: list[PiiMatch], *, keep_shape: bool = True) -> str:
    parts: list[str] = []
    pos = 0
    for m in matches:
        parts.append(text[pos : m.start])
        if keep_shape:
            parts.append(_mask_match(m))
        else:
            parts.append("".join(ch if ch.isspace() else MASK for ch in m.text))
        pos = m.end
    parts.append(text[pos:])
    return "".join(parts)


_DEFAULT = RegexPiiMasker()


def contains_raw_pii(text: str) -> bool:
    """Whether `text` still holds PII that the default masker would detect."""
    return bool(_DEFAULT.detect(text))

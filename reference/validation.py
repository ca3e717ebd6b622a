"""Checks on caller input. Every failure raises `InvalidInput` naming the field.

The limits below are the facade's documented ones (docs/input-and-isolation.md):
a turn's text or a recall's query over `MAX_TEXT_CHARS` is refused, as are ids outside
`[A-Za-z0-9_.@-]` or over `MAX_ID_LENGTH`, before anything is written.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from reference.errors import InvalidInput
from reference.models import Category, MemoryType, RetentionUpdate

MAX_ID_LENGTH = 128
MAX_TEXT_CHARS = 8_000
MAX_KEY_LENGTH = 200
MAX_VALUE_BYTES = 64 * 1024
EMBEDDING_DIM = 384
_CATEGORIES = tuple(c.value for c in Category)
_MEMORY_TYPES = tuple(t.value for t in MemoryType)

# Ids end up inside Redis keys, Chroma metadata filters and SQL parameters. A narrow
# alphabet means no id can forge another key's shape (no ':' or '*' or whitespace).
_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@-]*")
# Ids already found valid: a turn checks the same few ids ten times over. Emptied when
# full, so it stays bounded whatever the input.
_VALID_IDS: set[str] = set()
_VALID_IDS_MAX = 65_536


def check_id(field: str, value: object) -> str:
    if type(value) is str and value in _VALID_IDS:
        return value
    if not isinstance(value, str):
        raise InvalidInput(field, f"must be a string, got {type(value).__name__}")
    if not value:
        raise InvalidInput(field, "must not be empty")
    if len(value) > MAX_ID_LENGTH:
        raise InvalidInput(field, f"is {len(value)} characters long; the limit is {MAX_ID_LENGTH}")
    if not _ID_RE.fullmatch(value):
        raise InvalidInput(
            field,
            f"{value[:40]!r} has characters outside [A-Za-z0-9_.@-] or does not start with "
            "a letter or digit",
        )
    if type(value) is str:
        if len(_VALID_IDS) >= _VALID_IDS_MAX:
            _VALID_IDS.clear()
        _VALID_IDS.add(value)
    return value


def check_text(field: str, value: object, *, max_chars: int = MAX_TEXT_CHARS) -> str:
    if not isinstance(value, str):
        raise InvalidInput(field, f"must be a string, got {type(value).__name__}")
    if not value.strip():
        raise InvalidInput(field, "must not be empty or whitespace")
    if len(value) > max_chars:
        raise InvalidInput(field, f"is {len(value)} characters long; the limit is {max_chars}")
    if "\x00" in value:
        raise InvalidInput(field, "must not contain NUL characters")
    _check_encodable(field, value)
    return value


def _check_encodable(field: str, value: str) -> None:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput(field, "contains unpaired surrogates (not valid UTF-8)") from None


def check_metadata(field: str, value: object) -> dict[str, str | int | float | bool]:
    """Caller metadata of a turn (order ids, a speaker): string keys, not empty and not
    starting with '_'; values str, 64-bit int, finite float or bool; no NUL or unpaired surrogate
    anywhere; strings up to `MAX_TEXT_CHARS`, the whole up to `MAX_VALUE_BYTES` as JSON.
    Checked before anything is written, as every layer that keeps it could refuse it."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidInput(field, f"must be a dict, got {type(value).__name__}")
    for key, item in value.items():
        if not isinstance(key, str) or not key or key.startswith("_"):
            raise InvalidInput(
                field, f"key {key!r} must be a non-empty string not starting with '_'"
            )
        if "\x00" in key:
            raise InvalidInput(field, f"key {key[:40]!r} must not contain NUL characters")
        _check_encodable(field, key)
        where = f"{field}.{key}"
        if isinstance(item, str):
            if len(item) > MAX_TEXT_CHARS:
                message = f"is {len(item)} characters long; the limit is {MAX_TEXT_CHARS}"
                raise InvalidInput(where, message)
            if "\x00" in item:
                raise InvalidInput(where, "must not contain NUL characters")
            _check_encodable(where, item)
        elif isinstance(item, float) and not math.isfinite(item):
            raise InvalidInput(where, f"must be a finite number, got {item!r}")
        elif isinstance(item, int) and not -(2**63) <= item < 2**63:  # Chroma's int64
            raise InvalidInput(where, f"{item} does not fit in a signed 64-bit integer")
        elif not isinstance(item, int | float | bool):
            message = f"must be str, int, float or bool, got {type(item).__name__}"
            raise InvalidInput(where, message)
    check_json_object(field, value)  # the size
    return value


def check_timestamp(field: str, value: object) -> float:
    if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
        raise InvalidInput(field, f"must be a finite epoch timestamp, got {value!r}")
    return float(value)


def check_key(field: str, value: object) -> str:
    text = check_text(field, value, max_chars=MAX_KEY_LENGTH)
    return text.strip()


def check_category(field: str, value: object) -> Category:
    if isinstance(value, str) and value in _CATEGORIES:
        return Category(value)
    allowed = ", ".join(_CATEGORIES)
    raise InvalidInput(field, f"unknown category {value!r}; expected one of {allowed}")


def check_memory_type(field: str, value: object) -> MemoryType:
    if isinstance(value, str) and value in _MEMORY_TYPES:
        return MemoryType(value)
    allowed = ", ".join(_MEMORY_TYPES)
    raise InvalidInput(field, f"unknown memory type {value!r}; expected one of {allowed}")


def check_importance(field: str, value: object) -> float:
    if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
        raise InvalidInput(field, f"must be a finite number, got {value!r}")
    if not 0.0 <= float(value) <= 10.0:
        raise InvalidInput(field, f"must be between 0 and 10, got {value}")
    return float(value)


def check_positive(field: str, value: object) -> float:
    if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
        raise InvalidInput(field, f"must be a finite number, got {value!r}")
    if value <= 0:
        raise InvalidInput(field, f"must be positive, got {value}")
    return float(value)


def check_k(field: str, value: object, *, limit: int = 1_000) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= limit:
        raise InvalidInput(field, f"must be an integer between 1 and {limit}, got {value!r}")
    return value


def check_embedding(field: str, value: Sequence[float] | Any) -> np.ndarray:
    """The embedding as a 1-D array of `EMBEDDING_DIM` finite values, not all zero.

    A float32 array (what every embedder returns) comes back as is, not copied: float64
    holds each of its values exactly, so nothing downstream can tell it from a float64
    copy, and a turn passes one vector through every layer without converting it. Other
    input is converted to float64 (a float64 array is not copied either): callers that
    keep the vector copy it.
    """
    if isinstance(value, np.ndarray) and value.dtype == np.float32:
        if value.shape == (EMBEDDING_DIM,):
            # One pass for both value checks. In float32 first: a finite positive sum of
            # squares means every value is finite and one is not zero (NaN and inf
            # propagate), which is every unit vector. Else in float64, whose squares of
            # float32 values neither overflow nor underflow: the sum is finite exactly
            # when every value is, and positive exactly when one is not zero.
            if 0.0 < float(value.dot(value)) < math.inf:
                return value
            wide = value.astype(np.float64)
            if 0.0 < float(wide.dot(wide)) < math.inf:
                return value
        array = value  # the checks below say what is wrong with it
    else:
        try:
            array = np.asarray(value, dtype=np.float64)
        except (TypeError, ValueError):
            raise InvalidInput(field, "must be a sequence of numbers") from None
    if array.ndim != 1:
        raise InvalidInput(field, "must be a sequence of numbers")
    if len(array) != EMBEDDING_DIM:
        raise InvalidInput(field, f"has {len(array)} dimensions; expected {EMBEDDING_DIM}")
    # One vectorised pass each (a loop over 384 floats in Python costs a tenth of a turn).
    if not np.isfinite(array).all():
        raise InvalidInput(field, "contains NaN or infinite values")
    if not array.any():
        raise InvalidInput(field, "is the zero vector (cosine similarity is undefined)")
    return array


# `json.dumps` with options builds a new encoder per call, a third of the time it takes to
# encode a short value: these are built once (an encoder keeps no state between calls, so
# threads share them). `encode_json` refuses NaN and infinities as JSONB does; `dump_json`
# writes them as `json.dumps` does by default.
encode_json = json.JSONEncoder(ensure_ascii=False, allow_nan=False).encode
dump_json = json.JSONEncoder(ensure_ascii=False).encode


def check_json_object(field: str, value: object) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise InvalidInput(field, f"must be a JSON object (dict), got {type(value).__name__}")
    try:
        encoded = encode_json(value)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(field, f"is not JSON-serialisable: {exc}") from None
    # A NUL in any key or string shows in the encoding as the escape \u0000 whose own
    # backslash is not escaped (an even run of backslashes before it): one JSON pass
    # instead of a walk over the value.
    if "\\u0000" in encoded and _NUL_ESCAPE.search(encoded):
        raise InvalidInput(field, "must not contain NUL characters (JSONB cannot store them)")
    try:
        size = len(encoded.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidInput(field, "contains unpaired surrogates (not valid UTF-8)") from None
    if size > MAX_VALUE_BYTES:
        raise InvalidInput(field, f"encodes to more than {MAX_VALUE_BYTES} bytes")
    return value


_NUL_ESCAPE = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")


def check_retention(update: RetentionUpdate) -> None:
    """Refuses an update no backend could store: a bad id, a non-finite deadline or a
    negative or non-finite importance (scores may exceed 10 under a custom max_score)."""
    check_id("record_id", update.record_id)
    if update.expires_at is not None:
        check_timestamp("expires_at", update.expires_at)
    check_timestamp("importance", update.importance)
    if update.importance < 0:
        raise InvalidInput("importance", f"must not be negative, got {update.importance}")

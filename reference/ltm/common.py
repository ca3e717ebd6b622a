"""Checks and record helpers shared by the long-term backends.

Both backends apply the checks so they accept and reject exactly the same input (inputs
PostgreSQL cannot store, or cosine cannot score).
"""

from __future__ import annotations

import functools
import json
from typing import Any

import numpy as np

from reference.errors import InvalidInput
from reference.models import AuditEntry, Fact
from reference.validation import encode_json

# Both backends apply these so they accept and reject exactly the same input. They belong
# in validation.py (inputs PostgreSQL cannot store, or cosine cannot score).


def storable_json(field_name: str, value: dict[str, Any]) -> str:
    """`value` encoded as JSONB will store it; rejects what JSONB refuses (NUL escapes)."""
    encoded = encode_json(value)
    if "\\u0000" in encoded:
        raise InvalidInput(field_name, "must not contain NUL characters (JSONB cannot store them)")
    try:
        encoded.encode()
    except UnicodeEncodeError:
        raise InvalidInput(field_name, "contains unpaired surrogates (not valid UTF-8)") from None
    return encoded


def storable_text(field_name: str, text: str) -> None:
    """Rejects text that PostgreSQL cannot store (unpaired surrogates are not UTF-8)."""
    try:
        text.encode()
    except UnicodeEncodeError:
        raise InvalidInput(field_name, "contains unpaired surrogates (not valid UTF-8)") from None


def nonzero_vector(field_name: str, embedding: list[float] | np.ndarray) -> np.ndarray:
    """The embedding as float32 (as `vector` stores it; a float32 array is not copied);
    a zero vector has no cosine."""
    vector = np.asarray(embedding, dtype=np.float32)
    if not np.count_nonzero(vector):  # as `.any()`, without its Python wrapper
        raise InvalidInput(field_name, "is the zero vector; cosine similarity is undefined")
    return vector


def as_real(value: float) -> float:
    """`value` as a PostgreSQL `real` column returns it (float4, shortest decimal)."""
    if not value:  # 0.0 and -0.0 are equal keys of the cache, and differ here
        return float(str(np.float32(value)))
    return _as_real(value)


@functools.lru_cache(maxsize=4096)
def _as_real(value: float) -> float:
    # Every turn rounds importances, and they take few values (5.0 and its steps).
    return float(str(np.float32(value)))


def audit_draft(
    fact: Fact,
    action: str,
    actor: str,
    now: float,
    old_value: dict[str, Any] | None,
    new_value: dict[str, Any] | None,
    cause: str = "",
) -> AuditEntry:
    """An audit entry not yet written: audit_id 0 until the backend assigns one."""
    return AuditEntry(
        audit_id=0,
        fact_id=fact.fact_id,
        user_id=fact.user_id,
        category=fact.category,
        key=fact.key,
        action=action,
        actor=actor,
        at=now,
        version=fact.version,
        old_value=old_value,
        new_value=new_value,
        cause=cause,
    )


def numbered(entry: AuditEntry, audit_id: int) -> AuditEntry:
    """The audit entry with the id its store assigns. Positional, as `copy_fact`: every
    change writes one (`dataclasses.replace` took twice as long)."""
    return AuditEntry(
        audit_id,
        entry.fact_id,
        entry.user_id,
        entry.category,
        entry.key,
        entry.action,
        entry.actor,
        entry.at,
        entry.version,
        entry.old_value,
        entry.new_value,
        entry.cause,
    )


def copy_json(value: dict[str, Any] | None) -> dict[str, Any] | None:
    # A caller mutating a returned dict must not change the stored one (as with a database).
    return None if value is None else json.loads(json.dumps(value))


def copy_fact(fact: Fact) -> Fact:
    """A fact whose value the caller may mutate without changing the stored one."""
    # The constructor with positional arguments, not `dataclasses.replace` (several times
    # slower): every hit of a query is copied. Fact's fields are all init fields without
    # checks, so it is the same (tests/test_hot_paths.py holds the field order to it).
    return Fact(
        fact.fact_id,
        fact.user_id,
        fact.category,
        fact.key,
        copy_plain(fact.value),
        fact.text,
        fact.version,
        fact.created_at,
        fact.updated_at,
        fact.last_accessed_at,
        fact.access_count,
        fact.importance,
        fact.expires_at,
        fact.status,
        fact.archive_reason,
    )


def accessed_fact(fact: Fact, now: float) -> Fact:
    """The fact as an access at `now` leaves it (`last_accessed_at`, `access_count`);
    the value is shared, not copied. Positional, as `copy_fact`: every touched hit."""
    return Fact(
        fact.fact_id,
        fact.user_id,
        fact.category,
        fact.key,
        fact.value,
        fact.text,
        fact.version,
        fact.created_at,
        fact.updated_at,
        now,
        fact.access_count + 1,
        fact.importance,
        fact.expires_at,
        fact.status,
        fact.archive_reason,
    )


_SCALARS = (str, int, float, bool, type(None))


def copy_plain(value: Any) -> Any:
    """A copy of a JSON-normalised value (what `json.loads` returns): equal to a JSON
    round trip (`copy_json`), at a fraction of it. Stored values are normalised at write
    (`storable_json`, then `json.loads`): dicts, lists and scalars only."""
    if isinstance(value, dict):
        return {
            key: item if type(item) in _SCALARS else copy_plain(item) for key, item in value.items()
        }
    if isinstance(value, list):
        return [item if type(item) in _SCALARS else copy_plain(item) for item in value]
    return value


__all__ = [
    "accessed_fact",
    "as_real",
    "audit_draft",
    "copy_fact",
    "copy_json",
    "copy_plain",
    "nonzero_vector",
    "numbered",
    "storable_json",
    "storable_text",
]

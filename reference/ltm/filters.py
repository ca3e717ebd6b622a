"""What LTM operations take besides facts: which facts (`LtmFilter`), the changes of one
sweep batch (`FactChanges`) and what they did (`FactChangeCounts`), the audit's actions and
the value an erasure leaves. Shared by the store's public API and its primitives."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from reference.errors import InvalidInput
from reference.models import Category, Fact, Status
from reference.records import fast_init
from reference.validation import (
    check_category,
    check_id,
    check_json_object,
    check_key,
    check_text,
)

AUDIT_ACTIONS = ("insert", "update", "archive", "delete", "erase", "anonymise")
#: What an erased value becomes in the audit log: the entry stays (who, when, what, key),
#: the value does not. Distinct from None, which means "no value" (an insert's old value).
REDACTED: dict[str, Any] = {"_redacted": True}
#: The longest cause an audit entry keeps (`AuditEntry.cause`).
MAX_CAUSE_CHARS = 500


def check_cause(field_name: str, cause: object) -> str:
    """An audit cause: a string (empty: none given) PostgreSQL can store, of at most
    `MAX_CAUSE_CHARS` characters."""
    if not isinstance(cause, str):
        raise InvalidInput(field_name, f"must be a string, got {type(cause).__name__}")
    if len(cause) > MAX_CAUSE_CHARS:
        raise InvalidInput(
            field_name, f"is {len(cause)} characters; the limit is {MAX_CAUSE_CHARS}"
        )
    return check_text(field_name, cause) if cause else cause


@fast_init
@dataclass(frozen=True, slots=True)
class FactChanges:
    """One sweep batch's changes, by fact_id, across users; applied in one transaction.

    A fact named under `delete` or `erase` is only removed (archive and anonymise skip
    it). `delete` keeps the removed value in its audit entry; `erase` redacts every audit
    value of the fact. `anonymise` maps a fact to its new value (the sealed original
    dropped), and strips the sealed payload from the fact's audit values as well.
    `causes` maps a fact to why it changes (each audit entry's `cause`, an archived
    fact's `archive_reason`); a fact it does not name gets the cause "".
    """

    delete: frozenset[str] = frozenset()
    erase: frozenset[str] = frozenset()
    archive: frozenset[str] = frozenset()
    anonymise: Mapping[str, dict[str, Any]] = field(default_factory=dict)
    causes: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("delete", "erase", "archive"):
            object.__setattr__(self, name, frozenset(getattr(self, name)))
        for fact_id in (*self.delete, *self.erase, *self.archive, *self.anonymise):
            check_id("fact_ids", fact_id)
        for value in self.anonymise.values():
            check_json_object("anonymise", value)
        for fact_id, cause in self.causes.items():
            check_id("causes", fact_id)
            check_cause("causes", cause)

    def cause_of(self, fact_id: str) -> str:
        """Why the fact changes ("" when `causes` does not say)."""
        return self.causes.get(fact_id, "")

    def __bool__(self) -> bool:
        return bool(self.delete or self.erase or self.archive or self.anonymise)


@fast_init
@dataclass(frozen=True, slots=True)
class FactChangeCounts:
    """How many facts `apply_changes` changed, per kind of change."""

    deleted: int = 0
    erased: int = 0
    archived: int = 0
    anonymised: int = 0


@fast_init
@dataclass(frozen=True, slots=True)
class LtmFilter:
    """Which facts of one user an operation applies to. Unset fields match everything."""

    user_id: str
    categories: frozenset[Category] | None = None
    keys: frozenset[str] | None = None
    fact_ids: frozenset[str] | None = None
    #: Include archived and expired facts (archival, erasure, inspection).
    include_dead: bool = False

    def __post_init__(self) -> None:
        check_id("user_id", self.user_id)
        if self.keys is not None:  # upsert strips keys, so a filter must match stripped keys
            object.__setattr__(self, "keys", frozenset(check_key("keys", k) for k in self.keys))
        for category in self.categories or ():
            check_category("categories", category)
        for fact_id in self.fact_ids or ():
            check_id("fact_ids", fact_id)

    def matches(self, fact: Fact, now: float) -> bool:
        """The in-memory meaning of the filter; real backends translate it to SQL."""
        return (
            fact.user_id == self.user_id
            and (self.categories is None or fact.category in self.categories)
            and (self.keys is None or fact.key in self.keys)
            and (self.fact_ids is None or fact.fact_id in self.fact_ids)
            and fact.status is not Status.DELETED
            and (self.include_dead or fact.is_live(now))
        )

"""Time rules on write and on access: a record's `expires_at` and importance.

Time rules combine by the earliest deadline: a TTL (from the write), a sliding window
(from the last access) and the importance rule (from the last access, or the write under
`ttl_from: written`) each give one, and the first one wins. A sliding or importance
rule gives one only for the memories its `types` and `layers` cover.
Under an importance rule a record's `importance` is its score as of `last_accessed_at`
(`importance.decayed_score` gives the score at any later time).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from reference.errors import InvalidInput
from reference.models import Category, Fact, MemoryType
from reference.policy.decisions import Memory, written_at
from reference.policy.importance import deadline, score_after_access
from reference.policy.strategy import Strategy
from reference.validation import check_timestamp


@dataclass(frozen=True, slots=True)
class AccessUpdate:
    """What to store with an accessed record besides last_accessed_at and access_count."""

    expires_at: float | None
    importance: float


def expires_at_on_write(
    strategy: Strategy, *, kind: MemoryType | Category, importance: float = 5.0, now: float
) -> float | None:
    """The `expires_at` of a new STM record (kind = its type) or LTM value (its category).

    None: no time rule applies, it never expires by time. An LTM upsert that supersedes
    a value is a write: the new value gets a fresh deadline.
    """
    _check_kind(kind)
    now = check_timestamp("now", now)
    if not math.isfinite(importance):
        raise InvalidInput("importance", f"must be a finite number, got {importance!r}")
    return _deadline(strategy, kind, written_at=now, last_access=now, score=importance)


def on_access(strategy: Strategy, record: Memory, *, now: float) -> AccessUpdate:
    """The new expiry and importance of `record` (as stored before this access) at `now`.

    A sliding window restarts; the importance score decays to `now`, gains
    `access_boost` and grants a new TTL (from `now`, or from the write under
    `ttl_from: written`); a fixed TTL still counts from the write. Rules whose `types`
    or `layers` leave the record out change nothing. A record that is no longer live
    stays as it is: access never resurrects.
    """
    now = check_timestamp("now", now)
    if not record.is_live(now):
        return AccessUpdate(expires_at=record.expires_at, importance=record.importance)
    kind = record.category if isinstance(record, Fact) else record.type
    score = record.importance
    rule = strategy.importance
    if rule is not None and rule.covers(kind):
        score = score_after_access(rule, score, now - record.last_accessed_at)
    expires_at = _deadline(
        strategy, kind, written_at=written_at(record), last_access=now, score=score
    )
    return AccessUpdate(expires_at=expires_at, importance=score)


def _deadline(
    strategy: Strategy,
    kind: MemoryType | Category,
    *,
    written_at: float,
    last_access: float,
    score: float,
) -> float | None:
    deadlines: list[float] = []
    if strategy.ttl is not None:
        ttl = strategy.ttl.ttl_for(kind)
        if ttl is not None:
            deadlines.append(written_at + ttl)
    sliding, importance = strategy.sliding, strategy.importance
    if sliding is not None and sliding.covers(kind):
        deadlines.append(last_access + sliding.window_s)
    if importance is not None and importance.covers(kind):
        deadlines.append(
            deadline(importance, score, written_at=written_at, last_access=last_access)
        )
    return min(deadlines, default=None)


def expiry_rule(strategy: Strategy, record: Memory) -> str:
    """The time rule whose deadline is the record's `expires_at`, named as in the
    strategy's YAML: `ttl.by_category.episode`, `ttl.by_type.preference`,
    `ttl.default_s`, `sliding.window_s` or `importance` (the closest, when access times
    were recorded after the deadline was set); `expires_at` when no rule applies."""
    if record.expires_at is None:
        return "expires_at"
    kind = record.category if isinstance(record, Fact) else record.type
    written = written_at(record)
    candidates: list[tuple[float, str]] = []
    if strategy.ttl is not None:
        ttl = strategy.ttl.ttl_for(kind)
        if ttl is not None:
            candidates.append((written + ttl, strategy.ttl.rule_for(kind)))
    sliding, importance = strategy.sliding, strategy.importance
    if sliding is not None and sliding.covers(kind):
        candidates.append((record.last_accessed_at + sliding.window_s, "sliding.window_s"))
    if importance is not None and importance.covers(kind):
        at = deadline(
            importance, record.importance, written_at=written, last_access=record.last_accessed_at
        )
        candidates.append((at, "importance"))
    expires_at = record.expires_at
    return min(candidates, key=lambda c: abs(c[0] - expires_at), default=(0.0, "expires_at"))[1]


def _check_kind(kind: object) -> None:
    if not isinstance(kind, Category | MemoryType):
        raise InvalidInput("kind", f"must be a MemoryType or a Category, got {kind!r}")

"""Sweep decisions: what a sweep at `now` does to each record, and when a record is due.

Nothing here reads a store or a clock; the caller passes `now`. The stores already hide
what is past `expires_at` (lazy expiry); sweeps reclaim it, batch by batch
(`strategy.sweep_batch_size`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from reference.clock import format_ts
from reference.errors import InvalidInput
from reference.models import Fact, Status
from reference.policy.decisions import Action, Decision, Memory, decision_for
from reference.policy.expiry import expiry_rule
from reference.policy.oracle import OracleAdvice
from reference.policy.rules import ArchivalRule
from reference.policy.strategy import Strategy
from reference.validation import check_timestamp


def select_for_forgetting(
    records: Iterable[Memory],
    *,
    strategy: Strategy,
    now: float,
    last_active: Mapping[str, float] | None = None,
    oracle: OracleAdvice | None = None,
) -> list[Decision]:
    """What a sweep at `now` does to each record or fact, in input order.

    - past `expires_at` (any strategy: the stores already hide it): expire;
    - archival: archive the live records of a user whose `last_active[user_id]` is
      `inactive_s` old (a user missing from the mapping is never archived); hard-delete
      an archived record `delete_after_s` after it was archived;
    - PII: anonymise a sealed LTM value `anonymise_after_s` after `_sealed_at`;
    - oracle: delete each live record that `oracle.needed` says no future probe needs.
    A record gets at most one removing decision (expire or delete), alone; archive and
    anonymise may both apply. Deleted records are skipped.
    """
    now = check_timestamp("now", now)
    if strategy.oracle and oracle is None:
        raise InvalidInput("oracle", f"strategy {strategy.name!r} needs the harness's advice")
    seen = last_active or {}
    decisions: list[Decision] = []
    for record in records:
        decisions.extend(_sweep_one(record, strategy, now, seen, oracle))
    return decisions


def _sweep_one(
    record: Memory,
    strategy: Strategy,
    now: float,
    last_active: Mapping[str, float],
    oracle: OracleAdvice | None,
) -> list[Decision]:
    if record.status is Status.DELETED:
        return []
    if record.expires_at is not None and now >= record.expires_at:
        rule = expiry_rule(strategy, record)
        reason = f"expired at {format_ts(record.expires_at)} by {rule}"
        return [decision_for(record, Action.EXPIRE, reason)]
    archival, user_seen = strategy.archival, last_active.get(record.user_id)
    found: list[Decision] = []
    if record.status is Status.ARCHIVED:
        if archival is not None:
            since = archived_since(record, user_seen, archival.inactive_s)
            if now >= since + archival.delete_after_s:
                reason = f"archived since {format_ts(since)}, grace period over"
                return [decision_for(record, Action.DELETE, reason)]
    else:
        if strategy.oracle and oracle is not None and not oracle.needed(record, now):
            return [decision_for(record, Action.DELETE, "oracle: no future probe needs it")]
        if (idle := _idle_since(archival, user_seen, now)) is not None:
            reason = f"user inactive since {format_ts(idle)}"
            found.append(decision_for(record, Action.ARCHIVE, reason))
    pii = strategy.pii
    if pii is not None and pii.anonymise_after_s is not None and isinstance(record, Fact):
        sealed = sealed_at(record)
        if sealed is not None and now >= sealed + pii.anonymise_after_s:
            when = format_ts(sealed) if math.isfinite(sealed) else "an unknown time"
            reason = f"PII sealed at {when}, anonymisation deadline passed"
            found.append(decision_for(record, Action.ANONYMISE, reason))
    return found


def _idle_since(archival: ArchivalRule | None, user_seen: float | None, now: float) -> float | None:
    # The user's last activity, when it is old enough to archive the user's memories.
    if archival is None or user_seen is None or now < user_seen + archival.inactive_s:
        return None
    return user_seen


def archived_since(record: Memory, user_last_active: float | None, inactive_s: float) -> float:
    """When a record was archived, as far as the record tells.

    An LTM fact: `updated_at` (the store stamps it when archiving). An STM record has no
    such stamp: its numeric `metadata["archived_at"]` if the engine set one, else the
    later of its last access and the moment its user became inactive.
    """
    if isinstance(record, Fact):
        return record.updated_at
    stamp = record.metadata.get("archived_at")
    if isinstance(stamp, int | float) and not isinstance(stamp, bool):
        return float(stamp)
    since = record.last_accessed_at
    if user_last_active is not None:
        since = max(since, user_last_active + inactive_s)
    return since


def sealed_at(fact: Fact) -> float | None:
    """When the fact's value (or one of its fields) was sealed, the earliest; None if
    nothing is sealed (no `_sealed` key).

    A seal without a valid `_sealed_at` is -inf, due at once: its deadline cannot be
    shown not to have passed (the same rule as `reference.crypto.needs_anonymising`).
    """
    return value_sealed_at(fact.value)


def value_sealed_at(value: Mapping[str, Any]) -> float | None:
    """`sealed_at` of a fact holding `value`."""
    parts: list[Mapping[str, Any]] = [value]
    parts += [field for field in value.values() if isinstance(field, dict)]
    times = []
    for part in parts:
        if "_sealed" in part:
            stamp = part.get("_sealed_at")
            if isinstance(stamp, int | float) and not isinstance(stamp, bool):
                times.append(float(stamp) if math.isfinite(stamp) else -math.inf)
            else:
                times.append(-math.inf)
    return min(times, default=None)


# ---------------------------------------------------------------------- the due index
@dataclass(frozen=True, slots=True)
class DueRule:
    """What of a strategy decides when a record falls due for a sweep, besides its
    `expires_at`: the archival grace period and the anonymisation deadline."""

    archive_grace_s: float | None = None
    anonymise_after_s: float | None = None


def due_rule(strategy: Strategy) -> DueRule:
    """The strategy's `DueRule`."""
    pii = strategy.pii
    return DueRule(
        archive_grace_s=None if strategy.archival is None else strategy.archival.delete_after_s,
        anonymise_after_s=None if pii is None else pii.anonymise_after_s,
    )


def next_due_at(record: Memory, rule: DueRule) -> float | None:
    """The first moment a sweep may decide something about `record` by its own fields
    (None: never): its expiry, the end of an archived fact's grace period, its
    anonymisation deadline. An STM record that is not active is due at once (its
    archival time depends on its user). Two things are not in it, because they are not
    the record's: a user's inactivity (archival: the engine asks the store which users
    became inactive) and the oracle's advice (`OracleAdvice.due`).

    A sweep at `now` decides nothing about a record whose `next_due_at` is after `now`
    and whose user did not become inactive, unless the oracle deletes it: that is what
    lets a sweep visit only what is due (`select_for_forgetting` still decides).
    """
    if record.status is Status.DELETED:
        return None
    moments: list[float] = []
    if record.expires_at is not None:
        moments.append(record.expires_at)
    if isinstance(record, Fact):
        if record.status is Status.ARCHIVED and rule.archive_grace_s is not None:
            moments.append(record.updated_at + rule.archive_grace_s)
        if rule.anonymise_after_s is not None:
            sealed = sealed_at(record)
            if sealed is not None:
                moments.append(sealed + rule.anonymise_after_s)
    elif record.status is not Status.ACTIVE:
        moments.append(-math.inf)
    return min(moments, default=None)

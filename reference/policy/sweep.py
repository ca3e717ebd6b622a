"""Pure forgetting decisions: from a strategy, records, events and a time to what to do.

Nothing here reads a store or a clock; the caller passes `now`. The engine that applies
the decisions calls, per layer (STM `MemoryRecord`, LTM `Fact`):

- on write: `expires_at_on_write` -> the `expires_at` to store with the new value;
- on an access that touches (a turn's retrieval, not a probe): `on_access` -> the new
  `expires_at` and `importance` to store with `last_accessed_at=now`;
- on a business event: `invalidations_for` -> archive/delete decisions;
- on a sweep, batch by batch (`strategy.sweep_batch_size`): `select_for_forgetting`;
- on retrieval: `rerank` (over-fetch, e.g. 3k by similarity, then rerank to k).

The stores already hide what is past `expires_at` (lazy expiry); sweeps reclaim it.
Under an importance rule a record's `importance` is its score as of `last_accessed_at`
(`importance.decayed_score` gives the score at any later time).
Time rules combine by the earliest deadline: a TTL (from the write), a sliding window
and the importance rule (from the last access) each give one, and the first one wins.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, TypeVar

from reference.clock import format_ts
from reference.dueindex import DueIndex
from reference.errors import InvalidInput
from reference.models import Category, Event, Fact, Hit, MemoryRecord, MemoryType, Status
from reference.policy.importance import expiry_delay, score_after_access
from reference.policy.strategy import (
    DAY_S,
    ArchivalRule,
    DecayRule,
    EventRule,
    Layer,
    Strategy,
)
from reference.records import fast_init
from reference.validation import check_k, check_timestamp

Memory = MemoryRecord | Fact
R = TypeVar("R", MemoryRecord, Fact)


class Action(StrEnum):
    """What a decision asks the engine to do with one record or fact."""

    EXPIRE = "expire"  # past expires_at: remove it (the stores already hide it)
    ARCHIVE = "archive"  # keep it for audit, never return it again
    ANONYMISE = "anonymise"  # replace the sealed PII value; the fact itself stays
    DELETE = "delete"  # hard delete: grace period over, an invalidation, the oracle


@fast_init
@dataclass(frozen=True, slots=True)
class Decision:
    """One action on one record (`layer="stm"`) or fact (`layer="ltm"`, id = fact_id)."""

    layer: Layer
    user_id: str
    record_id: str
    action: Action
    reason: str


@dataclass(frozen=True, slots=True)
class AccessUpdate:
    """What to store with an accessed record besides last_accessed_at and access_count."""

    expires_at: float | None
    importance: float


class OracleAdvice:
    """The harness's knowledge of the script: until when a future probe needs a memory.

    Under a strategy with `oracle: true`, a sweep at `now` deletes each live record or fact
    that no probe at or after `now` needs, and keeps the others (nothing expires by time).
    Per memory (an STM record id, or an LTM fact id: its current version), the advice
    holds one moment, `needed_until`: the time of the last probe that needs it (None:
    none does). `needed_until(memory)` computes it for a memory the advice has not been
    told about; the harness tells it with `note` once it knows what a record carries
    (after the write), so a sweep asks nothing per record: `due(now)` lists the memories
    whose moment has passed, from a heap. Run sweeps at least as often as probes.
    """

    def __init__(self, needed_until: Callable[[Memory], float | None]) -> None:
        self._compute = needed_until
        self._until: dict[tuple[Layer, str], float] = {}
        self._owner: dict[tuple[Layer, str], str] = {}
        self._index: dict[Layer, DueIndex] = {"stm": DueIndex(), "ltm": DueIndex()}

    def note(self, memory: Memory, needed_until: float | None = None) -> None:
        """Record until when `memory` is needed (None: not needed at all). Called on
        every write of a record or fact version by the engine (with the moment computed
        by `needed_until(memory)`), and again by a harness that knows better."""
        layer, ident = _ident(memory)
        until = -math.inf if needed_until is None else float(needed_until)
        self._until[(layer, ident)] = until
        self._owner[(layer, ident)] = memory.user_id
        # Due once a sweep's `now` is past the last needing probe: the next float after it.
        self._index[layer].set(ident, math.nextafter(until, math.inf))

    def written(self, memory: Memory) -> None:
        """A memory was written (a new record, or a new version of a fact)."""
        self.note(memory, self._compute(memory))

    def needed(self, memory: Memory, now: float) -> bool:
        """Whether a probe at or after `now` needs `memory`."""
        until = self._until.get(_ident(memory))
        if until is None:  # not told yet: learn it now
            self.written(memory)
            until = self._until[_ident(memory)]
        return now <= until

    def due(self, now: float) -> list[tuple[Layer, str, str]]:
        """(layer, user_id, id) of the memories no probe at or after `now` needs, in
        the order they fell due; it changes nothing."""
        return [
            (layer, self._owner[(layer, ident)], ident)
            for layer, index in self._index.items()
            for ident in index.due(now)
        ]

    def earliest(self) -> float:
        """The earliest moment `due` lists anything (inf: never, as things stand)."""
        return min(index.first() for index in self._index.values())

    def drop(self, layer: Layer, ident: str) -> None:
        """Forget a memory that is gone from its layer."""
        self._until.pop((layer, ident), None)
        self._owner.pop((layer, ident), None)
        self._index[layer].discard(ident)


# ---------------------------------------------------------------------- write and access
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
    `access_boost` and grants a new TTL from `now`; a fixed TTL still counts from the
    write. A record that is no longer live stays as it is: access never resurrects.
    """
    now = check_timestamp("now", now)
    if not record.is_live(now):
        return AccessUpdate(expires_at=record.expires_at, importance=record.importance)
    score = record.importance
    if strategy.importance is not None:
        score = score_after_access(strategy.importance, score, now - record.last_accessed_at)
    kind = record.category if isinstance(record, Fact) else record.type
    deadline = _deadline(
        strategy, kind, written_at=_written_at(record), last_access=now, score=score
    )
    return AccessUpdate(expires_at=deadline, importance=score)


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
    if strategy.sliding is not None:
        deadlines.append(last_access + strategy.sliding.window_s)
    if strategy.importance is not None:
        deadlines.append(last_access + expiry_delay(strategy.importance, score))
    return min(deadlines, default=None)


def expiry_rule(strategy: Strategy, record: Memory) -> str:
    """The time rule whose deadline is the record's `expires_at`, named as in the
    strategy's YAML: `ttl.by_category.episode`, `ttl.by_type.preference`,
    `ttl.default_s`, `sliding.window_s` or `importance` (the closest, when access times
    were recorded after the deadline was set); `expires_at` when no rule applies."""
    if record.expires_at is None:
        return "expires_at"
    kind = record.category if isinstance(record, Fact) else record.type
    candidates: list[tuple[float, str]] = []
    if strategy.ttl is not None:
        ttl = strategy.ttl.ttl_for(kind)
        if ttl is not None:
            candidates.append((_written_at(record) + ttl, strategy.ttl.rule_for(kind)))
    if strategy.sliding is not None:
        candidates.append((record.last_accessed_at + strategy.sliding.window_s, "sliding.window_s"))
    if strategy.importance is not None:
        delay = expiry_delay(strategy.importance, record.importance)
        candidates.append((record.last_accessed_at + delay, "importance"))
    expires_at = record.expires_at
    return min(candidates, key=lambda c: abs(c[0] - expires_at), default=(0.0, "expires_at"))[1]


def _check_kind(kind: object) -> None:
    if not isinstance(kind, Category | MemoryType):
        raise InvalidInput("kind", f"must be a MemoryType or a Category, got {kind!r}")


def _written_at(record: Memory) -> float:
    # A fact's current value was written at its last update (an upsert supersedes).
    return record.updated_at if isinstance(record, Fact) else record.created_at


def _ident(record: Memory) -> tuple[Layer, str]:
    if isinstance(record, Fact):
        return "ltm", record.fact_id
    return "stm", record.record_id


def _decision(record: Memory, action: Action, reason: str) -> Decision:
    layer, record_id = _ident(record)
    return Decision(layer, record.user_id, record_id, action, reason)


# ---------------------------------------------------------------------- sweeps
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
        return [_decision(record, Action.EXPIRE, reason)]
    archival, user_seen = strategy.archival, last_active.get(record.user_id)
    found: list[Decision] = []
    if record.status is Status.ARCHIVED:
        if archival is not None:
            since = archived_since(record, user_seen, archival.inactive_s)
            if now >= since + archival.delete_after_s:
                reason = f"archived since {format_ts(since)}, grace period over"
                return [_decision(record, Action.DELETE, reason)]
    else:
        if strategy.oracle and oracle is not None and not oracle.needed(record, now):
            return [_decision(record, Action.DELETE, "oracle: no future probe needs it")]
        if (idle := _idle_since(archival, user_seen, now)) is not None:
            reason = f"user inactive since {format_ts(idle)}"
            found.append(_decision(record, Action.ARCHIVE, reason))
    pii = strategy.pii
    if pii is not None and pii.anonymise_after_s is not None and isinstance(record, Fact):
        sealed = sealed_at(record)
        if sealed is not None and now >= sealed + pii.anonymise_after_s:
            when = format_ts(sealed) if math.isfinite(sealed) else "an unknown time"
            reason = f"PII sealed at {when}, anonymisation deadline passed"
            found.append(_decision(record, Action.ANONYMISE, reason))
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
    parts: list[Mapping[str, Any]] = [fact.value]
    parts += [field for field in fact.value.values() if isinstance(field, dict)]
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


# ---------------------------------------------------------------------- events
def invalidations_for(
    event: Event, records: Iterable[MemoryRecord], facts: Iterable[Fact], *, strategy: Strategy
) -> list[Decision]:
    """What the strategy's rules for this event invalidate: STM records and LTM facts of
    the event's user written strictly before the event (see `EventRule`). An LTM
    episode is matched as the STM record it was consolidated from (`_episode_matches`).

    Idempotent for at-least-once delivery: archived memories are not archived again. A
    memory matched by several rules gets one decision, the strongest (delete > archive).
    """
    rules = [rule for rule in strategy.events if rule.event == event.name]
    if not rules:
        return []
    stm, ltm = list(records), list(facts)
    chosen: dict[tuple[Layer, str], Decision] = {}
    for index, rule in enumerate(rules):
        keys: set[str] | None = None
        if rule.keys_from is not None:
            keys = _payload_keys(event.payload.get(rule.keys_from))
            if not keys:
                continue
        if any(field not in event.payload for field in rule.match_on):
            continue
        candidates: list[Memory] = []
        if "stm" in rule.layers:
            candidates += [r for r in stm if _stm_matches(r, rule, event, keys)]
        if "ltm" in rule.layers:
            candidates += [f for f in ltm if _fact_matches(f, rule, event, keys)]
        action = Action(rule.action)
        reason = f"event {event.name} at {format_ts(event.at)} (rule {index})"
        for memory in candidates:
            ident = _ident(memory)
            if ident not in chosen or action is Action.DELETE:
                chosen[ident] = _decision(memory, action, reason)
    return list(chosen.values())


def _in_scope(memory: Memory, rule: EventRule, event: Event) -> bool:
    if memory.user_id != event.user_id or memory.status is Status.DELETED:
        return False
    if memory.status is Status.ARCHIVED and rule.action == "archive":
        return False
    return _said_at(memory) < event.at


def _said_at(memory: Memory) -> float:
    # An episode was written when its session was consolidated, but said before that.
    if isinstance(memory, Fact) and memory.category is Category.EPISODE:
        said = memory.value.get("said_at")
        if isinstance(said, int | float) and not isinstance(said, bool):
            return float(said)
    return _written_at(memory)


def _stm_matches(
    record: MemoryRecord, rule: EventRule, event: Event, keys: set[str] | None
) -> bool:
    if not _in_scope(record, rule, event):
        return False
    if rule.types is not None and record.type not in rule.types:
        return False
    if keys is not None and _norm_key(record.metadata.get(rule.topic_field)) not in keys:
        return False
    return all(_same(record.metadata.get(f), event.payload[f]) for f in rule.match_on)


def _fact_matches(fact: Fact, rule: EventRule, event: Event, keys: set[str] | None) -> bool:
    if not _in_scope(fact, rule, event):
        return False
    if fact.category is Category.EPISODE:
        return _episode_matches(fact, rule, event, keys)
    if rule.categories is not None and fact.category not in rule.categories:
        return False
    if keys is not None and _norm_key(fact.key) not in keys:
        return False
    return all(_same(fact.value.get(f), event.payload[f]) for f in rule.match_on)


def _episode_matches(fact: Fact, rule: EventRule, event: Event, keys: set[str] | None) -> bool:
    # An episode is an STM record consolidated into LTM: in scope where the rule reaches
    # that record in STM (`types` by its `kind`) or names episodes in LTM (no
    # `categories`, or `episode` among them); then matched as the record (keys by its
    # `topic`, `match_on` by its metadata: all kept in the episode's value).
    kind = fact.value.get("kind")
    in_stm = "stm" in rule.layers and (rule.types is None or kind in rule.types)
    in_ltm = "ltm" in rule.layers and (
        rule.categories is None or Category.EPISODE in rule.categories
    )
    if not (in_stm or in_ltm):
        return False
    if keys is not None and _norm_key(fact.value.get(rule.topic_field)) not in keys:
        return False
    return all(_same(fact.value.get(f), event.payload[f]) for f in rule.match_on)


def _payload_keys(value: object) -> set[str]:
    items = value if isinstance(value, list | tuple) else [value]
    return {key for item in items if (key := _norm_key(item)) is not None}


def _norm_key(value: object) -> str | None:
    # Keys compare case- and space-insensitively ("Address" in a payload is "address").
    if isinstance(value, str) and value.strip():
        return value.strip().casefold()
    return None


def _same(stored: object, wanted: object) -> bool:
    # Ids travel as strings in one system and as integers in another: "123" == 123.
    if stored is None or wanted is None or isinstance(stored, bool) or isinstance(wanted, bool):
        return stored is not None and stored == wanted
    if isinstance(stored, int | float) and isinstance(wanted, int | float):
        return float(stored) == float(wanted)
    return str(stored) == str(wanted)


# ---------------------------------------------------------------------- ranking
def rerank(hits: Sequence[Hit[R]], *, strategy: Strategy, now: float, k: int) -> list[Hit[R]]:
    """The top `k` hits after recency decay; without a decay rule, `hits[:k]` unchanged.

    A hit's score becomes similarity * exp(-lambda * age_days) (a negative similarity is
    divided instead, so age never helps). Ties keep the input order.
    """
    check_k("k", k)
    now = check_timestamp("now", now)
    rule = strategy.decay
    if rule is None:
        return list(hits[:k])
    decayed = []
    for hit in hits:
        factor = recency_factor(rule, hit.record, now)
        if hit.score >= 0:
            score = hit.score * factor
        else:
            score = hit.score / factor if factor > 0 else -math.inf
        decayed.append(Hit(record=hit.record, score=score))
    decayed.sort(key=lambda hit: -hit.score)  # stable: ties keep the store's order
    return decayed[:k]


def recency_factor(rule: DecayRule, record: Memory, now: float) -> float:
    """exp(-lambda * age_days), the age from the write or the last access (`age_from`)."""
    since = record.last_accessed_at if rule.age_from == "last_access" else _written_at(record)
    age_days = max(0.0, now - since) / DAY_S
    return math.exp(-rule.lambda_per_day * age_days)

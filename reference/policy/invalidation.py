"""Event invalidation: what a business event makes stale, by the strategy's event rules."""

from __future__ import annotations

from collections.abc import Iterable

from reference.clock import format_ts
from reference.models import Category, Event, Fact, MemoryRecord, Status
from reference.policy.decisions import (
    Action,
    Decision,
    Memory,
    decision_for,
    memory_ident,
    written_at,
)
from reference.policy.field_keys import KeySelector
from reference.policy.rules import EventRule, Layer
from reference.policy.strategy import Strategy


def invalidations_for(
    event: Event, records: Iterable[MemoryRecord], facts: Iterable[Fact], *, strategy: Strategy
) -> list[Decision]:
    """What the strategy's rules for this event invalidate: STM records and LTM facts of
    the event's user written strictly before the event (see `EventRule`). An LTM
    episode is matched as the STM record it was consolidated from (`_episode_matches`).

    Keys select by family (`reference.policy.field_keys`): `address` in the payload
    selects every qualified address (`delivery_address`, `work_address`, ...),
    `delivery_address` or 收货地址 that one only.

    Idempotent for at-least-once delivery: archived memories are not archived again. A
    memory matched by several rules gets one decision, the strongest (delete > archive).
    """
    rules = [rule for rule in strategy.events if rule.event == event.name]
    if not rules:
        return []
    stm, ltm = list(records), list(facts)
    chosen: dict[tuple[Layer, str], Decision] = {}
    for index, rule in enumerate(rules):
        keys: KeySelector | None = None
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
            ident = memory_ident(memory)
            if ident not in chosen or action is Action.DELETE:
                chosen[ident] = decision_for(memory, action, reason)
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
    return written_at(memory)


def _stm_matches(
    record: MemoryRecord, rule: EventRule, event: Event, keys: KeySelector | None
) -> bool:
    if not _in_scope(record, rule, event):
        return False
    if rule.types is not None and record.type not in rule.types:
        return False
    if keys is not None and not keys.matches(record.metadata.get(rule.topic_field)):
        return False
    return all(_same(record.metadata.get(f), event.payload[f]) for f in rule.match_on)


def _fact_matches(fact: Fact, rule: EventRule, event: Event, keys: KeySelector | None) -> bool:
    if not _in_scope(fact, rule, event):
        return False
    if fact.category is Category.EPISODE:
        return _episode_matches(fact, rule, event, keys)
    if rule.categories is not None and fact.category not in rule.categories:
        return False
    if keys is not None and not keys.matches(fact.key):
        return False
    return all(_same(fact.value.get(f), event.payload[f]) for f in rule.match_on)


def _episode_matches(fact: Fact, rule: EventRule, event: Event, keys: KeySelector | None) -> bool:
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
    if keys is not None and not keys.matches(fact.value.get(rule.topic_field)):
        return False
    return all(_same(fact.value.get(f), event.payload[f]) for f in rule.match_on)


def _payload_keys(value: object) -> KeySelector:
    # Keys compare case- and space-insensitively ("Address" in a payload is "address").
    items = value if isinstance(value, list | tuple) else [value]
    return KeySelector.of([item for item in items if isinstance(item, str) and item.strip()])


def _same(stored: object, wanted: object) -> bool:
    # Ids travel as strings in one system and as integers in another: "123" == 123.
    if stored is None or wanted is None or isinstance(stored, bool) or isinstance(wanted, bool):
        return stored is not None and stored == wanted
    if isinstance(stored, int | float) and isinstance(wanted, int | float):
        return float(stored) == float(wanted)
    return str(stored) == str(wanted)

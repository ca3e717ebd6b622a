"""The harness's mirror of a system under test: each of its memories as a reference
`MemoryRecord`, in the reference's own in-memory stores, governed by the reference's
`ForgettingEngine` under a one-layer version of the strategy.

A system under test has one layer (a store of memories, searched per user); the
reference has two, and a strategy's rules name them. `one_layer` rewrites a strategy for
one layer, so the same pure policy decides for a peer's memories what it decides for
the reference's:

- a memory's kind is its long-term form's (`peer_kind`): the category of the fact it
  states (the LTM rule for that category), `sensitive` when the reference would type it
  so (a peer keeps the raw text; it cannot seal), else `episode` under `promotion:
  consolidate` (what the reference keeps of an ended session), else its STM type;
- `ttl.by_category` entries become `by_type` entries of the same name (every category is
  a memory type of that name), so a fact-stating memory lives as the LTM fact would;
- rules restricted to one layer (`layers: [ltm]`, an event rule's `categories`) cover
  the same kinds on the single layer;
- no consolidation (nothing to move between layers), no PII sealing (a peer stores what
  it is given), no lexical retrieval (the peer searches its own way);
- under native expiry, no time rules at all: the system's own TTL (from `ttl_for_peer`)
  expires its memories; the mirror keeps them until the system no longer holds them.

What the engine then does to a mirror record (expire, archive, delete, a forget command,
an event) the replay applies to the system by `delete` (`peer_replay.py`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from reference.clock import VirtualClock
from reference.factory import build_memory_system
from reference.keys import Namespace
from reference.models import MemoryType
from reference.policy.expiry import expires_at_on_write
from reference.policy.intent import RuleIntentFilter
from reference.policy.memory_types import memory_type
from reference.policy.oracle import OracleAdvice
from reference.policy.strategy import Strategy, validate_strategy
from reference.promotion import DEFAULT_IMPORTANCE, extract_fact
from reference.settings import Settings
from reference.system import MemorySystem
from reference.text_interfaces import Embedder

_TIME_RULES = ("ttl", "sliding", "importance")


def one_layer(strategy: Strategy, *, native_expiry: bool) -> Strategy:
    """The strategy as it applies to a one-layer system (module docstring)."""
    data: dict[str, Any] = strategy.model_dump(mode="json")
    ttl = data.get("ttl")
    if ttl is not None:
        by_type = dict(ttl.get("by_type") or {})
        for category, seconds in (ttl.get("by_category") or {}).items():
            by_type[category] = seconds
        by_type.pop("session", None)
        ttl["by_type"], ttl["by_category"] = by_type, {}
    for name in ("sliding", "importance", "decay"):
        rule = data.get(name)
        if rule is not None:
            rule["layers"] = ["ltm", "stm"]
    events = []
    for rule in data.get("events") or []:
        layers = rule.get("layers") or ["ltm", "stm"]
        kinds: set[str] | None = set()
        if "stm" in layers:
            kinds = None if rule.get("types") is None else set(rule["types"])
        if "ltm" in layers and kinds is not None:
            categories = rule.get("categories")
            kinds = None if categories is None else kinds | set(categories)
        events.append(
            {
                **rule,
                "layers": ["stm"],
                "types": sorted(kinds) if kinds else None,
                "categories": None,
            }
        )
    data["events"] = events
    data.update(promotion="rules", consolidation=None, pii=None, retrieval=None)
    if native_expiry:
        for name in _TIME_RULES:
            data[name] = None
    return validate_strategy(data, source=f"{strategy.name} (one layer)")


def peer_kind(
    text: str, strategy: Strategy, *, disclosed: Sequence[str] = ()
) -> tuple[MemoryType, float, dict[str, str]]:
    """A peer memory's kind, importance and tags (`topic`, `category`: what events and
    forget commands match), from the reference's pure classifiers on the masked text
    (`disclosed`: the PII detector's kinds in the raw text, as the reference's turn)."""
    decision = RuleIntentFilter().classify(text)
    intent = decision.kind or MemoryType.CONVERSATION
    candidate = extract_fact(text, decision.kind) if decision.keep else None
    category = None if candidate is None else candidate.category
    stm_type = memory_type(text, intent, category=category, disclosed=disclosed)
    tags: dict[str, str] = {}
    if candidate is not None:
        tags = {"topic": candidate.key, "category": candidate.category.value}
    importance = DEFAULT_IMPORTANCE if candidate is None else candidate.importance
    if stm_type is MemoryType.SENSITIVE:
        return stm_type, importance, tags
    if candidate is not None:
        return MemoryType(candidate.category.value), importance, tags
    if strategy.consolidates:
        return MemoryType.EPISODE, importance, tags
    return stm_type, importance, tags


def ttl_for_peer(
    strategy: Strategy, kind: MemoryType, importance: float, now: float, granularity_s: float
) -> float | None:
    """The time to live a system with native expiry gets for a new memory: the one-layer
    strategy's deadline on write, as it is (None: keep). The adapter rounds it the way its
    system does (LangGraph: up to whole minutes; mem0: to the UTC date), so rounding here
    too would make expiry late twice. A deadline already past gets the shortest TTL the
    system can express."""
    deadline = expires_at_on_write(strategy, kind=kind, importance=importance, now=now)
    if deadline is None:
        return None
    ttl = deadline - now
    return ttl if ttl > 0 else granularity_s


def build_mirror(
    settings: Settings,
    *,
    strategy: Strategy,
    clock: VirtualClock,
    embedder: Embedder,
    namespace: Namespace,
    oracle: OracleAdvice | None,
) -> MemorySystem:
    """The mirror: the reference's in-memory stores and engine under `strategy` (already
    `one_layer`); only its STM holds records (one per peer memory)."""
    memory = settings.model_copy(update={"backend": "memory"})
    return build_memory_system(
        memory,
        clock=clock,
        embedder=embedder,
        namespace=namespace,
        strategy=strategy,
        oracle=oracle,
    )

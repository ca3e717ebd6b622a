"""What a strategy's rules can reach: the rules that match nothing the reference stores.

A strategy file is valid when its fields are (`strategy.py`); it can still say things
that do nothing. What the reference stores, per layer:

- STM: an utterance the intent filter kept, typed `instruction`, `preference`,
  `profile`, `fact`, `entity`, `knowledge` or `sensitive` (`memory_types.py`). The
  rule-based filter names the kind of every utterance it keeps, so no record is ever
  `conversation`; chit-chat is dropped before anything is stored, so no rule reaches it.
- LTM: facts under the categories `preference`, `profile`, `fact`, `entity`,
  `knowledge`, and `episode` only when the strategy consolidates (`promotion:
  consolidate`). An `instruction` or `sensitive` utterance is never an LTM category.
- session: only its lifetime, `ttl.by_type.session`.

`unreachable` lists, for each rule, the types or layers it names that it can never
match there, as lines a person reads (`memharness strategies check`, and a warning when a
run or `strategies show` loads a strategy file).
"""

from __future__ import annotations

from collections.abc import Iterable

from reference.models import MemoryType
from reference.policy.rules import EventRule, ScopedRule
from reference.policy.strategy import Strategy

__all__ = ["STM_TYPES", "ltm_types", "unreachable"]

#: The STM record types the reference writes.
STM_TYPES = frozenset(
    {
        MemoryType.INSTRUCTION,
        MemoryType.PREFERENCE,
        MemoryType.PROFILE,
        MemoryType.FACT,
        MemoryType.ENTITY,
        MemoryType.KNOWLEDGE,
        MemoryType.SENSITIVE,
    }
)
_LTM_ALWAYS = frozenset(
    {
        MemoryType.PREFERENCE,
        MemoryType.PROFILE,
        MemoryType.FACT,
        MemoryType.ENTITY,
        MemoryType.KNOWLEDGE,
    }
)


def ltm_types(strategy: Strategy) -> frozenset[MemoryType]:
    """The LTM categories (as memory types) this strategy's store can hold."""
    return _LTM_ALWAYS | ({MemoryType.EPISODE} if strategy.consolidates else set())


def _why_never(kind: MemoryType, layers: Iterable[str], strategy: Strategy) -> str:
    """Why `kind` is in none of `layers`."""
    if kind is MemoryType.CONVERSATION:
        return (
            "the reference never stores a `conversation` record: its intent filter names "
            "the kind of every utterance it keeps, and chit-chat is dropped, never stored"
        )
    if kind is MemoryType.EPISODE and not strategy.consolidates:
        return "episodes exist only with promotion: consolidate"
    where = " or ".join(sorted(layers)).upper()
    return f"{kind.value} is never stored in {where}"


def _scoped(name: str, rule: ScopedRule, strategy: Strategy) -> list[str]:
    reach = {"stm": STM_TYPES, "ltm": ltm_types(strategy)}
    types = rule.types if rule.types is not None else tuple(MemoryType)
    lines = []
    for kind in types:
        if kind is MemoryType.SESSION:
            continue
        if rule.types is not None and not any(kind in reach[layer] for layer in rule.layers):
            lines.append(f"{name}.types: {kind.value} matches nothing: " +
                         _why_never(kind, rule.layers, strategy))  # fmt: skip
    return lines


def _event(index: int, rule: EventRule, strategy: Strategy) -> list[str]:
    name = f"events[{index}] ({rule.event})"
    lines = []
    if rule.types is not None and "stm" in rule.layers:
        for kind in rule.types:
            if kind not in STM_TYPES:
                lines.append(f"{name}.types: {kind.value} matches nothing: " +
                             _why_never(kind, ["stm"], strategy))  # fmt: skip
    elif rule.types is not None:
        lines.append(f"{name}.types applies to STM records only, and layers has no stm")
    if rule.categories is not None:
        if "ltm" not in rule.layers:
            lines.append(f"{name}.categories applies to LTM facts only, and layers has no ltm")
        elif "episode" in rule.categories and not strategy.consolidates:
            lines.append(f"{name}.categories: episode matches nothing: " +
                         _why_never(MemoryType.EPISODE, ["ltm"], strategy))  # fmt: skip
    return lines


def unreachable(strategy: Strategy) -> list[str]:
    """Each rule, or part of one, that can never match anything the reference stores."""
    lines: list[str] = []
    if strategy.ttl is not None:
        reach = STM_TYPES | ltm_types(strategy) | {MemoryType.SESSION}
        for kind in strategy.ttl.by_type:
            if kind not in reach:
                lines.append(f"ttl.by_type.{kind.value} matches nothing: " +
                             _why_never(kind, ["stm", "ltm"], strategy))  # fmt: skip
        for category in strategy.ttl.by_category:
            kind = MemoryType(category.value)
            if kind not in ltm_types(strategy):
                lines.append(f"ttl.by_category.{kind.value} matches nothing: " +
                             _why_never(kind, ["ltm"], strategy))  # fmt: skip
    for name in ("sliding", "importance", "decay"):
        rule = getattr(strategy, name)
        if rule is not None:
            lines += _scoped(name, rule, strategy)
    for index, event in enumerate(strategy.events):
        lines += _event(index, event, strategy)
    return lines

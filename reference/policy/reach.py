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

A system under test (`run --system`) stores every utterance, chit-chat included; the
harness's mirror of it types a memory that states nothing `conversation` unless the
strategy consolidates (then it is an `episode`; `memharness/sim/peer_mirror.py`). So a
`conversation` rule of a strategy without consolidation matches nothing in the reference
but does govern a system under test's chit-chat.

`findings` lists, for each rule, the types or layers it names that it can never match in
the reference, as lines a person reads, each marked when a system under test's memories
still follow it (`memharness strategies check`, and a warning when a run or `strategies
show` loads a strategy file).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from reference.models import MemoryType
from reference.policy.rules import EventRule, ScopedRule
from reference.policy.strategy import Strategy

__all__ = ["STM_TYPES", "Finding", "findings", "ltm_types", "unreachable"]

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
_PEERS_FOLLOW = (
    "it governs a system under test's chit-chat (run --system), which the harness types "
    "`conversation` when the strategy does not consolidate"
)


class Finding(NamedTuple):
    """A rule, or part of one, that matches nothing the reference stores."""

    line: str
    #: True when a system under test's memories still follow it (module docstring).
    peers_follow: bool


def ltm_types(strategy: Strategy) -> frozenset[MemoryType]:
    """The LTM categories (as memory types) this strategy's store can hold."""
    return _LTM_ALWAYS | ({MemoryType.EPISODE} if strategy.consolidates else set())


def _never(name: str, kind: MemoryType, layers: Iterable[str], strategy: Strategy) -> Finding:
    """`name` names `kind`, which is in none of `layers`: why."""
    head = f"{name}{kind.value} matches nothing"
    if kind is MemoryType.CONVERSATION:
        why = (
            "never stores a `conversation` record: its intent filter names the kind of "
            "every utterance it keeps, and chit-chat is dropped, never stored"
        )
        if not strategy.consolidates:
            return Finding(f"{head} in the reference (it {why}); {_PEERS_FOLLOW}", True)
        return Finding(f"{head}: the reference {why}", False)
    if kind is MemoryType.EPISODE and not strategy.consolidates:
        return Finding(f"{head}: episodes exist only with promotion: consolidate", False)
    where = " or ".join(sorted(layers)).upper()
    return Finding(f"{head}: {kind.value} is never stored in {where}", False)


def _scoped(name: str, rule: ScopedRule, strategy: Strategy) -> list[Finding]:
    reach = {"stm": STM_TYPES, "ltm": ltm_types(strategy)}
    found = []
    for kind in rule.types or ():
        reached = any(kind in reach[layer] for layer in rule.layers)
        if kind is not MemoryType.SESSION and not reached:
            found.append(_never(f"{name}.types: ", kind, rule.layers, strategy))
    return found


def _event(index: int, rule: EventRule, strategy: Strategy) -> list[Finding]:
    name = f"events[{index}] ({rule.event})"
    found = []
    if rule.types is not None and "stm" in rule.layers:
        for kind in rule.types:
            if kind not in STM_TYPES:
                found.append(_never(f"{name}.types: ", kind, ["stm"], strategy))
    elif rule.types is not None:
        line = f"{name}.types applies to STM records only, and layers has no stm"
        found.append(Finding(line, False))
    if rule.categories is not None:
        if "ltm" not in rule.layers:
            line = f"{name}.categories applies to LTM facts only, and layers has no ltm"
            found.append(Finding(line, False))
        elif "episode" in rule.categories and not strategy.consolidates:
            found.append(_never(f"{name}.categories: ", MemoryType.EPISODE, ["ltm"], strategy))
    return found


def findings(strategy: Strategy) -> list[Finding]:
    """Each rule, or part of one, that can never match anything the reference stores."""
    found: list[Finding] = []
    if strategy.ttl is not None:
        reach = STM_TYPES | ltm_types(strategy) | {MemoryType.SESSION}
        for kind in strategy.ttl.by_type:
            if kind not in reach:
                found.append(_never("ttl.by_type.", kind, ["stm", "ltm"], strategy))
        for category in strategy.ttl.by_category:
            kind = MemoryType(category.value)
            if kind not in ltm_types(strategy):
                found.append(_never("ttl.by_category.", kind, ["ltm"], strategy))
    for name in ("sliding", "importance", "decay"):
        rule = getattr(strategy, name)
        if rule is not None:
            found += _scoped(name, rule, strategy)
    for index, event in enumerate(strategy.events):
        found += _event(index, event, strategy)
    return found


def unreachable(strategy: Strategy) -> list[str]:
    """The lines of `findings`, for a warning."""
    return [finding.line for finding in findings(strategy)]

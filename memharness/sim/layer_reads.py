"""What a replay reads back from the layers, never changing them: whether a memory is
still live, whether a statement's personal values are still recoverable, and the
footprint of each layer.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from memharness.sim.tally import ShardResult
from reference.crypto import SEALED, is_sealed
from reference.ltm.filters import LtmFilter
from reference.models import Category, Fact
from reference.policy.decisions import Memory
from reference.system import MemorySystem

StmRef = tuple[str, str]  # ("stm", record_id)
LtmRef = tuple[str, str, str, str, int]  # ("ltm", category, key, fact_id, version)
Ref = StmRef | LtmRef


@dataclass
class PiiItem:
    """A statement the script marks as carrying PII, followed until no layer holds its
    values in a recoverable form."""

    user_id: str
    said_at: float
    values: tuple[str, ...]  # the personal values as said
    refs: list[Ref]  # the memories made from the statement
    raw_open: bool = True  # a layer may still show a value in plaintext
    sealed_open: bool = False  # a layer holds a value sealed (recoverable with the key)
    ever_sealed: bool = False


def live(system: MemorySystem, user_id: str, ref: Ref) -> Memory | None:
    """The STM record or LTM fact version `ref` names, if still live in its layer."""
    if ref[0] == "stm":
        return system.stm.get(user_id=user_id, record_id=ref[1])
    _, category, key, fact_id, version = ref  # type: ignore[misc]
    # A read-only listing: `ltm.get` would touch the fact (its access time, which
    # importance rules read): measuring must not move what it measures.
    flt = LtmFilter(
        user_id=user_id, categories=frozenset({Category(category)}), keys=frozenset({key})
    )
    for fact in system.ltm.facts(filter=flt):
        if (fact.fact_id, fact.version) == (fact_id, version):
            return fact
    return None


def resolved(system: MemorySystem, result: ShardResult, item: PiiItem, at: float) -> bool:
    """Whether no layer holds the item's values in a recoverable form any more; the
    times go into `result` as the copies go. Raw: in plaintext, in an STM or LTM text or
    an LTM value as stored. Sealed: only in a sealed LTM value's encrypted original
    (`reference.crypto`), until it is anonymised or deleted."""
    raw = sealed = False
    for ref in item.refs:
        memory = live(system, item.user_id, ref)
        if memory is None:
            continue
        raw = raw or shows(memory.text, item.values)
        if isinstance(memory, Fact):
            stored = {k: v for k, v in memory.value.items() if k != SEALED}
            raw = raw or shows(json.dumps(stored, ensure_ascii=False), item.values)
            if is_sealed(memory.value):
                original = json.dumps(system.reveal(memory), ensure_ascii=False)
                sealed = sealed or shows(original, item.values)
    if item.raw_open and not raw:
        item.raw_open = False
        result.pii_raw_s.append(at - item.said_at)
    if sealed:
        item.sealed_open = item.ever_sealed = True
    elif item.sealed_open:
        item.sealed_open = False
        result.pii_sealed_s.append(at - item.said_at)
    done = not item.raw_open and not item.sealed_open
    if done:
        result.pii_sealed_items += item.ever_sealed
    return done


def footprint(system: MemorySystem) -> dict[str, tuple[int, int]]:
    """Live records and their payload bytes per layer (`reference.footprint`), read
    from the stores' footprint (counters in memory), never by touching a record."""
    session, stm, ltm = system.session.usage(), system.stm.usage(), system.ltm.usage()
    return {
        "session": (session.records, session.bytes),
        "stm": (stm.records, stm.bytes),
        "ltm": (ltm.records, ltm.bytes),
    }


def shows(text: str, values: tuple[str, ...]) -> bool:
    """Whether any of `values` appears in `text`."""
    return any(value in text for value in values)

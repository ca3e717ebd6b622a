"""What a forgetting decision is: one action on one STM record or LTM fact."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from reference.models import Fact, MemoryRecord
from reference.policy.rules import Layer
from reference.records import fast_init

Memory = MemoryRecord | Fact


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
    #: The memory's type (an STM record's type, an LTM fact's category) and when its
    #: current value was written (`written_at`): what the monitoring counters read.
    kind: str = ""
    written: float = 0.0


def written_at(record: Memory) -> float:
    """When the record's current value was written: an STM record's creation, an LTM
    fact's last update (an upsert supersedes)."""
    return record.updated_at if isinstance(record, Fact) else record.created_at


def memory_ident(record: Memory) -> tuple[Layer, str]:
    """(layer, id) of a record (`"stm"`, record_id) or fact (`"ltm"`, fact_id)."""
    if isinstance(record, Fact):
        return "ltm", record.fact_id
    return "stm", record.record_id


def decision_for(record: Memory, action: Action, reason: str) -> Decision:
    """The decision to apply `action` to `record`."""
    layer, record_id = memory_ident(record)
    kind = record.category.value if isinstance(record, Fact) else record.type.value
    return Decision(layer, record.user_id, record_id, action, reason, kind, written_at(record))

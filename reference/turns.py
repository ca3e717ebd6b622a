"""What a turn and a recall return: the context assembled, and what each layer did."""

from __future__ import annotations

from dataclasses import dataclass, field

from reference.forgetting.plans import ForgetReport
from reference.models import Fact, Hit, MemoryRecord, SessionState
from reference.records import fast_init
from reference.stm.base import AddResult

#: Timing keys of a turn, in milliseconds. "stm" and "ltm" exclude the query embedding,
#: which is computed once per turn and reported as "embed".
TIMING_KEYS = ("session", "pii", "embed", "stm", "ltm", "promotion", "turn")


@fast_init
@dataclass(frozen=True, slots=True)
class Recall:
    """What retrieval returned for one query."""

    stm_hits: list[Hit[MemoryRecord]]
    ltm_hits: list[Hit[Fact]]


@fast_init
@dataclass(frozen=True, slots=True)
class TurnResult:
    """The context assembled for one user utterance, and what each layer did."""

    user_id: str
    session_id: str
    message_id: str
    at: float
    masked_text: str
    session: SessionState
    context_ids: list[str]
    stm: AddResult
    stm_hits: list[Hit[MemoryRecord]]
    ltm_hits: list[Hit[Fact]]
    promoted: Fact | None
    timings_ms: dict[str, float] = field(default_factory=dict)
    #: The forget command this utterance was, and what it removed (then nothing was
    #: stored or promoted); its time is inside timings_ms["turn"].
    forgotten: ForgetReport | None = None
    #: What the assistant should say about forgetting: the question before erasing
    #: everything, the confirmation, a cancellation (`reference.forgetting.dialogue`).
    reply: str | None = None
    #: What became of a "forget everything" confirmation in this turn: `asked`,
    #: `confirmed`, `refused`, `expired` or `dropped` (None: no confirmation involved).
    confirmation: str | None = None

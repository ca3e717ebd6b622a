"""`MemorySystem`: one turn through the four layers, with per-layer timings.

The turn follows DESIGN.md: session gateway, PII masking, intent filter into STM,
retrieval from STM (this session) and LTM (this user) with one query embedding,
promotion of stable facts to LTM. The forgetting engine will hook in after promotion.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np

from reference.clock import Clock, VirtualClock
from reference.errors import InvalidInput
from reference.ltm.base import LongTermStore
from reference.models import Fact, Hit, MemoryRecord, SessionState
from reference.promotion import extract_fact, should_promote
from reference.session.base import SessionStore
from reference.stm.base import AddResult, ShortTermStore, StmFilter
from reference.text import Embedder, PiiMasker
from reference.validation import check_id, check_k, check_text

#: Timing keys of a turn, in milliseconds. "stm" and "ltm" exclude the query embedding,
#: which is computed once per turn and reported as "embed".
TIMING_KEYS = ("session", "pii", "embed", "stm", "ltm", "promotion", "turn")


@dataclass(frozen=True, slots=True)
class Recall:
    """What retrieval returned for one query."""

    stm_hits: list[Hit[MemoryRecord]]
    ltm_hits: list[Hit[Fact]]


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


class MemorySystem:
    """The reference memory: session, short-term and long-term layers behind one facade."""

    def __init__(
        self,
        *,
        clock: Clock,
        session: SessionStore,
        stm: ShortTermStore,
        ltm: LongTermStore,
        embedder: Embedder,
        pii: PiiMasker,
        stm_k: int = 5,
        ltm_k: int = 5,
    ) -> None:
        self.clock = clock
        self.session = session
        self.stm = stm
        self.ltm = ltm
        self.embedder = embedder
        self.pii = pii
        self.stm_k = check_k("stm_k", stm_k)
        self.ltm_k = check_k("ltm_k", ltm_k)

    def turn(
        self,
        *,
        user_id: str,
        session_id: str,
        text: str,
        at: float | datetime | None = None,
        channel: str = "web",
    ) -> TurnResult:
        """Run one user utterance through every layer and return the assembled context.

        `at` moves a virtual clock forward to the utterance's time; with a wall clock it
        must be None. Retrieval runs before the utterance is stored, so the hits are what
        was known before it.
        """
        check_id("user_id", user_id)
        check_id("session_id", session_id)
        check_text("text", text)
        self._move_clock(at)
        timings: dict[str, float] = {}
        started = time.perf_counter()

        mark = time.perf_counter()
        state = self.session.get(user_id=user_id, session_id=session_id)
        if state is None:
            state = self.session.create(user_id=user_id, session_id=session_id, channel=channel)
        message_id = uuid.uuid4().hex
        window = self.session.append_message(
            user_id=user_id, session_id=session_id, message_id=message_id
        )
        timings["session"] = _ms_since(mark)

        mark = time.perf_counter()
        masked = self.pii.mask(text)
        timings["pii"] = _ms_since(mark)

        mark = time.perf_counter()
        vector = self.embedder.embed_one(masked)
        timings["embed"] = _ms_since(mark)

        mark = time.perf_counter()
        stm_hits = self.stm.query(
            user_id=user_id, session_id=session_id, embedding=vector, k=self.stm_k
        )
        said_before = any(hit.record.text == masked for hit in stm_hits)
        added = self.stm.add(user_id=user_id, session_id=session_id, text=masked, embedding=vector)
        timings["stm"] = _ms_since(mark)

        mark = time.perf_counter()
        ltm_hits = self.ltm.query(user_id=user_id, embedding=vector, k=self.ltm_k)
        timings["ltm"] = _ms_since(mark)

        mark = time.perf_counter()
        promoted = self._promote(user_id, masked, added, said_before, vector)
        timings["promotion"] = _ms_since(mark)
        timings["turn"] = _ms_since(started)

        return TurnResult(
            user_id=user_id,
            session_id=session_id,
            message_id=message_id,
            at=self.clock.now(),
            masked_text=masked,
            session=state,
            context_ids=window,
            stm=added,
            stm_hits=stm_hits,
            ltm_hits=ltm_hits,
            promoted=promoted,
            timings_ms=timings,
        )

    def recall(
        self, *, user_id: str, session_id: str, query: str, at: float | datetime | None = None
    ) -> Recall:
        """Retrieval only: what a probe sees. It changes nothing (no session update,
        nothing stored, no access counted), so measuring does not move the measured."""
        check_text("query", query)
        self._move_clock(at)
        vector = self.embedder.embed_one(self.pii.mask(query))
        return Recall(
            stm_hits=self.stm.query(
                user_id=user_id, session_id=session_id, embedding=vector, k=self.stm_k, touch=False
            ),
            ltm_hits=self.ltm.query(user_id=user_id, embedding=vector, k=self.ltm_k, touch=False),
        )

    def footprint(self) -> dict[str, int]:
        """Live records per layer in this namespace."""
        return {
            "session": self.session.count(),
            "stm": self.stm.count(),
            "ltm": self.ltm.count(),
        }

    def delete_user_data(self, *, user_id: str) -> dict[str, int]:
        """Remove every record of the user from every layer; returns counts per layer."""
        from reference.ltm.base import LtmFilter

        return {
            "session": self.session.delete_user(user_id=user_id),
            "stm": self.stm.delete(filter=StmFilter(user_id=user_id, include_dead=True)),
            "ltm": self.ltm.delete(filter=LtmFilter(user_id=user_id, include_dead=True)),
        }

    def dispose(self) -> None:
        """Release every layer's connections."""
        for store in (self.session, self.stm, self.ltm):
            store.dispose()

    # ------------------------------------------------------------------ internals
    def _move_clock(self, at: float | datetime | None) -> None:
        if at is None:
            return
        if not isinstance(self.clock, VirtualClock):
            raise InvalidInput(
                "at", "an explicit time needs a VirtualClock; the clock is the wall clock"
            )
        self.clock.set(at)

    def _promote(
        self, user_id: str, masked: str, added: AddResult, said_before: bool, vector: np.ndarray
    ) -> Fact | None:
        kind = added.intent.kind
        if not added.accepted or not should_promote(masked, kind, said_before=said_before):
            return None
        candidate = extract_fact(masked, kind)
        if candidate is None:
            return None
        value = {"value": candidate.value}
        current = self.ltm.get(user_id=user_id, category=candidate.category, key=candidate.key)
        if current is not None and current.value == value:
            return None  # restating a known fact is not a new version
        return self.ltm.upsert(
            user_id=user_id,
            category=candidate.category,
            key=candidate.key,
            value=value,
            text=masked,
            actor="promotion",
            embedding=vector,
        )


def _ms_since(mark: float) -> float:
    return (time.perf_counter() - mark) * 1000.0

"""`MemorySystem`: one turn through the four layers, with per-layer timings.

The turn follows DESIGN.md: session gateway, PII masking, intent filter into STM,
retrieval from STM (this session) and LTM (this user) with one query embedding,
promotion of stable facts to LTM. Under a strategy with `promotion: consolidate`, a
session's STM records also become LTM episodes once it ends (TTL, or `close_session`).

With a `ForgettingEngine` (`build_memory_system` always attaches one), the strategy
governs every step: new records get its deadlines, retrieval re-ranks and stores each
access, a forget command is carried out instead of being stored (`forgetting.dialogue`:
"forget everything" may first ask for confirmation), PII in promoted values
is sealed, and each turn counts as the user's activity. Sweeps and events run outside
turns: `sweep` (e.g. at `strategy.sweep_interval_s`, from the simulator), `handle_event`
for one event in process, or a bus attached to the engine that `sweep` consumes first
(the harness publishes on the bus: at-least-once, replayable). Without an engine (a
benchmark's null stores) the stores' own defaults apply and forget commands are not
recognised.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

import numpy as np

from reference.clock import Clock, VirtualClock
from reference.errors import InvalidInput, LayerFailure, note_layer_failure
from reference.forgetting.dialogue import ForgetTurn, forget_turn
from reference.forgetting.engine import ForgettingEngine
from reference.forgetting.erasure import erase_user
from reference.forgetting.plans import Consolidation, EventOutcome, SweepStats
from reference.ids import new_id
from reference.ltm.base import LongTermStore
from reference.ltm.filters import LtmFilter
from reference.models import Event, Fact, Hit, MemoryRecord, MemoryType
from reference.policy.memory_types import memory_type
from reference.policy.oracle import OracleAdvice
from reference.promotion import DEFAULT_IMPORTANCE, FactCandidate, extract_fact, should_promote
from reference.session.base import SessionStore
from reference.stm.base import AddResult, MetadataValue, ShortTermStore
from reference.stm.filters import StmFilter
from reference.text_interfaces import Embedder, IntentDecision, PiiMasker
from reference.turns import TIMING_KEYS, Recall, TurnResult
from reference.validation import check_id, check_k, check_metadata, check_text


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
        engine: ForgettingEngine | None = None,
    ) -> None:
        self.clock = clock
        self.session = session
        self.stm = stm
        self.ltm = ltm
        self.embedder = embedder
        self.pii = pii
        self.stm_k = check_k("stm_k", stm_k)
        self.ltm_k = check_k("ltm_k", ltm_k)
        if engine is not None and (engine.stm is not stm or engine.ltm is not ltm):
            raise InvalidInput("engine", "must govern this system's own stores")
        self.engine = engine

    def turn(
        self,
        *,
        user_id: str,
        session_id: str,
        text: str,
        at: float | datetime | None = None,
        channel: str = "web",
        metadata: dict[str, MetadataValue] | None = None,
    ) -> TurnResult:
        """Run one user utterance through every layer and return the assembled context.

        `at` moves a virtual clock forward to the utterance's time; with a wall clock it
        must be None. Retrieval runs before the utterance is stored, so the hits are what
        was known before it. `metadata` (e.g. an order_id or ticket_id) is stored with
        the STM record and in the value of a fact promoted from it, where business
        events find it. A forget command is carried out, not stored: retrieval then
        shows what is left.
        """
        check_id("user_id", user_id)
        check_id("session_id", session_id)
        check_text("text", text)
        check_metadata("metadata", metadata)  # before any layer is written
        self._move_clock(at)
        timings: dict[str, float] = {}
        started = time.perf_counter()

        mark = time.perf_counter()
        added: AddResult | None = None
        try:
            state = self.session.get(user_id=user_id, session_id=session_id)
            if state is None:
                state = self.session.create(user_id=user_id, session_id=session_id, channel=channel)
            message_id = new_id()
            window = self.session.append_message(
                user_id=user_id, session_id=session_id, message_id=message_id
            )
            timings["session"] = _ms_since(mark)

            mark = time.perf_counter()
            masked = self.pii.mask(text)
            disclosed = [m.kind for m in self.pii.detect(text)] if masked != text else []
            timings["pii"] = _ms_since(mark)

            forgetting = ForgetTurn()
            if self.engine is not None:
                self.engine.note_activity(user_id)
                self.engine.note_session(user_id, session_id)
                forgetting = forget_turn(
                    self.engine, state, masked, user_id=user_id, session_id=session_id
                )
                window = [] if forgetting.clears_window else window

            mark = time.perf_counter()
            vector = self.embedder.embed_one(masked)
            timings["embed"] = _ms_since(mark)

            mark = time.perf_counter()
            stm_hits = self._stm_hits(user_id, session_id, vector, touch=True)
            said_before = any(hit.record.text == masked for hit in stm_hits)
            if forgetting.handled:  # a forget command, or the answer to its question
                decision = IntentDecision(keep=False, kind=None, reason="forget command")
                added = AddResult(
                    accepted=False, reason=decision.reason, record=None, intent=decision
                )
                candidate = None
            else:
                added, candidate = self._add(
                    user_id, session_id, masked, vector, message_id, metadata, disclosed
                )
            timings["stm"] = _ms_since(mark)

            mark = time.perf_counter()
            ltm_hits = self._ltm_hits(user_id, vector, masked, touch=True)
            timings["ltm"] = _ms_since(mark)

            mark = time.perf_counter()
            promoted = None
            if candidate is not None and should_promote(
                masked, added.intent.kind, said_before=said_before, candidate=candidate
            ):
                promoted = self._promote(user_id, text, masked, candidate, vector, metadata)
            timings["promotion"] = _ms_since(mark)
        except Exception as exc:
            layer = next(key for key in TIMING_KEYS if key not in timings)
            note_layer_failure(exc, LayerFailure(layer, _ms_since(mark), dict(timings)))
            if added is not None and added.record is not None:
                self._undo_stored(exc, user_id, added.record.record_id)
            raise
        timings["turn"] = _ms_since(started)
        if self.engine is not None:  # one increment (`reference.monitoring`)
            self.engine.counters.retrievals[bool(stm_hits or ltm_hits)] += 1

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
            forgotten=forgetting.forgotten,
            reply=forgetting.reply,
            confirmation=forgetting.confirmation,
        )

    def _undo_stored(self, exc: BaseException, user_id: str, record_id: str) -> None:
        """A turn that fails after storing its STM record takes the record back, so a
        failed turn leaves nothing a later read sees. When STM fails that too, the
        record's id rides on the error (`stm_record_left`) for the caller to delete later.
        A promotion's fact needs no undo: fact and audit row are one transaction, and a
        turn fails after it only when its commit got no answer (in doubt)."""
        try:
            self.stm.delete(
                filter=StmFilter(
                    user_id=user_id, record_ids=frozenset({record_id}), include_dead=True
                )
            )
        except Exception:  # STM down as well: the caller records the id (see above)
            exc.stm_record_left = (user_id, record_id)  # type: ignore[attr-defined]

    def recall(
        self,
        *,
        user_id: str,
        session_id: str,
        query: str,
        at: float | datetime | None = None,
        k: int | None = None,
    ) -> Recall:
        """Retrieval only: what a probe sees. It changes nothing (no session update,
        nothing stored, no access counted), so measuring does not move the measured.
        `k` (default: the system's stm_k and ltm_k) is the top-k of each layer."""
        check_text("query", query)
        if k is not None:
            check_k("k", k)
        self._move_clock(at)
        masked = self.pii.mask(query)
        vector = self.embedder.embed_one(masked)
        found = Recall(
            stm_hits=self._stm_hits(user_id, session_id, vector, touch=False, k=k),
            ltm_hits=self._ltm_hits(user_id, vector, masked, touch=False, k=k),
        )
        if self.engine is not None:  # counted in process only (`reference.monitoring`)
            self.engine.counters.retrievals[bool(found.stm_hits or found.ltm_hits)] += 1
        return found

    def sweep(self, *, dry_run: bool = False, at: float | datetime | None = None) -> SweepStats:
        """One sweep of every layer by the forgetting engine (see `ForgettingEngine.sweep`)."""
        self._move_clock(at)
        return self._engine().sweep(dry_run=dry_run)

    def handle_event(self, event: Event, *, at: float | datetime | None = None) -> EventOutcome:
        """Apply one business event now, in process (no bus)."""
        self._move_clock(at)
        return self._engine().handle_event(event)

    def close_session(
        self, *, user_id: str, session_id: str, at: float | datetime | None = None
    ) -> Consolidation:
        """End a conversation now: the session is closed and, under a strategy with
        `promotion: consolidate`, its STM records become LTM episodes at once
        (`reference.forgetting.consolidation`). Returns what was consolidated."""
        check_id("user_id", user_id)
        check_id("session_id", session_id)
        self._move_clock(at)
        self.session.close(user_id=user_id, session_id=session_id)
        if self.engine is None:
            return Consolidation()
        return self.engine.consolidate_session(user_id=user_id, session_id=session_id)

    def advise(self, oracle: OracleAdvice | None) -> None:
        """Give the engine the harness's knowledge of future probes (oracle strategy)."""
        self._engine().advise(oracle)

    def reveal(self, fact: Fact) -> dict[str, Any]:
        """A fact's original value, unsealed with the configured key when sealed."""
        return fact.value if self.engine is None else self.engine.reveal(fact)

    def footprint(self) -> dict[str, int]:
        """Live records per layer in this namespace."""
        return {
            "session": self.session.count(),
            "stm": self.stm.count(),
            "ltm": self.ltm.count(),
        }

    def delete_user_data(self, *, user_id: str) -> dict[str, int]:
        """Erase everything about the user from every layer (`forgetting.erasure`: the
        routine a confirmed "forget everything" runs too); returns counts per layer."""
        erased = erase_user(
            session=self.session,
            stm=self.stm,
            ltm=self.ltm,
            user_id=user_id,
            cause="delete_user_data",
        )
        if self.engine is not None:
            self.engine.activity.drop(user_id)
        return erased.by_layer()

    def dispose(self) -> None:
        """Write buffered activity, then release every layer's connections."""
        if self.engine is not None:
            self.engine.flush_activity()
        for store in (self.session, self.stm, self.ltm):
            store.dispose()

    def drop(self) -> None:
        """Remove this namespace from every layer (keys, collection, tables) and release
        the connections: the end of a throwaway namespace, such as a simulation shard's."""
        if self.engine is not None:
            self.engine.flush_activity()
        for store in (self.session, self.stm, self.ltm):
            store.drop()

    def _engine(self) -> ForgettingEngine:
        if self.engine is None:
            raise InvalidInput("engine", "this system has no forgetting engine")
        return self.engine

    def _move_clock(self, at: float | datetime | None) -> None:
        if at is None:
            return
        if not isinstance(self.clock, VirtualClock):
            raise InvalidInput(
                "at", "an explicit time needs a VirtualClock; the clock is the wall clock"
            )
        self.clock.set(at)

    def _stm_hits(
        self,
        user_id: str,
        session_id: str,
        vector: np.ndarray,
        *,
        touch: bool,
        k: int | None = None,
    ) -> list[Hit[MemoryRecord]]:
        k = k or self.stm_k
        if self.engine is not None:
            return self.engine.retrieve_stm(
                user_id=user_id, session_id=session_id, embedding=vector, k=k, touch=touch
            )
        return self.stm.query(
            user_id=user_id, session_id=session_id, embedding=vector, k=k, touch=touch
        )

    def _ltm_hits(
        self, user_id: str, vector: np.ndarray, text: str, *, touch: bool, k: int | None = None
    ) -> list[Hit[Fact]]:
        k = k or self.ltm_k
        if self.engine is not None:
            return self.engine.retrieve_ltm(
                user_id=user_id, embedding=vector, k=k, touch=touch, text=text
            )
        return self.ltm.query(user_id=user_id, embedding=vector, k=k, touch=touch)

    def _add(
        self,
        user_id: str,
        session_id: str,
        masked: str,
        vector: np.ndarray,
        message_id: str,
        metadata: dict[str, MetadataValue] | None,
        disclosed: list[str],
    ) -> tuple[AddResult, FactCandidate | None]:
        """Store the utterance in STM, tagged with the fact it states (its key is the
        `topic` events and forget commands match), under the strategy's deadline for its
        `memory_type` (`disclosed`: PII kinds masked) and the fact's initial importance.
        A `speaker` in the metadata scopes the key."""
        decision = self.stm.intent_filter.classify(masked)
        if not decision.keep:
            return AddResult(False, decision.reason, None, decision), None
        speaker = (metadata or {}).get("speaker")
        speaker = speaker if isinstance(speaker, str) and speaker.strip() else None
        candidate = extract_fact(masked, decision.kind, speaker=speaker)
        tags: dict[str, MetadataValue] = {**(metadata or {}), "message_id": message_id}
        importance = DEFAULT_IMPORTANCE
        if candidate is not None:
            tags.update(topic=candidate.key, category=candidate.category.value)
            importance = candidate.importance
        category = None if candidate is None else candidate.category
        intent = decision.kind or MemoryType.CONVERSATION
        kind = memory_type(masked, intent, category=category, disclosed=disclosed)
        expiry = (
            self.engine.stm_expiry(kind, importance=importance) if self.engine is not None else {}
        )
        added = self.stm.add(
            user_id=user_id,
            session_id=session_id,
            text=masked,
            embedding=vector,
            metadata=tags,
            intent=decision,
            type=kind,
            importance=importance,
            **expiry,
        )
        if self.engine is not None and added.record is not None:
            self.engine.note_written(added.record)
        return added, candidate

    def _promote(
        self,
        user_id: str,
        raw: str,
        masked: str,
        candidate: FactCandidate,
        vector: np.ndarray,
        metadata: dict[str, MetadataValue] | None,
    ) -> Fact | None:
        # What may be shown: the value as extracted from the masked text.
        visible: dict[str, Any] = {**(metadata or {}), "value": candidate.value}
        value = visible
        engine = self.engine
        if engine is not None and engine.cipher is not None:
            # The raw value is what gets sealed: the masked text stays the searchable part.
            # The key comes from the masked text (a fingerprint key would differ). Text
            # with raw PII in it is not remembered; text the masker left alone may be.
            original = extract_fact(raw, candidate.kind, remember=raw == masked)
            if original is not None and original.category is candidate.category:
                value = {**visible, "value": original.value}
        current = self.ltm.facts(
            filter=LtmFilter(
                user_id=user_id,
                categories=frozenset({candidate.category}),
                keys=frozenset({candidate.key}),
            )
        )
        if current and self.reveal(current[0]) == value:
            return None  # restating a known fact is not a new version
        stored = value
        if engine is not None:
            # Sealed as the text it came from was: a value that differs from the
            # visible one held PII, whether or not the masker finds it in the value alone.
            stored = engine.seal(
                user_id=user_id,
                category=candidate.category,
                key=candidate.key,
                value=value,
                visible=visible,
            )
        fact = self.ltm.upsert(
            user_id=user_id,
            category=candidate.category,
            key=candidate.key,
            value=stored,
            text=masked,
            importance=candidate.importance,
            actor="promotion",
            cause=f"promotion: {candidate.category.value} stated in a turn",
            embedding=vector,
            expires_at=None
            if engine is None
            else engine.ltm_expires_at(candidate.category, importance=candidate.importance),
        )
        if engine is not None:
            engine.note_written(fact)
        return fact


def _ms_since(mark: float) -> float:
    return (time.perf_counter() - mark) * 1000.0

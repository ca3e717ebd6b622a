"""`MemoryService`: the HTTP API's operations on one `MemorySystem`, per tenant.

**Tenants scope user ids.** A tenant's user `alice` is `"<tenant>.alice"` inside the
system. Tenant names never contain '.', so the first '.' of a scoped id always ends the
tenant: no user id of tenant `a` (not even `"b.alice"`, which becomes `"a.b.alice"`) can
name a user of tenant `b`. The user id is checked as the Python API checks it
(`reference.validation.check_id`), then the scoped id must fit `MAX_ID_LENGTH` too: a
tenant's user ids may be `MAX_ID_LENGTH - len(tenant) - 1` characters long.

**Concurrency.** The system's calls are synchronous; the app runs them in a bounded thread
pool. The stores are thread-safe (one lock per in-memory store; Redis, Chroma and
PostgreSQL clients with their own locks and pools), but a turn is a read-modify-write of
the user's session (get or create, the context window, a pending "forget everything")
and of the user's facts (promotion reads the current version, then upserts). Two turns
of one user at once could both create the session or both write a version. So every
operation that writes holds the user's lock: one of 256 striped locks picked by the
scoped user id (bounded memory whatever the number of users; two users share a stripe
one time in 256, and then only wait for each other). Different users' turns overlap
freely: their embeddings meet in the batcher, their store calls wait in parallel.
Recall only reads and takes no lock.

**A request that fails part-way** (a layer down: 503) leaves nothing a later read sees,
or work that is finished later (`memharness.serve.pending`): a turn takes back the STM
record it stored (`MemorySystem.turn`), and when STM is down too the record's deletion is
left pending; a DELETE is pending from before its first step until its last, and
retried until it completes (`complete_pending`: at start, after a supervised server's
restart, every few seconds while anything is pending).

**Time.** On a wall clock a request with `at` is refused (422 naming `at`). With a
virtual clock (`--virtual-time`), `at` moves it forward before the call, and an `at`
before the clock's now is refused naming `at`, before anything is written.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Literal, TypeVar

from memharness.serve.cleanup import FileCleanup
from memharness.serve.models import (
    ContextItem,
    DeleteUserResponse,
    EventRequest,
    EventResponse,
    ForgetRequest,
    ForgetResponse,
    Forgotten,
    RecallRequest,
    RecallResponse,
    Stored,
    TurnRequest,
    TurnResponse,
)
from memharness.serve.pending import Pending, PendingWork
from reference.clock import VirtualClock
from reference.errors import InvalidInput
from reference.ltm.filters import LtmFilter
from reference.models import Event
from reference.policy.forget_commands import parse_forget_command
from reference.stm.filters import StmFilter
from reference.system import MemorySystem
from reference.turns import Recall
from reference.validation import (
    MAX_ID_LENGTH,
    check_id,
    check_json_object,
    check_k,
    check_metadata,
    check_text,
    check_timestamp,
)

__all__ = ["MemoryService", "scoped_user"]

log = logging.getLogger("memharness.serve")
T = TypeVar("T")

_STRIPES = 256
_PENDING_KEY = "pending_forget_everything"  # reference.forgetting.dialogue.PENDING_KEY
_PROBE = "memh-health"  # no tenant's user: scoped ids are "<tenant>.<user>"


def scoped_user(tenant: str, user_id: object) -> str:
    """The system's id of the tenant's user (see the module docstring); refuses, naming
    `user_id`, what the Python API refuses, and ids too long once scoped."""
    user = check_id("user_id", user_id)
    scoped = f"{tenant}.{user}"
    if len(scoped) > MAX_ID_LENGTH:
        limit = MAX_ID_LENGTH - len(tenant) - 1
        raise InvalidInput(
            "user_id", f"is {len(user)} characters long; this tenant's limit is {limit}"
        )
    return scoped


class MemoryService:
    """What each route does, on behalf of an authenticated tenant."""

    def __init__(
        self,
        system: MemorySystem,
        cleanup: FileCleanup | None = None,
        pending: Pending | None = None,
        servers_down: Callable[[], set[str]] | None = None,
    ) -> None:
        """`pending`: where work left by failed requests is kept (none: not kept);
        `servers_down`: the layers whose supervised server is dead now
        (`memharness.serve.supervisor`)."""
        self.system = system
        self.cleanup = cleanup
        self.pending = pending
        self.servers_down = servers_down
        self.virtual_time = isinstance(system.clock, VirtualClock)
        self._locks = [threading.Lock() for _ in range(_STRIPES)]
        self._completing = threading.Lock()

    def _keeping_undo(self, call: Callable[[], T]) -> T:
        """`call()` (a turn); an STM record it could not take back is left pending."""
        try:
            return call()
        except Exception as exc:
            left = getattr(exc, "stm_record_left", None)
            if left is not None and self.pending is not None:
                user, record_id = left
                self.pending.add(PendingWork("stm_record", user, record_id))
            raise

    def complete_pending(self) -> int:
        """Finish the work failed requests left (erasures, STM records of failed turns);
        how many entries were completed. An entry whose layer still fails stays."""
        if self.pending is None:
            return 0
        completed = 0
        with self._completing:
            for work in self.pending.entries():
                try:
                    if work.kind == "erase_user":
                        with self._erasing(), self._lock(work.user):
                            self.system.delete_user_data(user_id=work.user)
                    elif work.kind == "stm_record" and work.record_id is not None:
                        ids = frozenset({work.record_id})
                        with self._lock(work.user):
                            self.system.stm.delete(
                                filter=StmFilter(
                                    user_id=work.user, record_ids=ids, include_dead=True
                                )
                            )
                except Exception as exc:  # a layer still down: kept for the next try
                    log.warning("serve: pending %s not completed yet: %s", work.kind, exc)
                    continue
                self.pending.done(work)
                completed += 1
        if completed:
            log.warning("serve: completed %d request(s) a failure had left pending", completed)
        return completed

    def _lock(self, scoped: str) -> threading.Lock:
        return self._locks[hash(scoped) % _STRIPES]

    @contextmanager
    def _erasing(self) -> Iterator[None]:
        """An erasure, then the files' cleanup (`memharness.serve.cleanup`), if any."""
        if self.cleanup is None:
            yield
            return
        self.cleanup.erasure_begins()
        try:
            yield
        finally:
            ticket = self.cleanup.erasure_ends()
        self.cleanup.settle(ticket)

    def _move_clock(self, at: float | None) -> None:
        if at is None:
            return
        clock = self.system.clock
        if not isinstance(clock, VirtualClock):
            raise InvalidInput("at", "is accepted only when the service runs with --virtual-time")
        try:
            clock.set(check_timestamp("at", at))
        except ValueError as exc:  # before the clock's now: time never goes backwards
            raise InvalidInput("at", str(exc).removeprefix("at: ")) from None

    # ------------------------------------------------------------------ routes
    def turn(self, tenant: str, body: TurnRequest) -> TurnResponse:
        user = scoped_user(tenant, body.user_id)
        check_id("session_id", body.session_id)
        check_text("text", body.text)
        check_metadata("metadata", body.metadata)
        if body.at is not None:
            check_timestamp("at", body.at)
        with self._lock(user):
            self._move_clock(body.at)
            result = self._keeping_undo(
                lambda: self.system.turn(
                    user_id=user, session_id=body.session_id, text=body.text, metadata=body.metadata
                )
            )
        forgotten = result.forgotten
        if forgotten is not None and self.cleanup is not None:
            self.cleanup.after_erasure()
        return TurnResponse(
            message_id=result.message_id,
            masked_text=result.masked_text,
            reply=result.reply,
            context=_context(Recall(result.stm_hits, result.ltm_hits)),
            stored=Stored(
                stm=None if result.stm.record is None else result.stm.record.record_id,
                ltm=None if result.promoted is None else result.promoted.fact_id,
            ),
            forgotten=None
            if forgotten is None
            else Forgotten(
                scope=forgotten.scope,
                stm_removed=len(forgotten.stm_removed),
                ltm_erased=len(forgotten.ltm_erased),
            ),
            timings_ms=result.timings_ms,
        )

    def recall(self, tenant: str, body: RecallRequest) -> RecallResponse:
        user = scoped_user(tenant, body.user_id)
        check_id("session_id", body.session_id)
        check_text("query", body.query)
        if body.k is not None:
            check_k("k", body.k)
        if body.at is not None:
            check_timestamp("at", body.at)
        self._move_clock(body.at)
        found = self.system.recall(
            user_id=user, session_id=body.session_id, query=body.query, k=body.k
        )
        return RecallResponse(hits=_context(found))

    def forget(self, tenant: str, body: ForgetRequest) -> ForgetResponse:
        """A forget command (or the answer to "forget everything?"), run as the user's
        turn. Text that is neither is refused naming `command`, and nothing is stored."""
        user = scoped_user(tenant, body.user_id)
        check_id("session_id", body.session_id)
        check_text("command", body.command)
        engine = self.system.engine
        if engine is None or not engine.strategy.forget_commands.enabled:
            raise InvalidInput("command", "this service's strategy does not take forget commands")
        with self._lock(user):
            if parse_forget_command(self.system.pii.mask(body.command)) is None:
                state = self.system.session.get(user_id=user, session_id=body.session_id)
                if state is None or not isinstance(state.task_state.get(_PENDING_KEY), dict):
                    raise InvalidInput(
                        "command",
                        "is not a forget command (e.g. 'forget my address', 'forget "
                        "everything') nor the answer to a pending one",
                    )
            result = self._keeping_undo(
                lambda: self.system.turn(
                    user_id=user, session_id=body.session_id, text=body.command
                )
            )
        report = result.forgotten
        if report is not None and self.cleanup is not None:
            self.cleanup.after_erasure()
        return ForgetResponse(
            scope=None if report is None else report.scope,
            stm_removed=0 if report is None else len(report.stm_removed),
            ltm_erased=0 if report is None else len(report.ltm_erased),
            reply=result.reply,
        )

    def event(self, tenant: str, body: EventRequest) -> EventResponse:
        user = scoped_user(tenant, body.user_id)
        check_id("name", body.name)
        check_json_object("payload", body.payload)
        if body.at is not None:
            check_timestamp("at", body.at)
        with self._lock(user):
            self._move_clock(body.at)
            event = Event(
                name=body.name, user_id=user, at=self.system.clock.now(), payload=body.payload
            )
            outcome = self.system.handle_event(event)
        return EventResponse(
            stm_removed=outcome.stm_removed,
            ltm_archived=outcome.ltm_archived,
            ltm_deleted=outcome.ltm_deleted,
        )

    def health(self) -> dict[str, Literal["ok", "down"]]:
        """Each layer's state: one read of each (never a write; a user id no tenant's
        user can have, since tenants' ids carry a '.')."""
        probes = {
            "session": lambda: self.system.session.peek(user_id=_PROBE, session_id=_PROBE),
            "stm": lambda: self.system.stm.count(filter=StmFilter(user_id=_PROBE)),
            "ltm": lambda: self.system.ltm.count(filter=LtmFilter(user_id=_PROBE)),
        }
        states: dict[str, Literal["ok", "down"]] = {}
        dead = self.servers_down() if self.servers_down is not None else set()
        for layer, probe in probes.items():
            if layer in dead:  # its server is dead or starting again: no probe to wait on
                states[layer] = "down"
                continue
            try:
                probe()
                states[layer] = "ok"
            except Exception:  # any failure of the probe: the layer is down
                states[layer] = "down"
        return states

    def delete_user(self, tenant: str, user_id: str) -> DeleteUserResponse:
        user = scoped_user(tenant, user_id)
        work = PendingWork("erase_user", user)
        with self._erasing(), self._lock(user):
            if self.pending is not None:  # from before the first step until the last
                self.pending.add(work)
            removed = self.system.delete_user_data(user_id=user)
            if self.pending is not None:
                self.pending.done(work)
        return DeleteUserResponse(removed=removed)


def _context(found: Recall) -> list[ContextItem]:
    items: list[ContextItem] = [
        ContextItem(layer="stm", id=h.record.record_id, text=h.record.text, score=h.score)
        for h in found.stm_hits
    ]
    items += [
        ContextItem(layer="ltm", id=h.record.fact_id, text=h.record.text, score=h.score)
        for h in found.ltm_hits
    ]
    return items

"""Business events on a stream with consumer groups: at-least-once, replayable, idempotent.

Data, with names from `reference.keys.Namespace`:

- stream `events_stream`: one entry per event, fields name, user_id, at (repr of a float)
  and payload (a JSON object); it is the full history, read back by `replay`;
- one consumer group per subscriber: the server keeps the group's read position and its
  pending entries list (PEL: delivered to a consumer, not yet acknowledged);
- hash `events_failures_key(group)`: how often the group's handler raised, per entry;
- list `events_dead_letters_key`: JSON records of entries acknowledged without a handler
  having succeeded (malformed, trimmed before handling, or failed `max_failures` times);
- set `events_processed_key(group)`: the ids `IdempotentHandler` has applied.

`consume` re-delivers the consumer's own pending entries first (read before a crash, or
whose handler raised), then reads new ones, and acknowledges an entry only after its
handler returned. A handler's exception propagates out of `consume` (errors are not
collected and hidden); the entry stays pending and comes first next time, until its
`max_failures`-th failure moves it to the dead letters, so a poison event cannot wedge a
consumer forever. Delivery is at-least-once: wrap handlers in `IdempotentHandler`.

Lifecycle: like the session store, one bus per process (`from_url`), `dispose()` closes
it. In-memory buses keep their data in an `InMemoryEventServer`; buses sharing one behave
like clients of one Redis server, so a consumer restart is a new bus on the same server.

This module holds the backend-independent part: encoding, delivery, dead letters and
idempotence. Backends: `events_redis.RedisStreamEventBus` (a Redis Stream) and
`events_memory.InMemoryEventBus` (the same model in memory).
"""

from __future__ import annotations

import json
import logging
import math
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass

from reference.errors import InvalidInput, MemoryStoreError, NotFound
from reference.keys import Namespace
from reference.models import Event
from reference.validation import check_id, check_json_object, check_k, check_timestamp

log = logging.getLogger(__name__)

Handler = Callable[[str, Event], None]
Fields = dict[str, str]
Entry = tuple[str, Fields]  # (stream id, fields); empty fields: the entry was deleted
DEFAULT_MAX_FAILURES = 5
MAX_BATCH = 10_000
_ID_RE = re.compile(r"(\d+)(?:-(\d+))?")
_DELETED = "deleted from the stream (trimmed) before it was handled"


class MalformedEvent(MemoryStoreError):
    """A stream entry that is not a valid event: names the entry's id and the field."""

    def __init__(self, event_id: str, field: str, reason: str) -> None:
        super().__init__(f"stream entry {event_id}: {field}: {reason}")
        self.event_id = event_id
        self.field = field
        self.reason = reason


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """A stream entry acknowledged without being handled, and why."""

    event_id: str
    group: str
    consumer: str
    field: str  # the bad field; "entry" when deleted; "handler" after max_failures
    reason: str
    fields: dict[str, str]  # as found in the stream (empty when deleted)


def parse_stream_id(field: str, value: object) -> tuple[int, int]:
    """`(ms, seq)` of a stream id ('<ms>-<seq>' or '<ms>'), for ordering."""
    match = _ID_RE.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        raise InvalidInput(field, f"{value!r} is not a stream id ('<ms>-<seq>' or '<ms>')")
    return int(match[1]), int(match[2] or 0)


def _check_non_negative(field: str, value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise InvalidInput(field, f"must be an integer >= 0, got {value!r}")
    return value


def encode_event(event: Event) -> Fields:
    """The stream fields of an event; raises `InvalidInput` naming the bad field."""
    if not isinstance(event, Event):
        raise InvalidInput("event", f"must be an Event, got {type(event).__name__}")
    check_id("event.name", event.name)
    check_id("event.user_id", event.user_id)
    at = check_timestamp("event.at", event.at)
    payload = check_json_object("event.payload", event.payload)
    return {
        "name": event.name,
        "user_id": event.user_id,
        "at": repr(at),  # repr round-trips a float exactly
        "payload": json.dumps(payload, ensure_ascii=False, allow_nan=False, sort_keys=True),
    }


def decode_event(event_id: str, fields: Mapping[str, str]) -> Event:
    """The event in a stream entry; raises `MalformedEvent` naming the id and field."""
    if not fields:
        raise MalformedEvent(event_id, "entry", _DELETED)
    for name in ("name", "user_id", "at", "payload"):
        if name not in fields:
            raise MalformedEvent(event_id, name, "missing")
    try:
        check_id("name", fields["name"])
        check_id("user_id", fields["user_id"])
    except InvalidInput as exc:
        raise MalformedEvent(event_id, exc.field, exc.reason) from None
    try:
        at = float(fields["at"])
    except ValueError:
        at = math.nan
    if not math.isfinite(at):
        raise MalformedEvent(event_id, "at", f"{fields['at'][:40]!r} is not a finite timestamp")
    try:
        payload = json.loads(fields["payload"])
    except json.JSONDecodeError as exc:
        raise MalformedEvent(event_id, "payload", f"is not valid JSON ({exc})") from None
    if not isinstance(payload, dict):
        raise MalformedEvent(event_id, "payload", "must be a JSON object")
    return Event(name=fields["name"], user_id=fields["user_id"], at=at, payload=payload)


class ProcessedStore(ABC):
    """The ids of the events a group has applied: the record behind `IdempotentHandler`."""

    @abstractmethod
    def seen(self, *, group: str, event_id: str) -> bool:
        """Whether `event_id` is recorded as applied by `group`."""

    @abstractmethod
    def mark(self, *, group: str, event_id: str) -> None:
        """Record `event_id` as applied by `group`."""


class EventBus(ABC):
    """Business events on a stream with consumer groups; see the module docstring.

    The public methods validate input and hold the delivery logic; backends provide
    primitives named after the Redis commands they model, so semantics are identical.
    """

    processed: ProcessedStore

    def __init__(self, namespace: Namespace, *, max_failures: int = DEFAULT_MAX_FAILURES):
        self.namespace = namespace
        self.max_failures = check_k("max_failures", max_failures, limit=1_000)

    def publish(self, event: Event) -> str:
        """Append an event to the stream; returns its stream id."""
        return self._xadd(encode_event(event))

    def ensure_group(self, group: str, *, start_id: str = "0") -> bool:
        """Create a consumer group (and the stream) unless it exists; True if created.

        `start_id` "0" (default): the group sees the whole history, so events published
        before it existed are not lost; "$": only events published from now on.
        """
        check_id("group", group)
        if start_id != "$":
            parse_stream_id("start_id", start_id)
        return self._xgroup_create(group, start_id)

    def consume(
        self,
        *,
        group: str,
        consumer: str,
        handler: Handler,
        max_events: int = 100,
        block_ms: int | None = None,
    ) -> int:
        """Hand up to `max_events` entries to `handler`; returns how many were settled.

        Settled: acknowledged after the handler returned, or dead-lettered. The consumer's
        own pending entries come first, then new ones; `block_ms` waits for new ones only
        when nothing else was found (0 waits forever, like Redis). A handler exception
        propagates; its entry and the rest of the batch stay pending for this consumer.
        """
        check_id("group", group)
        check_id("consumer", consumer)
        check_k("max_events", max_events, limit=MAX_BATCH)
        if block_ms is not None:
            _check_non_negative("block_ms", block_ms)
        # "0": this consumer's PEL, i.e. what it was given before a crash or a failure.
        own = self._xreadgroup(group, consumer, new=False, count=max_events, block_ms=None)
        settled = self._deliver(group, consumer, handler, own)
        if len(own) < max_events:
            block = block_ms if not own else None
            new = self._xreadgroup(
                group, consumer, new=True, count=max_events - len(own), block_ms=block
            )
            settled += self._deliver(group, consumer, handler, new)
        return settled

    def _deliver(self, group: str, consumer: str, handler: Handler, entries: list[Entry]) -> int:
        for event_id, fields in entries:
            try:
                event = decode_event(event_id, fields)
            except MalformedEvent as exc:
                self._dead_letter(group, consumer, event_id, exc.field, exc.reason, fields)
                continue
            try:
                handler(event_id, event)
            except Exception as exc:  # not BaseException: an interrupt is no handler failure
                failures = self._fail(group, event_id)
                if failures >= self.max_failures:
                    reason = f"handler raised {failures} times, last: {exc!r}"
                    self._dead_letter(group, consumer, event_id, "handler", reason, fields)
                raise
            self._xack(group, event_id)
        return len(entries)

    def _dead_letter(
        self, group: str, consumer: str, event_id: str, field: str, reason: str, fields: Fields
    ) -> None:
        letter = DeadLetter(event_id, group, consumer, field, reason, dict(fields))
        log.warning("group %s dead-lettered %s", group, MalformedEvent(event_id, field, reason))
        self._xack_dead(group, event_id, json.dumps(asdict(letter), ensure_ascii=False))

    def claim_stale(
        self, *, group: str, consumer: str, min_idle_ms: int, max_events: int = 100
    ) -> list[str]:
        """Move entries idle `min_idle_ms` at any consumer (a dead one) to `consumer`.

        Returns the claimed ids, oldest first; `consumer`'s next `consume` handles them
        before new events. Entries trimmed away meanwhile are dead-lettered instead.
        """
        check_id("group", group)
        check_id("consumer", consumer)
        check_k("max_events", max_events, limit=MAX_BATCH)
        _check_non_negative("min_idle_ms", min_idle_ms)
        claimed, deleted = self._xautoclaim(group, consumer, min_idle_ms, max_events)
        for event_id in deleted:
            self._dead_letter(group, consumer, event_id, "entry", _DELETED, {})
        return claimed

    def pending(self, *, group: str) -> int:
        """How many entries the group has delivered and not yet settled (all consumers)."""
        return self._xpending(check_id("group", group))

    def replay(self, *, since_id: str = "0", count: int | None = None) -> list[tuple[str, Event]]:
        """The history after `since_id` (exclusive), oldest first: for audit or re-processing.

        Independent of groups and acknowledgements. A malformed entry raises
        `MalformedEvent`; replay from past its id to skip it.
        """
        parse_stream_id("since_id", since_id)
        if count is not None:
            check_k("count", count, limit=1_000_000)
        return [(i, decode_event(i, f)) for i, f in self._xrange(since_id, count)]

    def trim(self, *, max_len: int) -> int:
        """Drop the oldest entries beyond `max_len`; returns how many were dropped.

        A dropped entry that was still pending is dead-lettered when next delivered.
        """
        return self._xtrim(_check_non_negative("max_len", max_len))

    def dead_letters(self) -> list[DeadLetter]:
        """Every dead-lettered entry, oldest first (all groups)."""
        return [DeadLetter(**json.loads(raw)) for raw in self._dead_letter_records()]

    def dispose(self) -> None:
        """Release connections (nothing for the in-memory bus)."""

    # ------------------------------------------------------------------ primitives
    # A missing group raises `NotFound` (Redis: NOGROUP) in every primitive taking one.
    @abstractmethod
    def _xadd(self, fields: Fields) -> str: ...
    @abstractmethod
    def _xgroup_create(self, group: str, start_id: str) -> bool: ...
    @abstractmethod
    def _xreadgroup(
        self, group: str, consumer: str, *, new: bool, count: int, block_ms: int | None
    ) -> list[Entry]: ...
    @abstractmethod
    def _xack(self, group: str, event_id: str) -> None:
        """Acknowledge and forget the entry's failure count."""

    @abstractmethod
    def _xack_dead(self, group: str, event_id: str, record: str) -> None:
        """Atomically append `record` to the dead letters and acknowledge the entry."""

    @abstractmethod
    def _fail(self, group: str, event_id: str) -> int:
        """Count one more handler failure; returns the count."""

    @abstractmethod
    def _xautoclaim(
        self, group: str, consumer: str, min_idle_ms: int, count: int
    ) -> tuple[list[str], list[str]]:
        """Claim up to `count` live idle entries in id order; also the deleted ones seen."""

    @abstractmethod
    def _xpending(self, group: str) -> int: ...
    @abstractmethod
    def _xrange(self, after_id: str, count: int | None) -> list[Entry]: ...
    @abstractmethod
    def _xtrim(self, max_len: int) -> int: ...
    @abstractmethod
    def _dead_letter_records(self) -> list[str]: ...


class IdempotentHandler:
    """Wraps a handler so at-least-once delivery has an exactly-once effect per group.

    Per event: skip if its id is recorded; else apply, then record; `consume` acks after
    that. A crash between recording and the ack re-delivers the event, and the record
    skips it. The window left: a crash after the handler's effect and before the record
    re-applies the effect once, so effects should still tolerate a repeat (invalidating a
    memory twice is harmless) or share a transaction with the record. Ids are stream ids:
    a producer that publishes the same event twice makes two events.
    """

    def __init__(self, bus_or_store: EventBus | ProcessedStore, group: str, handler: Handler):
        store = bus_or_store.processed if isinstance(bus_or_store, EventBus) else bus_or_store
        self.store: ProcessedStore = store
        self.group = check_id("group", group)
        self.handler = handler
        self.skipped = 0  # duplicates caught, for metrics and tests

    def __call__(self, event_id: str, event: Event) -> None:
        if self.store.seen(group=self.group, event_id=event_id):
            self.skipped += 1
            return
        self.handler(event_id, event)
        self.store.mark(group=self.group, event_id=event_id)


def no_group_error(stream: str, group: str) -> NotFound:
    """The error of a primitive given a group that does not exist (Redis: NOGROUP)."""
    return NotFound(f"group: no consumer group {group!r} on {stream}; call ensure_group first")

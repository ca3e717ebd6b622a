"""The event bus in memory: `InMemoryEventBus` on an `InMemoryEventServer`.

The stream, consumer groups and pending entries lists are modelled with the semantics of
the Redis bus (`reference.forgetting.events_redis`); see `reference.forgetting.events`.
"""

from __future__ import annotations

import bisect
import threading
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from reference.clock import Clock, SystemClock
from reference.errors import InvalidInput
from reference.forgetting.events import (
    Entry,
    EventBus,
    Fields,
    ProcessedStore,
    no_group_error,
    parse_stream_id,
)
from reference.keys import Namespace


@dataclass
class _Delivery:
    consumer: str
    at: float  # last delivery, by the server's clock: claim_stale's idle time


@dataclass
class _Group:
    last: tuple[int, int]  # the last id delivered to the group
    # Ordered by id: new deliveries always have ids above `last`, claims keep their keys.
    pel: dict[tuple[int, int], _Delivery] = field(default_factory=dict)


@dataclass
class _Stream:
    ids: list[tuple[int, int]] = field(default_factory=list)  # sorted, for bisect
    entries: dict[tuple[int, int], Fields] = field(default_factory=dict)
    last: tuple[int, int] = (0, 0)  # the last id ever added (survives trimming, like Redis)
    groups: dict[str, _Group] = field(default_factory=dict)


class InMemoryEventServer:
    """What a Redis server holds for event buses, in memory; buses sharing one see one state.

    Ids are '<n>-0' from a counter, never from the wall clock, increasing like Redis's.
    `clock` only measures idle times for `claim_stale`. Thread-safe.
    """

    def __init__(self, clock: Clock | None = None) -> None:
        self.clock = clock or SystemClock()
        self.cond = threading.Condition()  # guards everything below; publish notifies
        self.streams: dict[str, _Stream] = {}
        self.sets: defaultdict[str, set[str]] = defaultdict(set)
        self.lists: defaultdict[str, list[str]] = defaultdict(list)
        self.counters: defaultdict[str, dict[str, int]] = defaultdict(dict)
        self._seq = 0

    def xadd(self, key: str, fields: Mapping[str, str]) -> str:
        """Append an entry as given, like XADD: no validation (tests plant bad entries)."""
        if not fields:
            raise InvalidInput("fields", "an entry needs at least one field")
        with self.cond:
            self._seq += 1
            stream = self.streams.setdefault(key, _Stream())
            stream.last = (self._seq, 0)
            stream.ids.append(stream.last)
            stream.entries[stream.last] = {str(k): str(v) for k, v in fields.items()}
            self.cond.notify_all()
        return _fmt(stream.last)


class InMemoryProcessedStore(ProcessedStore):
    """Processed ids in the in-memory server's sets."""

    def __init__(self, server: InMemoryEventServer, namespace: Namespace) -> None:
        self.server = server
        self.namespace = namespace

    def seen(self, *, group: str, event_id: str) -> bool:
        with self.server.cond:
            return event_id in self.server.sets[self.namespace.events_processed_key(group)]

    def mark(self, *, group: str, event_id: str) -> None:
        with self.server.cond:
            self.server.sets[self.namespace.events_processed_key(group)].add(event_id)


class InMemoryEventBus(EventBus):
    """The stream, groups and PELs modelled in memory, with the Redis bus's semantics."""

    def __init__(
        self, namespace: Namespace, *, server: InMemoryEventServer | None = None, **kwargs: Any
    ) -> None:
        super().__init__(namespace, **kwargs)
        self.server = server if server is not None else InMemoryEventServer()
        self.processed = InMemoryProcessedStore(self.server, namespace)
        self._key = namespace.events_stream

    def _stream_and_group(self, group: str) -> tuple[_Stream, _Group]:
        stream = self.server.streams.get(self._key)
        found = None if stream is None else stream.groups.get(group)
        if stream is None or found is None:
            raise no_group_error(self._key, group)
        return stream, found

    def _xadd(self, fields: Fields) -> str:
        return self.server.xadd(self._key, fields)

    def _xgroup_create(self, group: str, start_id: str) -> bool:
        with self.server.cond:
            stream = self.server.streams.setdefault(self._key, _Stream())
            if group in stream.groups:
                return False
            last = stream.last if start_id == "$" else parse_stream_id("start_id", start_id)
            stream.groups[group] = _Group(last=last)
            return True

    def _xreadgroup(
        self, group: str, consumer: str, *, new: bool, count: int, block_ms: int | None
    ) -> list[Entry]:
        server = self.server
        with server.cond:
            stream, grp = self._stream_and_group(group)
            out: list[Entry] = []
            if not new:
                now = server.clock.now()
                for key, delivery in grp.pel.items():
                    if delivery.consumer == consumer and len(out) < count:
                        delivery.at = now
                        out.append((_fmt(key), dict(stream.entries.get(key, {}))))
                return out
            if block_ms is not None:
                timeout = None if block_ms == 0 else block_ms / 1000
                server.cond.wait_for(lambda: stream.last > grp.last, timeout)
            now = server.clock.now()
            start = bisect.bisect_right(stream.ids, grp.last)
            for key in stream.ids[start : start + count]:
                grp.pel[key] = _Delivery(consumer, now)
                grp.last = key
                out.append((_fmt(key), dict(stream.entries[key])))
            return out

    def _xack(self, group: str, event_id: str) -> None:
        with self.server.cond:
            _, grp = self._stream_and_group(group)
            grp.pel.pop(parse_stream_id("event_id", event_id), None)
            self.server.counters[self.namespace.events_failures_key(group)].pop(event_id, None)

    def _xack_dead(self, group: str, event_id: str, record: str) -> None:
        with self.server.cond:
            self.server.lists[self.namespace.events_dead_letters_key].append(record)
            self._xack(group, event_id)

    def _fail(self, group: str, event_id: str) -> int:
        with self.server.cond:
            counts = self.server.counters[self.namespace.events_failures_key(group)]
            counts[event_id] = counts.get(event_id, 0) + 1
            return counts[event_id]

    def _xautoclaim(
        self, group: str, consumer: str, min_idle_ms: int, count: int
    ) -> tuple[list[str], list[str]]:
        claimed: list[str] = []
        deleted: list[str] = []
        with self.server.cond:
            stream, grp = self._stream_and_group(group)
            now = self.server.clock.now()
            for key, delivery in grp.pel.items():
                if len(claimed) >= count:
                    break
                if (now - delivery.at) * 1000 < min_idle_ms:
                    continue
                if key not in stream.entries:
                    deleted.append(_fmt(key))
                else:
                    delivery.consumer, delivery.at = consumer, now
                    claimed.append(_fmt(key))
        return claimed, deleted

    def _xpending(self, group: str) -> int:
        with self.server.cond:
            return len(self._stream_and_group(group)[1].pel)

    def _xrange(self, after_id: str, count: int | None) -> list[Entry]:
        with self.server.cond:
            stream = self.server.streams.get(self._key, _Stream())
            start = bisect.bisect_right(stream.ids, parse_stream_id("since_id", after_id))
            stop = None if count is None else start + count
            return [(_fmt(k), dict(stream.entries[k])) for k in stream.ids[start:stop]]

    def _xtrim(self, max_len: int) -> int:
        with self.server.cond:
            stream = self.server.streams.get(self._key)
            if stream is None or len(stream.ids) <= max_len:
                return 0
            dropped = len(stream.ids) - max_len
            for key in stream.ids[:dropped]:
                del stream.entries[key]
            del stream.ids[:dropped]
            return dropped

    def _dead_letter_records(self) -> list[str]:
        with self.server.cond:
            return list(self.server.lists[self.namespace.events_dead_letters_key])


def _fmt(key: tuple[int, int]) -> str:
    return f"{key[0]}-{key[1]}"

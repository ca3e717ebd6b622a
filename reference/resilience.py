"""Timeouts and the retry policy of every client of the reference: one place for both.

What happens when a server dies, is paused or drops its connections (docs/resilience.md,
"What happens when a server dies"):

- Every client has a connect timeout and an operation timeout (`Timeouts`): redis-py's
  `socket_connect_timeout` / `socket_timeout`; psycopg's `connect_timeout`, the pool's
  wait for a connection, a client-side deadline that closes the socket of a statement
  still waiting after `operation_s` (a paused server answers nothing, not even a cancel
  request; Unix sockets have no TCP keepalives), and the server's `statement_timeout`;
  Chroma's HTTP client (`httpx` connect / read timeouts). So no call hangs.
- A failure of the server or of the connection is raised as `BackendUnavailable`, whose
  message names the layer and the server ("long-term memory: PostgreSQL at ...: ...").
- `call_with_retry` retries an operation that is safe to repeat (`idempotent`: reads,
  upserts by id, deletes by id, setting a value) and one whose failure provably came
  before anything was applied (`in_doubt=False`: PostgreSQL's transaction failed before
  its commit was sent). It never repeats an operation whose effect is unknown and would
  change if applied twice (a message appended to a context window, a counter, an event
  appended to a stream without an id, a commit in doubt).
- The retries are few and bounded in time (`RetryPolicy`): an operation fails for good
  within `RetryPolicy.bound_s(timeouts)`, 16 s with the defaults.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import TypeVar
from urllib.parse import urlsplit, urlunsplit

from pydantic import BaseModel, ConfigDict, Field

from reference.errors import BackendUnavailable

T = TypeVar("T")

#: Layer names used in error messages.
SESSION = "session"
SHORT_TERM = "short-term memory"
LONG_TERM = "long-term memory"


class Timeouts(BaseModel):
    """How long a client waits for a server, in seconds (`MEMH_TIMEOUTS__*`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    connect_s: float = Field(
        3.0, gt=0, le=600, description="opening a connection (and PostgreSQL's startup)"
    )
    operation_s: float = Field(
        5.0, gt=0, le=3600, description="one request or statement, sent and answered"
    )


class RetryPolicy(BaseModel):
    """Bounded retries with exponential backoff (`MEMH_RETRY__*`): at most `attempts`
    tries, retry n after `base_delay_s * 2**(n-1)` (capped at `max_delay_s`), and no new
    try once `budget_s` has passed since the first began."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # 4 tries 0.25, 0.5 and 1 s apart ride out a restart that refuses connections for
    # up to 1.75 s (the embedded servers restart in 0.01-2 s); against a server that
    # answers nothing, the budget stops after two tries of `Timeouts.operation_s`.
    attempts: int = Field(4, ge=1, le=20)
    base_delay_s: float = Field(0.25, ge=0, le=60)
    max_delay_s: float = Field(2.0, ge=0, le=60)
    budget_s: float = Field(8.0, ge=0, le=3600)

    def delay_s(self, retry: int) -> float:
        """The pause before retry number `retry` (1-based)."""
        return min(self.max_delay_s, self.base_delay_s * 2 ** (retry - 1))

    def bound_s(self, timeouts: Timeouts) -> float:
        """The longest an operation can take to fail for good: no try starts after
        `budget_s`, and a try takes at most a connect and an operation timeout."""
        return self.budget_s + timeouts.connect_s + timeouts.operation_s


DEFAULT_TIMEOUTS = Timeouts()
DEFAULT_RETRY = RetryPolicy()
#: No retries at all (one try).
NO_RETRY = RetryPolicy(attempts=1)


def call_with_retry(
    attempt: Callable[[], T],
    *,
    idempotent: bool,
    policy: RetryPolicy = DEFAULT_RETRY,
    on_retry: Callable[[BackendUnavailable], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """Run `attempt`; retry it under `policy` while it raises `BackendUnavailable` and is
    safe to repeat (`idempotent`, or the failure is not `in_doubt`). `on_retry` runs
    before each retry (e.g. to discard broken pooled connections). The last error is
    raised with the number of tries and the time they took."""
    began = time.monotonic()
    tries = 0
    while True:
        tries += 1
        try:
            return attempt()
        except BackendUnavailable as exc:
            elapsed = time.monotonic() - began
            delay = policy.delay_s(tries)
            safe = idempotent or not exc.in_doubt
            if not safe or tries >= policy.attempts or elapsed + delay >= policy.budget_s:
                if tries > 1:
                    raise exc.after(tries, elapsed) from exc
                raise
            if on_retry is not None:
                on_retry(exc)
            sleep(delay)


class SocketDeadlines:
    """A client-side deadline for drivers without a read timeout (psycopg): a socket still
    waiting for its reply `timeout_s` after `guard` began is shut down, which ends the wait
    with a connection error. A paused server answers nothing, not even a cancel request,
    and TCP keepalives do not exist on a Unix socket: this is what bounds the wait.

    One daemon thread per instance checks the deadlines every `timeout_s / 10` (at most
    0.1 s) while any is armed; arming and disarming is a dict update under a lock.
    """

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self._tick_s = min(0.1, timeout_s / 10)
        self._lock = threading.Lock()
        self._armed: dict[int, tuple[float, Callable[[], int], list[bool]]] = {}
        self._wake = threading.Condition(self._lock)
        self._thread: threading.Thread | None = None
        self._closed = False

    @contextlib.contextmanager
    def guard(self, fileno: Callable[[], int]) -> Iterator[list[bool]]:
        """Arm a deadline on the socket `fileno()` returns; yields a flag list whose
        first item becomes True if the deadline fired."""
        fired = [False]
        key = id(fired)
        with self._lock:
            self._armed[key] = (time.monotonic() + self.timeout_s, fileno, fired)
            if self._thread is None and not self._closed:
                self._thread = threading.Thread(
                    target=self._watch, daemon=True, name="socket-deadlines"
                )
                self._thread.start()
            if len(self._armed) == 1:  # the watcher sleeps until something is armed
                self._wake.notify()
        try:
            yield fired
        finally:
            with self._lock:
                self._armed.pop(key, None)

    def close(self) -> None:
        """Stop the watching thread."""
        with self._lock:
            self._closed = True
            self._wake.notify()

    def _watch(self) -> None:
        with self._lock:
            while not self._closed:
                if not self._armed:
                    self._wake.wait()
                    continue
                self._wake.wait(self._tick_s)
                now = time.monotonic()
                for key, (deadline, fileno, fired) in list(self._armed.items()):
                    if now >= deadline:
                        del self._armed[key]
                        fired[0] = True
                        _shut(fileno)
            self._thread = None


def _shut(fileno: Callable[[], int]) -> None:
    """Shut the socket down; `fileno` returns -1 when the connection is gone already."""
    fd = fileno()
    if fd < 0:
        return
    with contextlib.suppress(OSError):  # closed meanwhile: nothing left to end
        # A duplicate of the descriptor: shutting it down ends the socket's traffic for
        # every descriptor of it (the driver's own included), which closing would not.
        sock = socket.socket(fileno=os.dup(fd))
        try:
            sock.shutdown(socket.SHUT_RDWR)
        finally:
            sock.close()


def server_label(kind: str, url: str) -> str:
    """`kind at url`, with any password in the URL replaced by `***`."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return f"{kind} at <unparsable URL>"
    if not parts.password:
        return f"{kind} at {url}"
    user = parts.username or ""
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    return f"{kind} at {urlunsplit(parts._replace(netloc=f'{user}:***@{host}{port}'))}"


def redact_conninfo(url: str) -> str:
    """A PostgreSQL URL or key=value conninfo with its password hidden."""
    if "://" in url:
        return server_label("", url).removeprefix(" at ")
    words = [
        "password=***" if word.lower().startswith("password=") else word for word in url.split()
    ]
    return " ".join(words)


__all__ = [
    "DEFAULT_RETRY",
    "DEFAULT_TIMEOUTS",
    "LONG_TERM",
    "NO_RETRY",
    "SESSION",
    "SHORT_TERM",
    "RetryPolicy",
    "SocketDeadlines",
    "Timeouts",
    "call_with_retry",
    "redact_conninfo",
    "server_label",
]

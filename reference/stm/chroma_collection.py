"""Calls to a Chroma collection under the store's fault rules: a lost connection or a
timeout becomes `BackendUnavailable`, every call is retried under `RetryPolicy` (all the
store makes are safe to repeat), and a read racing a delete on the server is read again."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from typing import Any

import httpx
from chromadb.errors import ChromaError

from reference.errors import BackendUnavailable
from reference.resilience import SHORT_TERM, RetryPolicy, call_with_retry


@contextlib.contextmanager
def unavailable(server: str) -> Iterator[None]:
    """Turns a lost connection to a Chroma server into `BackendUnavailable`."""
    try:
        yield
    except (httpx.TransportError, ConnectionError) as exc:
        if isinstance(exc, BackendUnavailable):
            raise
        raise as_unavailable(exc, server) from exc


def as_unavailable(exc: Exception, server: str) -> BackendUnavailable:
    detail = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    if isinstance(exc, httpx.TimeoutException):
        detail = f"no reply in time ({detail})"
    return BackendUnavailable(detail, layer=SHORT_TERM, server=server, in_doubt=True)


def translated(server: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def wrap(call: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(call)
        def run(*args: Any, **kwargs: Any) -> Any:
            try:
                return call(*args, **kwargs)
            except (httpx.TransportError, ConnectionError) as exc:
                if isinstance(exc, BackendUnavailable):
                    raise
                raise as_unavailable(exc, server) from exc

        return run

    return wrap


#: A read that met a delete in flight on the server (another process purging, e.g. the
#: maintenance process's sweep): Chroma's plan found an id its index had just dropped.
#: The read is repeated at once; the delete has finished by then.
_READ_RACE = "Error finding id"
_READ_RACE_TRIES = 3
_READS = frozenset({"get", "query", "count"})


def reread_on_race(call: Callable[..., Any]) -> Callable[..., Any]:
    """`call` (a read), repeated up to `_READ_RACE_TRIES` times while Chroma reports the
    read/delete race (`_READ_RACE`); any other error, or the race persisting, is raised."""

    @functools.wraps(call)
    def run(*args: Any, **kwargs: Any) -> Any:
        for attempt in range(1, _READ_RACE_TRIES + 1):
            try:
                return call(*args, **kwargs)
            except ChromaError as exc:
                if _READ_RACE not in str(exc) or attempt == _READ_RACE_TRIES:
                    raise
        raise AssertionError("unreachable")

    return run


class RetryingCollection:
    """A Chroma collection whose calls are retried under the store's policy: the store
    calls only get, query, upsert, update and delete by id, all safe to repeat. A read
    that races a concurrent delete on the server is repeated at once (`_READ_RACE`)."""

    _CALLS = frozenset({"get", "query", "upsert", "update", "delete", "count"})

    def __init__(self, collection: Any, server: str, retry: RetryPolicy) -> None:
        self._inner = collection
        self._server = server
        self._retry = retry

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if name not in self._CALLS:
            return attr
        call = translated(self._server)(reread_on_race(attr) if name in _READS else attr)

        def retried(*args: Any, **kwargs: Any) -> Any:
            return call_with_retry(
                lambda: call(*args, **kwargs), idempotent=True, policy=self._retry
            )

        return retried

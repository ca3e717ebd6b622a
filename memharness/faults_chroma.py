"""The Chroma server of the fault tests: a `chroma run` subprocess (Chroma embedded in a
process cannot be faulted apart from it), its clients connected through a `TcpProxy`
whose `drop()` severs them (Chroma has no command that closes its clients' connections).
"""

from __future__ import annotations

import atexit
import contextlib
import socket
import subprocess
import sys
import threading
from pathlib import Path

from memharness.faults import WAIT_S, FaultError, ServerProcess, wait_until


class ChromaServer(ServerProcess):
    """A `chroma run` server in a subprocess, reached through a `TcpProxy` (`url`)."""

    kind = "Chroma"

    def __init__(self, path: Path, *, log: Path | None = None) -> None:
        self.path = Path(path)
        self.port = free_port()
        self.log = log or self.path.with_suffix(".log")
        self.proc: subprocess.Popen[bytes] | None = None
        self.proxy = TcpProxy(("127.0.0.1", self.port))
        #: What clients connect to: the proxy in front of the server.
        self.url = f"http://127.0.0.1:{self.proxy.port}"

    def main_pid(self) -> int | None:
        if self.proc is None or self.proc.poll() is not None:
            return None
        return self.proc.pid

    def start(self) -> None:
        chroma = Path(sys.executable).with_name("chroma")
        argv = [str(chroma), "run", "--path", str(self.path), "--host", "127.0.0.1"]
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [*argv, "--port", str(self.port)], stdout=log, stderr=subprocess.STDOUT
            )
        atexit.register(self.stop)  # not left running if the caller forgets (or crashes)
        wait_until(self._answers, f"{self.kind} on port {self.port} to answer")

    def stop(self) -> None:
        """Stop the server (killed, paused or not) and the proxy; for test teardown."""
        atexit.unregister(self.stop)
        if self.main_pid() is not None:
            with contextlib.suppress(FaultError):
                self.kill()
        self.proxy.close()

    def drop_connections(self) -> int:
        return self.proxy.drop()

    def _answers(self) -> bool:
        import httpx

        if self.proc is not None and self.proc.poll() is not None:
            raise FaultError(f"{self.kind} exited with {self.proc.returncode}; see {self.log}")
        try:
            url = f"http://127.0.0.1:{self.port}/api/v2/heartbeat"
            return httpx.get(url, timeout=1.0).status_code == 200
        except httpx.HTTPError:
            return False

    def _reap(self) -> None:
        if self.proc is not None:
            self.proc.wait(timeout=WAIT_S)


class TcpProxy:
    """Forwards 127.0.0.1:`port` to `target`; `drop()` closes every live connection."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._lock = threading.Lock()
        self._live: set[socket.socket] = set()
        self._closed = False
        threading.Thread(target=self._accept, daemon=True, name="tcp-proxy").start()

    def drop(self) -> int:
        """Sever every connection through the proxy (both ends); how many clients."""
        with self._lock:
            live, self._live = self._live, set()
        for sock in live:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        return len(live) // 2

    def close(self) -> None:
        self._closed = True
        self._listener.close()
        self.drop()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target, timeout=5.0)
                upstream.settimeout(None)
            except OSError:
                client.close()  # the server is down: the client sees the connection closed
                continue
            with self._lock:
                self._live.update((client, upstream))
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                dst.shutdown(socket.SHUT_WR)
            with self._lock:  # this direction is over: `drop` counts live connections
                self._live.discard(src)


def free_port() -> int:
    """A TCP port free on 127.0.0.1 at the time of asking."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


__all__ = ["ChromaServer", "TcpProxy", "free_port"]

"""A Chroma server in a subprocess (`chroma run`), for STM shared by several processes.

Chroma's embedded client keeps its index in the memory of one process: a second process
on the same directory would not see the first one's writes. A serving process and a
maintenance process beside it therefore share one `chroma run` server: start it with
`start_chroma_server(path)` and give both its `url` (`MEMH_CHROMA_URL`).

The server listens on a free port of 127.0.0.1 and keeps its data under `path`; its
output goes to `path.with_suffix(".log")`. `start_chroma_server` returns once the server
answers its heartbeat; `stop()` terminates it (SIGTERM, then SIGKILL after a grace time)
and is also run at interpreter exit, so a forgotten server does not outlive its owner.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType

import httpx

from reference.errors import BackendUnavailable

#: How long the server may take to answer its first heartbeat.
START_TIMEOUT_S = 60.0
#: How long `stop()` waits after SIGTERM before SIGKILL.
STOP_GRACE_S = 10.0


class ChromaServer:
    """A running `chroma run` subprocess; `url` is what clients connect to."""

    def __init__(self, proc: subprocess.Popen[bytes], port: int, path: Path, log: Path) -> None:
        self.proc = proc
        self.port = port
        self.path = path
        self.log = log
        self.url = f"http://127.0.0.1:{port}"

    @property
    def pid(self) -> int:
        return self.proc.pid

    def running(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> None:
        """Terminate the server and wait for it to exit (idempotent)."""
        atexit.unregister(self.stop)
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=STOP_GRACE_S)

    def __enter__(self) -> ChromaServer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"ChromaServer(url={self.url!r}, path={str(self.path)!r}, pid={self.proc.pid})"


def start_chroma_server(path: Path, *, timeout_s: float = START_TIMEOUT_S) -> ChromaServer:
    """Start `chroma run` on `path` and a free 127.0.0.1 port; return it once it answers.

    Raises `BackendUnavailable` if the `chroma` executable is missing, the server exits,
    or it does not answer within `timeout_s` (its log is named in the message).
    """
    path = Path(path).expanduser().resolve()
    path.mkdir(parents=True, exist_ok=True)
    log = path.with_suffix(".log")
    chroma = Path(sys.executable).with_name("chroma")
    if not chroma.exists():
        raise BackendUnavailable(f"Chroma server: no `chroma` executable beside {sys.executable}")
    # A port freed here may be taken before the server binds it: try a few.
    last_error = ""
    for _ in range(3):
        port = _free_port()
        argv = [str(chroma), "run", "--path", str(path), "--host", "127.0.0.1"]
        with open(log, "ab") as out:
            proc = subprocess.Popen(
                [*argv, "--port", str(port)],
                # Warnings and errors only: at its default level the server writes about
                # five lines per request (a 154 MB log over one step-load).
                env={**os.environ, "RUST_LOG": os.environ.get("RUST_LOG", "warn")},
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        server = ChromaServer(proc, port, path, log)
        atexit.register(server.stop)
        if _wait_until_up(server, timeout_s):
            return server
        last_error = (
            f"exited with {proc.returncode}"
            if proc.poll() is not None
            else f"no heartbeat within {timeout_s:g} s"
        )
        server.stop()
    raise BackendUnavailable(f"Chroma server on {path}: {last_error}; see {log}")


def _wait_until_up(server: ChromaServer, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    url = f"{server.url}/api/v2/heartbeat"
    while time.monotonic() < deadline:
        if not server.running():
            return False
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url, timeout=1.0).status_code == 200:
                return True
        time.sleep(0.05)  # polling a starting process, bounded by the deadline
    return False


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])

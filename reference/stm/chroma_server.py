"""A Chroma server in a subprocess (`chroma run`), for STM shared by several processes.

Chroma's embedded client keeps its index in the memory of one process: a second process
on the same directory would not see the first one's writes. A serving process and a
maintenance process beside it therefore share one `chroma run` server: start it with
`start_chroma_server(path)` and give both its `url` (`MEMH_CHROMA_URL`).

The server listens on a free port of 127.0.0.1 and keeps its data under `path`; its
output goes to `path.with_suffix(".log")`. `start_chroma_server` returns once the server
answers its heartbeat; `stop()` terminates it (SIGTERM, then SIGKILL after a grace time)
and is also run at interpreter exit, so a forgotten server does not outlive its owner.
`start_again()` starts a server that died on the same path and port (its clients' URL
stays valid); `chroma_server_of(path)` is the server this process started for a path.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType
from urllib.parse import quote

import httpx

from reference.errors import BackendUnavailable

#: How long the server may take to answer its first heartbeat.
START_TIMEOUT_S = 60.0
#: How long `stop()` waits after SIGTERM before SIGKILL.
STOP_GRACE_S = 10.0
#: The URL scheme of a server behind a Unix socket: `http+unix://<quoted socket path>`.
UNIX_SCHEME = "http+unix://"
#: What a heartbeat over the socket asks for (the host is not used).
UNIX_HEARTBEAT = "http://chroma/api/v2/heartbeat"
#: The port a private server listens on, inside its own network namespace.
_PRIVATE_PORT = 8000
#: The longest path a Unix socket may have (sun_path, with its NUL).
_MAX_SOCKET_PATH = 107


_started: dict[Path, ChromaServer] = {}


class ChromaServer:
    """A running `chroma run` subprocess; `url` is what clients connect to. With a
    `socket_path` the server is private (`reference.stm.chroma_private`): the process
    is its launcher, in a network namespace of its own, and `url` is `http+unix://`."""

    def __init__(
        self,
        proc: subprocess.Popen[bytes],
        port: int,
        path: Path,
        log: Path,
        socket_path: Path | None = None,
    ) -> None:
        self.proc = proc
        self.port = port
        self.path = path
        self.log = log
        self.socket_path = socket_path
        self.url = f"http://127.0.0.1:{port}" if socket_path is None else unix_url(socket_path)
        self.stopped = False

    @property
    def pid(self) -> int:
        return self.proc.pid

    def running(self) -> bool:
        return self.proc.poll() is None

    def start_again(self, *, timeout_s: float = START_TIMEOUT_S) -> None:
        """Start the server again on the same path and port once it has exited (after a
        crash or a kill); returns once it answers. `BackendUnavailable` if it does not."""
        if self.running():
            return
        self.proc = _launch(self.path, self.port, self.log, self.socket_path)
        if not _wait_until_up(self, timeout_s):
            error = f"exited with {self.proc.returncode}" if not self.running() else "no heartbeat"
            self.proc.kill()
            self.proc.wait()
            raise BackendUnavailable(f"Chroma server on {self.path} restarted: {error}")

    def stop(self) -> None:
        """Terminate the server and wait for it to exit (idempotent)."""
        atexit.unregister(self.stop)
        self.stopped = True
        if _started.get(self.path) is self:
            del _started[self.path]
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


def start_chroma_server(
    path: Path, *, timeout_s: float = START_TIMEOUT_S, private: bool = False
) -> ChromaServer:
    """Start `chroma run` on `path` and a free 127.0.0.1 port; return it once it answers.
    `private`: reachable only through the Unix socket `<path>.sock` (0600), from a
    network namespace of its own (`reference.stm.chroma_private`); where the machine
    allows no namespace, or the socket's path is too long, on 127.0.0.1 with a warning.

    Raises `BackendUnavailable` if the `chroma` executable is missing, the server exits,
    or it does not answer within `timeout_s` (its log is named in the message).
    """
    path = Path(path).expanduser().resolve()
    path.mkdir(parents=True, exist_ok=True)
    log = path.with_suffix(".log")
    socket_path = path.with_suffix(".sock") if private else None
    if socket_path is not None:
        from reference.stm.chroma_private import namespaces_available

        why = None
        if len(str(socket_path).encode()) > _MAX_SOCKET_PATH:
            why = f"its socket's path is over {_MAX_SOCKET_PATH} bytes"
        elif not namespaces_available():
            why = "this machine allows no network namespace (unshare --net)"
        if why is not None:
            logging.getLogger(__name__).warning(
                "Chroma server on 127.0.0.1, reachable by every local user: %s", why
            )
            socket_path = None
    chroma = Path(sys.executable).with_name("chroma")
    if not chroma.exists():
        raise BackendUnavailable(f"Chroma server: no `chroma` executable beside {sys.executable}")
    # A port freed here may be taken before the server binds it: try a few.
    last_error = ""
    for _ in range(3):
        port = _free_port() if socket_path is None else _PRIVATE_PORT
        server = ChromaServer(_launch(path, port, log, socket_path), port, path, log, socket_path)
        atexit.register(server.stop)
        if _wait_until_up(server, timeout_s):
            _started[path] = server
            return server
        last_error = (
            f"exited with {server.proc.returncode}"
            if server.proc.poll() is not None
            else f"no heartbeat within {timeout_s:g} s"
        )
        server.stop()
    raise BackendUnavailable(f"Chroma server on {path}: {last_error}; see {log}")


def chroma_server_of(path: Path) -> ChromaServer | None:
    """The server `start_chroma_server(path)` started in this process and not stopped."""
    return _started.get(Path(path).expanduser().resolve())


def unix_url(socket_path: Path) -> str:
    """The `http+unix://` URL of a server behind the Unix socket `socket_path`."""
    return UNIX_SCHEME + quote(str(socket_path), safe="")


def _launch(path: Path, port: int, log: Path, socket_path: Path | None) -> subprocess.Popen[bytes]:
    if socket_path is not None:
        from reference.stm.chroma_private import unshare_command

        package_root = str(Path(__file__).resolve().parents[2])
        env = {
            **_quiet_env(),
            "PYTHONPATH": os.pathsep.join(
                p for p in (package_root, os.environ.get("PYTHONPATH")) if p
            ),
        }
        argv = [
            *unshare_command(),
            sys.executable,
            "-m",
            "reference.stm.chroma_private",
            "--socket",
            str(socket_path),
            "--port",
            str(port),
            "--path",
            str(path),
            "--log",
            str(log),
        ]
        with open(log, "ab") as out:  # the launcher's own messages beside the server's
            return subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env
            )
    chroma = Path(sys.executable).with_name("chroma")
    argv = [str(chroma), "run", "--path", str(path), "--host", "127.0.0.1", "--port", str(port)]
    with open(log, "ab") as out:
        return subprocess.Popen(
            argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=_quiet_env()
        )


def _quiet_env() -> dict[str, str]:
    """Warnings and errors only: at its default level the server writes about five lines
    per request (a 154 MB log over one step-load)."""
    return {**os.environ, "RUST_LOG": os.environ.get("RUST_LOG", "warn")}


def _wait_until_up(server: ChromaServer, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    if server.socket_path is None:
        client, url = httpx.Client(timeout=1.0), f"{server.url}/api/v2/heartbeat"
    else:
        transport = httpx.HTTPTransport(uds=str(server.socket_path))
        client, url = httpx.Client(transport=transport, timeout=1.0), UNIX_HEARTBEAT
    with client:
        while time.monotonic() < deadline:
            if not server.running():
                return False
            with contextlib.suppress(httpx.HTTPError):
                if client.get(url).status_code == 200:
                    return True
            time.sleep(0.05)  # polling a starting process, bounded by the deadline
    return False


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])

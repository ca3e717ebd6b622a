"""Red team on a live `memharness serve` (embedded backends): the data directory stays
0700 once the servers run, a DELETE leaves no file under it holding the erased marker
(with and without --maintain), and SIGTERM with the embedded PostgreSQL killed exits
cleanly (issue 37, findings 3 and 7). The file search is `tests/test_redteam_files.py`'s."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from memharness.serve.auth import KeyStore
from tests.serve_support import KEY, auth
from tests.test_redteam_files import encodings, files_holding


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


#: A service that has not exited this long after SIGTERM hangs.
STOP_TIMEOUT_S = 60.0


@dataclass
class Live:
    """A `memharness serve` process on the embedded backends."""

    url: str
    headers: dict[str, str]
    data: Path
    process: subprocess.Popen[str]

    def stop(self) -> str:
        """SIGTERM, then its stderr once it exited; fails the test if it hangs."""
        self.process.terminate()
        try:
            return self.process.communicate(timeout=STOP_TIMEOUT_S)[1]
        except subprocess.TimeoutExpired:
            self.process.kill()
            err = self.process.communicate()[1]
            pytest.fail(f"serve still running {STOP_TIMEOUT_S:g} s after SIGTERM: {err[-2000:]}")


@contextmanager
def live_serve(maintain: str, *options: str) -> Iterator[Live]:
    repo = Path(__file__).parent.parent
    with tempfile.TemporaryDirectory(prefix="memh-rtf-") as root:
        data = Path(root) / "data"
        key = KeyStore(Path(root) / "keys.json").add("acme")
        env = {k: v for k, v in os.environ.items() if not k.startswith("MEMH_")}
        env.update(MEMH_ENCRYPTION_KEY=KEY, PYTHONPATH=str(repo))
        port = _free_port()
        process = subprocess.Popen(
            [sys.executable, "-m", "memharness.cli", "serve", "--port", str(port),
             "--backend", "embedded", "--embedder", "hashing", maintain,
             "--data-dir", str(data), "--keys", str(Path(root) / "keys.json"), *options],
            cwd=repo, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        live = Live(f"http://127.0.0.1:{port}", auth(key), data, process)
        try:
            deadline = time.monotonic() + 180
            while not _answers(live, 200):  # readiness: the first answer ends the wait
                if process.poll() is not None or time.monotonic() > deadline:
                    process.kill()
                    pytest.fail(f"serve did not start: {process.communicate()[1][-2000:]}")
                time.sleep(0.1)
            yield live
        finally:
            if process.poll() is None:
                process.kill()
                process.communicate()


def _answers(live: Live, status: int) -> bool:
    try:
        return httpx.get(f"{live.url}/v1/health", headers=live.headers).status_code == status
    except httpx.TransportError:
        return False


@pytest.mark.parametrize(
    ("maintain", "reclaim_within"),
    [("--no-maintain", "0"), ("--maintain", "0"), ("--maintain", "1h")],
)
def test_a_live_serve_keeps_its_data_dir_0700_and_cleans_its_files_after_delete(
    maintain: str, reclaim_within: str
) -> None:
    """`memharness serve` on the embedded backends (with --maintain: a `chroma run`
    server and a maintenance child beside it): the data directory is 0700 once the
    servers run (PostgreSQL, run as root, widens it when it starts) and after they stop;
    a DELETE leaves no file under it holding the user's marker: before it is answered
    with `--reclaim-within 0`, by the time the service has stopped with 1h."""
    marker = "Vrenkast" + uuid.uuid4().hex[:10]
    with live_serve(maintain, "--reclaim-within", reclaim_within) as live:
        data = live.data
        assert stat.S_IMODE(data.stat().st_mode) == 0o700
        turn = {
            "user_id": "pia",
            "session_id": "s1",
            "text": f"I always prefer {marker} Express for my deliveries.",
        }
        answer = httpx.post(f"{live.url}/v1/turn", headers=live.headers, json=turn)
        assert answer.status_code == 200, answer.text
        written = files_holding(data, encodings(marker))
        assert any(hit.endswith("chroma.sqlite3") for hit in written), written
        assert any(hit.startswith("pg/") for hit in written), written
        answer = httpx.delete(f"{live.url}/v1/users/pia", headers=live.headers, timeout=60)
        assert answer.status_code == 200, answer.text
        if reclaim_within == "0":
            assert files_holding(data, encodings(marker)) == []
        err = live.stop()
        assert live.process.returncode == 0, err[-2000:]
        assert "Traceback" not in err
        assert files_holding(data, encodings(marker)) == []
        assert stat.S_IMODE(data.stat().st_mode) == 0o700


def test_sigterm_with_postgresql_killed_exits_cleanly() -> None:
    """The fault: the embedded PostgreSQL SIGKILLed under a running service (as it runs
    by default: a maintenance child beside it), and SIGTERM at once, while it is down or
    being started again by the supervisor: the service ends with status 0 and no
    traceback. (Health while it is down: `test_redteam_supervision.py`.)"""
    with live_serve("--maintain") as live:
        postmaster = int((live.data / "pg" / "postmaster.pid").read_text().split()[0])
        os.kill(postmaster, signal.SIGKILL)
        err = live.stop()
        assert live.process.returncode == 0, err[-2000:]
        assert "Traceback" not in err


def _listening_sockets(net: str) -> set[str]:
    """Inodes of the TCP sockets listening in a network namespace (`/proc/<pid>/net`)."""
    inodes = set()
    for name in ("tcp", "tcp6"):
        for line in Path(net, name).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A":  # LISTEN
                inodes.add(fields[9])
    return inodes


def _sockets_of(pid: int) -> set[str]:
    found = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            target = os.readlink(fd)
            if target.startswith("socket:["):
                found.add(target[8:-1])
    return found


def test_the_chroma_server_is_reachable_by_its_socket_only() -> None:
    """Chroma's server has no authentication: beside the maintenance child it runs in a
    network namespace of its own, reached through a 0600 Unix socket in the 0700 data
    directory; none of its listening TCP sockets is on this machine's loopback."""
    import psutil

    with live_serve("--maintain") as live:
        sock = live.data / "chroma-server.sock"
        assert stat.S_ISSOCK(sock.stat().st_mode) and stat.S_IMODE(sock.stat().st_mode) == 0o600
        chroma = next(
            p
            for p in psutil.process_iter(["cmdline"])
            if p.info["cmdline"]
            and "run" in p.info["cmdline"]
            and str(live.data / "chroma-server") in p.info["cmdline"]
        )
        assert os.readlink(f"/proc/{chroma.pid}/ns/net") != os.readlink("/proc/self/ns/net")
        own = _sockets_of(chroma.pid)
        assert own & _listening_sockets(f"/proc/{chroma.pid}/net"), "it listens in its own"
        assert not own & _listening_sockets("/proc/self/net")
        turn = {"user_id": "pia", "session_id": "s1", "text": "I always prefer DHL Express."}
        answer = httpx.post(f"{live.url}/v1/turn", headers=live.headers, json=turn, timeout=60)
        assert answer.status_code == 200 and answer.json()["stored"]["stm"], answer.text
        err = live.stop()
        assert live.process.returncode == 0 and "Traceback" not in err, err[-2000:]

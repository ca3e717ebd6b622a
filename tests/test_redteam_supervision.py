"""Red team on the embedded servers' supervision (issue 37, finding 4).

In process, on a stand-in server whose starts fail a given number of times: the
supervisor starts a dead server again with growing delays, /v1/health names its layer
(and only it, without a path) while it is down, and the pending work runs after the
restart. Live, on `memharness serve` with the embedded backends: each server kill -9'd
(every process of it) is running and answering again within a bounded wait, the data
it acknowledged before the kill is still there (Redis, a cache, keeps none) and the
service's log names the layer. `bench/supervision.py` measures the same under load.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest

from memharness.faults import ServerProcess
from memharness.serve.auth import KeyStore
from memharness.serve.supervisor import Supervisor
from tests.serve_support import auth, client_for, memory_system
from tests.test_redteam_serve_files import live_serve

#: A bound on polling, never a wait for expiry.
WITHIN_S = 60.0


class FlakyServer(ServerProcess):
    """A server that is dead until started; its first `failures` starts fail."""

    kind = "Stand-in"

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.alive = True
        self.starts: list[float] = []
        self.allow = threading.Event()
        self.allow.set()

    def main_pid(self) -> int | None:
        return 1 if self.alive else None

    def start(self) -> None:
        self.allow.wait(WITHIN_S)
        self.starts.append(time.monotonic())
        if len(self.starts) <= self.failures:
            raise RuntimeError("shared memory block still in use")
        self.alive = True

    def drop_connections(self) -> int:
        return 0


def _poll(ready: Any, what: str) -> None:
    deadline = time.monotonic() + WITHIN_S
    while not ready():
        assert time.monotonic() < deadline, f"waited {WITHIN_S:g} s for {what}"
        time.sleep(0.01)  # polling a thread, bounded


def test_a_dead_server_is_started_again_with_backoff_and_health_names_its_layer(
    tmp_path: Path,
) -> None:
    server = FlakyServer(failures=3)
    restarted: list[str] = []
    supervisor = Supervisor(
        {"ltm": server},
        on_restart=restarted.append,
        check_every_s=0.01,
        first_backoff_s=0.02,
        max_backoff_s=0.08,
    )
    system = memory_system("rtsup", tmp_path)
    keys = KeyStore(tmp_path / "keys.json")
    key = keys.add("acme")
    with client_for(system, keys, servers_down=supervisor.down) as client:
        supervisor.start()
        try:
            assert client.get("/v1/health", headers=auth(key)).status_code == 200
            server.allow.clear()  # hold the first start: the layer is down meanwhile
            server.alive = False
            _poll(lambda: supervisor.down() == {"ltm"}, "the supervisor to see the death")
            answer = client.get("/v1/health", headers=auth(key))
            assert answer.status_code == 503
            assert answer.json()["layers"] == {"session": "ok", "stm": "ok", "ltm": "down"}
            assert "/" not in str(answer.json()["layers"])
            server.allow.set()
            _poll(lambda: restarted == ["ltm"], "the restart")
            assert supervisor.down() == set()
            assert client.get("/v1/health", headers=auth(key)).status_code == 200
        finally:
            supervisor.close()
    assert len(server.starts) == 4 and supervisor.restarts() == {"ltm": 1}
    gaps = [b - a for a, b in zip(server.starts, server.starts[1:], strict=False)]
    assert gaps[0] >= 0.02 and gaps[1] >= 0.04 and gaps[2] >= 0.08  # doubling, capped
    assert gaps[2] < 0.08 * 20  # capped at max_backoff_s (with a loaded machine's slack)


def test_a_closed_supervisor_starts_nothing() -> None:
    server = FlakyServer(failures=0)
    supervisor = Supervisor({"session": server}, check_every_s=0.01).start()
    supervisor.close()
    server.alive = False
    time.sleep(0.05)  # nothing may happen; there is nothing to wait for
    assert server.starts == []


def _server_pids(data: Path, server: str) -> list[int]:
    """The processes of one embedded server of a live service, its main one first."""
    if server == "redis":
        main = _redis_pid(data)
    elif server == "pg":
        main = int((data / "pg" / "postmaster.pid").read_text().split()[0])
    else:
        main = next(
            p.pid
            for p in psutil.process_iter(["cmdline"])
            if p.info["cmdline"]
            and "run" in p.info["cmdline"]
            and str(data / "chroma-server") in p.info["cmdline"]
        )
    process = psutil.Process(main)
    return [main, *(child.pid for child in process.children(recursive=True))]


def _redis_pid(data: Path) -> int:
    import json

    registry = json.loads((data / "redis" / "redis.db.settings").read_text())
    return int(Path(registry["pidfile"]).read_text().split()[0])


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def kill_server(data: Path, server: str) -> list[int]:
    """SIGKILL every process of the server (its main one stopped first, so it forks no
    new one meanwhile); returns their pids once they are gone."""
    pids = _server_pids(data, server)
    os.kill(pids[0], signal.SIGSTOP)
    pids = _server_pids(data, server)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    _poll(lambda: all(_gone(pid) for pid in pids), "the killed processes to go")
    return pids


@pytest.mark.parametrize(
    ("server", "layer"), [("redis", "session"), ("pg", "ltm"), ("chroma", "stm")]
)
def test_a_killed_embedded_server_is_restarted_and_keeps_what_it_acknowledged(
    server: str, layer: str
) -> None:
    with live_serve("--maintain") as live:
        url, headers = live.url, live.headers
        said = {
            "user_id": "pia",
            "session_id": "s1",
            "text": "I always prefer Zentrolux Express for my deliveries.",
        }
        first = httpx.post(f"{url}/v1/turn", headers=headers, json=said, timeout=60)
        assert first.status_code == 200, first.text
        killed = kill_server(live.data, server)
        seen: list[dict[str, Any]] = []
        deadline = time.monotonic() + WITHIN_S
        while True:
            try:
                answer = httpx.get(f"{url}/v1/health", headers=headers, timeout=30)
            except httpx.TransportError:
                answer = None
            if answer is not None:
                seen.append(answer.json())
                if answer.status_code == 200:
                    break
            assert time.monotonic() < deadline, f"not back within {WITHIN_S:g} s: {seen[-3:]}"
            time.sleep(0.05)  # polling a restart, bounded
        downs = [body["layers"] for body in seen if body.get("status") != "ok"]
        assert all(set(k for k, v in d.items() if v == "down") <= {layer} for d in downs), downs
        assert killed[0] not in _server_pids(live.data, server)  # a new process serves
        probe = {"user_id": "pia", "session_id": "s1", "query": "Zentrolux deliveries"}
        found = httpx.post(f"{url}/v1/recall", headers=headers, json=probe, timeout=60)
        assert found.status_code == 200, found.text
        texts = [hit["text"] for hit in found.json()["hits"]]
        assert any("Zentrolux" in text for text in texts), texts  # STM and LTM kept it
        again = httpx.post(f"{url}/v1/turn", headers=headers, json=said, timeout=60)
        assert again.status_code == 200, again.text
        err = live.stop()
    assert f"{layer} (" in err and "started again" in err, err[-2000:]
    assert live.process.returncode == 0, err[-3000:]

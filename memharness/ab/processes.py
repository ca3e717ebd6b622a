"""The A/B gate's processes: one arm's worker process, its environment, the shared servers.

A `WorkerProcess` runs `worker.py` with the arm's tree as cwd and alone on PYTHONPATH,
sends its configuration as the first line on stdin and reads JSON replies on a thread
(so a hung or dead worker becomes an `AbError` with a timeout, not a hang).
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO, Any

from memharness.ab.arms import AbError, ArmTree

WORKER = Path(__file__).with_name("worker.py")
#: Worker environment variables that would move an arm off its own data or servers.
_PLACEMENT = ("MEMH_BACKEND", "MEMH_DATA_DIR", "MEMH_PREFIX", "MEMH_CHROMA_URL", "MEMH_EMBEDDER")


class WorkerProcess:
    """One arm's worker process and its reply queue."""

    def __init__(self, arm: ArmTree, config: dict[str, Any], env: dict[str, str], log: IO[str]):
        self.arm = arm
        self.log = log
        self.process = subprocess.Popen(
            [sys.executable, str(WORKER)],
            cwd=arm.tree,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            bufsize=1,
        )
        self.exiting = False
        self.replies: queue.Queue[dict[str, Any] | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self._send(config)  # the first line: the worker's configuration

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.replies.put(json.loads(line))
        self.replies.put(None)

    def reply(self, timeout: float) -> dict[str, Any]:
        try:
            found = self.replies.get(timeout=timeout)
        except queue.Empty:
            raise AbError(f"{self.arm.name} worker: no reply in {timeout:.0f} s") from None
        if found is None:
            code = self.process.wait()
            raise AbError(f"{self.arm.name} worker exited ({code}); see {self.log.name}")
        if "error" in found:
            if "missing" in found:
                raise AbError(
                    f"the {self.arm.describe()} lacks {found['missing']}, which the A/B "
                    "worker needs (from the candidate tree); pick a newer baseline"
                )
            # E.g. a baseline whose API predates a call the worker makes (a TypeError).
            raise AbError(f"{self.arm.describe()}: {found['error']}; see {self.log.name}")
        return found

    def _send(self, payload: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(payload) + "\n")
        self.process.stdin.flush()

    def request(self, payload: dict[str, Any], timeout: float = 600.0) -> dict[str, Any]:
        self._send(payload)
        return self.reply(timeout)

    def ask_to_exit(self) -> None:
        """Send `exit` without waiting (so several workers wind down together)."""
        if self.process.poll() is None and not self.exiting:
            with contextlib.suppress(OSError, ValueError):
                self._send({"cmd": "exit"})
                self.exiting = True

    def stop(self) -> None:
        if self.process.poll() is None:
            with contextlib.suppress(AbError, OSError, ValueError):
                if not self.exiting:
                    self._send({"cmd": "exit"})
                self.reply(timeout=60)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def worker_env(arm: ArmTree, urls: dict[str, str]) -> dict[str, str]:
    """The parent's environment, minus anything that moves an arm off its own data; the
    arm's tree first (and alone) on PYTHONPATH; the shared servers' URLs."""
    env = {k: v for k, v in os.environ.items() if k not in _PLACEMENT and k != "PYTHONPATH"}
    env.pop("MEMH_REDIS_URL", None)
    env.pop("MEMH_PG_URL", None)
    env.update(urls)
    env.update(PYTHONPATH=str(arm.tree), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    return env


def start_servers(backend: str, workdir: Path, stack: contextlib.ExitStack) -> dict[str, str]:
    """The shared servers' URLs (embedded ones are stopped by `stack`); none for null."""
    if backend == "null":
        return {}
    redis_url = os.environ.get("MEMH_REDIS_URL")
    if redis_url is None:
        from reference.session.embedded_redis import start_embedded_redis

        server = start_embedded_redis(workdir / "redis")
        stack.callback(server.close)
        redis_url = server.url
    pg_url = os.environ.get("MEMH_PG_URL")
    if pg_url is None:
        from reference.ltm.embedded_pg import start_embedded_postgres

        handle = start_embedded_postgres(workdir / "pg")
        stack.callback(handle.close)
        pg_url = handle.url
    return {"MEMH_REDIS_URL": redis_url, "MEMH_PG_URL": pg_url}

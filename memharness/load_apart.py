"""`memharness load --apart`: the system under test in its own process, the generator in another.

In-process, the Locust users and the memory share one Python process: every turn's CPU
blocks the generator's event loop, so sends come late and the load process's CPU is both
the server's and the generator's. With `--apart`, each strategy's run starts

1. `memharness serve --strategy FILE` on a free local port, with a key made for the run
   (`<run dir>/service/keys.json`), on the servers the load shares (MEMH_REDIS_URL, ...):
   the service and, beside it, its maintenance child — the system under test;
2. the Locust process against it over HTTP (`loadtests/target_locustfile.py`): the
   generator only. It samples the service's process tree (`service`), the servers, and
   itself (`generator`, never part of D), and records each step's send lag
   (`loadtests/generator.py`).

The service is stopped with SIGTERM after the run; its output is `<run dir>/service.log`.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from loadtests.target import check_target
from memharness.child_process import stop_process
from memharness.load_contract import API_KEY_ENV, SERVICE_PID_ENV

__all__ = ["SERVICE_START_S", "Service", "service_apart"]

#: How long the service may take to answer its health check (model loading included).
SERVICE_START_S = 180.0
#: How long the service may take to stop after SIGTERM.
SERVICE_STOP_S = 30.0


@dataclass(frozen=True)
class Service:
    """A running `memharness serve`: where it listens, its key and its pid."""

    url: str
    key: str
    pid: int

    def environment(self, env: Mapping[str, str]) -> dict[str, str]:
        """The Locust process's environment: the key (never on a command line) and the
        service's pid to sample."""
        return {**env, API_KEY_ENV: self.key, SERVICE_PID_ENV: str(self.pid)}


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _log_tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


@contextmanager
def service_apart(
    run_dir: Path, strategy_file: Path, env: Mapping[str, str], *, start_s: float = SERVICE_START_S
) -> Iterator[Service]:
    """Start `memharness serve` under `strategy_file` for one run; yield it once it
    answers its health check; stop it at the end. Raises RuntimeError (with the log's
    tail) when it exits or does not answer within `start_s`."""
    from memharness.serve.auth import KeyStore

    data_dir = run_dir / "service"
    data_dir.mkdir(parents=True, exist_ok=True)
    keys = data_dir / "keys.json"
    key = KeyStore(keys).add("load")
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    command = [
        sys.executable, "-m", "memharness.cli", "serve", "--port", str(port),
        "--strategy", str(strategy_file), "--keys", str(keys), "--data-dir", str(data_dir),
    ]  # fmt: skip
    log_path = run_dir / "service.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(command, env=dict(env), stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + start_s
        problem = check_target(url, key, timeout_s=2.0)
        while problem is not None:
            if process.poll() is not None:
                raise RuntimeError(
                    f"memharness serve exited with {process.returncode} before answering; "
                    f"{log_path}:\n{_log_tail(log_path)}"
                )
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"memharness serve did not answer {url} within {start_s:g} s ({problem}); "
                    f"{log_path}:\n{_log_tail(log_path)}"
                )
            time.sleep(0.5)
            problem = check_target(url, key, timeout_s=2.0)
        yield Service(url, key, process.pid)
    finally:
        stop_process(process, SERVICE_STOP_S)

"""The strategy's background work beside `memharness serve`, as `memharness load` runs it.

A service measured without its sweeps is a memory nobody deploys: expired records take
space, sliding windows and archival never act. So `serve` runs the strategy's background
work by default (`--no-maintain` leaves it to a maintenance process the operator runs):

- on servers (the embedded default, or URLs): the service's engine hands what it
  buffers (activity, accesses, touched sessions) to the shared stores every second
  (`ServingBackground`), and a `memharness maintain` child process runs the sweeps,
  consolidation and the event stream's consumer on the same servers and namespace
  (`MEMH_PREFIX`), on the wall clock. The embedded servers are started once here, for
  both processes (`shared_servers`: the embedded Chroma client cannot be shared);
- on the in-memory backend no other process can reach the stores: a thread of the
  service sweeps them every `sweep_every_s` on the service's clock.

With `--virtual-time` the clock moves only with requests: the in-memory sweeper follows
it; a maintenance process (wall clock) would not, so none is started and `serve` says so.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from memharness.child_process import stop_process
from reference.errors import MemoryStoreError
from reference.settings import Settings
from reference.system import MemorySystem

log = logging.getLogger(__name__)

#: How often the serving side writes its buffers for the maintenance process (wall s).
SERVING_INTERVAL_S = 1.0
#: How long a stopping maintenance process may take to finish its batch (wall s).
MAINTAIN_STOP_S = 30.0


class InProcessSweeps:
    """A thread sweeping an in-memory system every `every_s` wall seconds."""

    def __init__(self, system: MemorySystem, *, every_s: float) -> None:
        self.system = system
        self.every_s = every_s
        self.sweeps = 0
        self.errors = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="serve-sweeps", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            try:
                self.system.sweep()
                self.sweeps += 1
            except MemoryStoreError:  # the next sweep tries again; the count is reported
                self.errors += 1
                log.exception("serve: a sweep failed")

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def maintenance_command(strategy: str, replica: str) -> list[str]:
    return [sys.executable, "-m", "memharness.cli", "maintain", "--strategy", strategy,
            "--replica", replica]  # fmt: skip


@contextmanager
def maintenance_process(strategy: str, log_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """`memharness maintain` as a child (environment inherited: the same servers and
    prefix), stopped with SIGTERM (it finishes its batch) when the service stops."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("wb") as out:
        child = subprocess.Popen(
            maintenance_command(strategy, "serve-m0"), stdout=out, stderr=subprocess.STDOUT
        )
    try:
        yield child
    finally:
        stop_process(child, MAINTAIN_STOP_S)


@contextmanager
def background_work(
    system: MemorySystem,
    settings: Settings,
    strategy: str,
    *,
    virtual_time: bool,
    sweep_every_s: float,
) -> Iterator[str]:
    """Run the strategy's background work while the service runs (module docstring);
    yields a line saying what runs."""
    if settings.backend == "memory":
        sweeps = InProcessSweeps(system, every_s=sweep_every_s)
        sweeps.start()
        try:
            yield f"in-process sweeps every {sweep_every_s:g} s (in-memory backend)"
        finally:
            sweeps.stop()
        return
    from reference.maintenance.serving import ServingBackground

    with ServingBackground(system, interval_s=SERVING_INTERVAL_S):
        if virtual_time:
            yield (
                "no maintenance process: --virtual-time moves the clock with requests, a "
                "maintenance process would sweep on the wall clock (run one yourself or none)"
            )
            return
        log_path = settings.data_dir / "serve-maintain.log"
        with maintenance_process(strategy, log_path) as child:
            yield f"memharness maintain (pid {child.pid}, log {log_path}) on the same servers"

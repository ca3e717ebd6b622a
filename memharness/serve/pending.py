"""Work a failed request left to finish: erasures begun, STM records of failed turns.

A request that fails part-way (a layer's server down: 503) must not leave half of
itself where a later read sees it. Two cases need work after the answer:

- **an erasure** (`DELETE /v1/users/{id}`): its steps run layer by layer (LTM, STM,
  sessions), so a layer failing in the middle leaves the others' records. An entry is
  written before the first step and removed once every step has run; while it exists
  the erasure is retried (each step is idempotent) at the service's start, after a
  supervised server's restart and every `retry_every_s` seconds, until it completes.
- **a failed turn's STM record**, when the turn failed after storing it and STM failed
  too when the turn took it back (`MemorySystem.turn`: `stm_record_left`); it is deleted
  by the same retries.

Each entry is one file under `<data dir>/pending/` (0600 in the 0700 data directory),
written atomically, named by a digest; it holds the scoped user id (and the record id),
which the retry needs, and nothing the user said. It is unlinked once the work is done.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Pending", "PendingWork", "RetryLoop"]

log = logging.getLogger("memharness.serve")

DIRECTORY = "pending"


@dataclass(frozen=True, slots=True)
class PendingWork:
    """One entry: erase `user`, or delete STM record `record_id` of `user`."""

    kind: str  # "erase_user" | "stm_record"
    user: str
    record_id: str | None = None

    def name(self) -> str:
        text = f"{self.kind}\0{self.user}\0{self.record_id or ''}"
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32] + ".json"


class Pending:
    """The entries under `<data dir>/pending/` (see module)."""

    def __init__(self, data_dir: Path) -> None:
        self.directory = Path(data_dir) / DIRECTORY
        self._lock = threading.Lock()

    def add(self, work: PendingWork) -> None:
        """Record `work` (durably: written, synced, renamed into place)."""
        with self._lock:
            self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
            final = self.directory / work.name()
            temporary = final.with_suffix(".tmp")
            body = {"kind": work.kind, "user": work.user, "record_id": work.record_id}
            with open(temporary, "w", encoding="utf-8") as out:
                json.dump(body, out)
                out.flush()
                os.fsync(out.fileno())
            os.replace(temporary, final)

    def done(self, work: PendingWork) -> None:
        with self._lock:
            (self.directory / work.name()).unlink(missing_ok=True)

    def entries(self) -> list[PendingWork]:
        """Every entry on disk; one that cannot be read is logged and skipped."""
        if not self.directory.is_dir():
            return []
        found = []
        for path in sorted(self.directory.glob("*.json")):
            try:
                body = json.loads(path.read_text(encoding="utf-8"))
                found.append(PendingWork(str(body["kind"]), str(body["user"]), body["record_id"]))
            except (OSError, ValueError, KeyError, TypeError) as exc:
                log.error("serve: pending entry %s cannot be read: %s", path.name, exc)
        return found


#: Seconds between two tries at the pending work while any is left.
RETRY_EVERY_S = 5.0


class RetryLoop:
    """A thread calling `complete()` every `every_s` seconds while `pending` has entries."""

    def __init__(
        self, complete: Callable[[], int], pending: Pending, *, every_s: float = RETRY_EVERY_S
    ) -> None:
        self.complete = complete
        self.pending = pending
        self.every_s = every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="pending-retry")

    def start(self) -> RetryLoop:
        self._thread.start()
        return self

    def close(self) -> None:
        self._stop.set()
        self._thread.join(60.0)

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            if self.pending.entries():
                try:
                    self.complete()
                except Exception as exc:  # logged; the next round tries again
                    log.warning("serve: completing pending work failed: %s", exc)

"""After an erasure, the erased values removed from the embedded servers' files.

The service runs `reference.forgetting.reclaim.reclaim_files` after erasures (DELETE
/v1/users/{id}; a forget command, on /v1/forget or inside a turn, that forgot
something). An erasure is answered at once: its rows, records and keys are gone before
the answer, so no read sees them; the reclaim, which rewrites whole tables and files
under their locks, follows within `within_s` of the first erasure not yet reclaimed
(every erasure of that window shares it), run by a thread of its own (`start`), and once
more when the service stops. With `within_s` 0 each erasure is reclaimed before it is
answered. The file `<data dir>/cleanup-pending` (it names no user) marks the cleanup
pending: from before a DELETE touches a store, and from the moment a forget command has
run (a command is only known once the turn has parsed it), until a reclaim begun after
the erasure ends. A service that starts and finds the mark runs the reclaim first, so a
crash or a server down between the erasure and the reclaim is retried at the next start
(and at the next erasure). A reclaim that fails is logged; the erasure itself stands.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path

from reference.forgetting.reclaim import Reclaimed, reclaim_files
from reference.keys import Namespace

__all__ = ["PENDING_NAME", "FileCleanup"]

log = logging.getLogger("memharness.serve")

PENDING_NAME = "cleanup-pending"
#: How often the reclaim thread looks for a reclaim that is due, at most.
POLL_S = 5.0


class FileCleanup:
    """The reclaim after each erasure, kept pending on disk until done (see module)."""

    def __init__(
        self,
        *,
        data_dir: Path,
        pg_url: str | None,
        namespace: Namespace,
        own_postgres: bool = True,
        within_s: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`own_postgres`: the server at `pg_url` is the embedded one, whose WAL the
        reclaim cycles; a server given by URL gets the VACUUM only. `within_s`: how long
        after an erasure its reclaim may wait (0: before the erasure is answered)."""
        self.data_dir = Path(data_dir)
        self.pending = self.data_dir / PENDING_NAME
        self.pg_url = pg_url
        self.own_postgres = own_postgres
        self.namespace = namespace
        self._running = threading.Lock()  # one reclaim at a time
        self._counts = threading.Lock()
        self._begun = 0  # erasures begun
        self._active = 0  # erasures begun and not ended
        self._ended = 0  # erasures ended: the ticket of the last one
        self._covered = 0  # every erasure up to this ticket is reclaimed
        self._last: Reclaimed | None = None
        self.within_s = within_s
        self._clock = clock
        self._waiting_since: float | None = None  # the first erasure not yet reclaimed
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def erasure_begins(self) -> None:
        """Mark the cleanup pending before an erasure touches a store."""
        with self._counts:
            self._begun += 1
            self._active += 1
            self.pending.touch()

    def erasure_ends(self) -> int:
        """The erasure's ticket, for `reclaim`."""
        with self._counts:
            self._active -= 1
            self._ended += 1
            if self._waiting_since is None:
                self._waiting_since = self._clock()
            return self._ended

    @property
    def deferred(self) -> bool:
        """Whether erasures are answered before their reclaim (`within_s` > 0)."""
        return self.within_s > 0

    def after_erasure(self) -> Reclaimed | None:
        """For an erasure found once done (a forget command inside a turn): marked, then
        reclaimed."""
        self.erasure_begins()
        return self.settle(self.erasure_ends())

    def settle(self, ticket: int) -> Reclaimed | None:
        """After the erasure of `ticket`: its reclaim now, or, when `deferred`, none here
        (the thread runs it within `within_s`)."""
        return None if self.deferred else self.reclaim(ticket)

    def reclaim(self, ticket: int | None = None) -> Reclaimed | None:
        """Reclaim now, unless a reclaim begun after the erasure of `ticket` ended has
        already run (erasures that end while a reclaim runs share the next one). The
        pending mark goes only if no erasure was under way when the reclaim began and
        none began since. None (and the mark stays) when a server fails: logged,
        retried later."""
        with self._running:
            with self._counts:
                if ticket is not None and ticket <= self._covered:
                    return self._last
                ended = self._ended
                begun = self._begun if self._active == 0 else -1
                began_at = self._clock()
            try:
                done = reclaim_files(
                    data_dir=self.data_dir,
                    pg_url=self.pg_url,
                    namespace=self.namespace,
                    pg_wal=self.own_postgres,
                )
            except Exception as exc:  # a server down or busy: the mark stays
                log.warning("serve: the files' cleanup after an erasure failed: %s", exc)
                return None
            with self._counts:
                self._covered = max(self._covered, ended)
                self._last = done
                # erasures that ended while this ran wait from its start at the latest
                self._waiting_since = None if self._covered >= self._ended else began_at
                if self._begun == begun:
                    self.pending.unlink(missing_ok=True)
            return done

    def due(self) -> bool:
        """Whether the first erasure not yet reclaimed ended `within_s` ago or more."""
        with self._counts:
            since = self._waiting_since
        return since is not None and self._clock() - since >= self.within_s

    def reclaim_if_due(self) -> Reclaimed | None:
        """The reclaim, if `due`; None otherwise."""
        return self.reclaim() if self.due() else None

    def start(self) -> None:
        """Reclaim in a thread of its own, within `within_s` of each erasure (see module)."""
        if self._thread is not None:
            return
        poll_s = min(POLL_S, self.within_s)
        self._stop.clear()

        def loop() -> None:
            while not self._stop.wait(poll_s):
                self.reclaim_if_due()

        self._thread = threading.Thread(target=loop, name="memh-reclaim", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop the thread, then reclaim what is still waiting: the service stops clean."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        with self._counts:
            waiting = self._waiting_since is not None
        if waiting:
            self.reclaim()

    def resume(self) -> Reclaimed | None:
        """At start: the reclaim a crash left pending, if any."""
        return self.reclaim() if self.pending.exists() else None

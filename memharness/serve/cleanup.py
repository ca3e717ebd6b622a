"""After an erasure, the erased values removed from the embedded servers' files.

The service runs `reference.forgetting.reclaim.reclaim_files` after every erasure
(DELETE /v1/users/{id}; a forget command, on /v1/forget or inside a turn, that forgot
something) before it answers. The file `<data dir>/cleanup-pending` (it names no user)
marks the cleanup pending: from before a DELETE touches a store, and from the moment a
forget command has run (a command is only known once the turn has parsed it), until a
reclaim begun after the erasure ends. A service that starts and finds the mark runs the
reclaim first, so a crash or a server down between the erasure and the reclaim is
retried at the next start (and at the next erasure). A reclaim that fails is logged;
the erasure itself stands.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from reference.forgetting.reclaim import Reclaimed, reclaim_files
from reference.keys import Namespace

__all__ = ["PENDING_NAME", "FileCleanup"]

log = logging.getLogger("memharness.serve")

PENDING_NAME = "cleanup-pending"


class FileCleanup:
    """The reclaim after each erasure, kept pending on disk until done (see module)."""

    def __init__(
        self,
        *,
        data_dir: Path,
        pg_url: str | None,
        namespace: Namespace,
        own_postgres: bool = True,
    ) -> None:
        """`own_postgres`: the server at `pg_url` is the embedded one, whose WAL the
        reclaim cycles; a server given by URL gets the VACUUM only."""
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
            return self._ended

    def after_erasure(self) -> Reclaimed | None:
        """For an erasure found once done (a forget command inside a turn): marked, then
        reclaimed."""
        self.erasure_begins()
        return self.reclaim(self.erasure_ends())

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
                if self._begun == begun:
                    self.pending.unlink(missing_ok=True)
            return done

    def resume(self) -> Reclaimed | None:
        """At start: the reclaim a crash left pending, if any."""
        return self.reclaim() if self.pending.exists() else None

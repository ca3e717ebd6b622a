"""Connections and transactions of `PostgresLongTermStore` (a mixin): the pool, its
lifecycle, and how failures of the server become `BackendUnavailable`.

Lifecycle: build one per process (or Ray actor) from a conninfo/URL; nothing connects
until `setup()`, which applies the migrations on a connection of its own (creating the
`vector` extension first), reads the pgvector version, and then opens the pool, whose
connections register pgvector's adapters as they open (they need the extension).
`dispose()` closes the pool. Each public call is one transaction on one pooled
connection, so a failure anywhere rolls back the change together with its audit row.

Faults (`reference.resilience`): connections open within `Timeouts.connect_s`; a
statement is bounded by the server's `statement_timeout` and, for a server that answers
nothing (paused, or a lost network), by a client-side deadline that shuts the socket down
after `Timeouts.operation_s`; the pool waits at most that long for a connection. Failures
are raised as `BackendUnavailable("long-term memory: PostgreSQL at <url>: ...")`. A
transaction that failed before its commit was sent was rolled back, so it is retried
whatever it does (`RetryPolicy`); one whose commit got no answer is `in_doubt` and is
retried only if repeating it is harmless (reads, deletes, sweeps, erasure), never an
upsert (a second version and audit row) or a touch (access counts). A fact and its audit
row are written in one transaction: a kill in the middle leaves both or neither.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from typing import Any, TypeVar

import psycopg
from psycopg import sql
from psycopg.pq import TransactionStatus
from psycopg_pool import ConnectionPool, PoolClosed, PoolTimeout

from reference.errors import BackendUnavailable, MemoryStoreError
from reference.keys import Namespace
from reference.ltm.embedder_record import check_embedder
from reference.ltm.migrations import (
    MIGRATIONS,
    HnswParams,
    applied_versions,
    apply_migrations,
    drop_schema,
)
from reference.resilience import (
    LONG_TERM,
    RetryPolicy,
    SocketDeadlines,
    Timeouts,
    call_with_retry,
    redact_conninfo,
)
from reference.text_interfaces import Embedder

F = TypeVar("F", bound=Callable[..., Any])

#: SQLSTATEs that mean the server or the connection went away, or a statement outlived
#: `statement_timeout`: 08 connection exceptions, 57P01-03 shutdowns (pg_terminate_backend
#: is 57P01), 57014 query canceled.
_GONE = ("57P01", "57P02", "57P03", "57014")


def pg_guarded(*, idempotent: bool | Callable[[dict[str, Any]], bool]) -> Callable[[F], F]:
    """Run a primitive (one transaction) under the store's retry policy: retried when it
    failed before its commit, or when repeating it is harmless (`idempotent`, or a
    function of the call's keyword arguments saying so)."""

    def wrap(method: F) -> F:
        @functools.wraps(method)
        def run(self: Any, *args: Any, **kwargs: Any) -> Any:
            safe = idempotent(kwargs) if callable(idempotent) else idempotent
            return call_with_retry(
                lambda: method(self, *args, **kwargs),
                idempotent=safe,
                policy=self.retry,
                on_retry=self._suspect,
            )

        return run  # type: ignore[return-value]

    return wrap


class PostgresConnections:
    """The pool and transactions of a PostgreSQL store; `_init_connections` from its
    `__init__`, `setup()` before use."""

    namespace: Namespace
    embedder: Embedder

    def _init_connections(
        self,
        url: str,
        *,
        pool_size: int,
        hnsw: HnswParams,
        ef_search: int,
        exact_search: bool | None,
        timeouts: Timeouts,
        retry: RetryPolicy,
    ) -> None:
        self._url = url
        self.server = f"PostgreSQL at {redact_conninfo(url)}"
        self.timeouts = timeouts
        self.retry = retry
        self._deadlines = SocketDeadlines(timeouts.operation_s)
        #: Until then (monotonic), pooled connections are checked before use: set after
        #: a failure, when the pool may still hold connections the server dropped.
        self._check_until = 0.0
        self._renewed_at = 0.0
        self._pool_size = pool_size
        self._ef_search = ef_search
        self._hnsw = hnsw
        self._exact_search = exact_search
        self._connect_timeout = max(2, round(timeouts.connect_s))  # libpq: whole seconds, >= 2
        self._pool: ConnectionPool[psycopg.Connection[Any]] | None = None
        self._setup_lock = threading.Lock()
        self.pgvector_version: tuple[int, ...] | None = None
        self._read_only = False  # `open_for_reading`: every statement read-only

    # ------------------------------------------------------------------ lifecycle
    def setup(self) -> None:
        """Apply pending migrations, then open the pool; idempotent and safe in parallel."""
        with self._setup_lock:
            try:
                with psycopg.connect(self._url, connect_timeout=int(self._connect_timeout)) as conn:
                    apply_migrations(conn, self.namespace, self._hnsw)
                    check_embedder(conn, self.namespace, self.embedder.identity)
                    row = conn.execute(
                        "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
                    ).fetchone()
            except psycopg.OperationalError as exc:
                raise self._unavailable(f"setup: {exc}") from exc
            assert row is not None  # the first migration created the extension
            self.pgvector_version = tuple(int(p) for p in str(row[0]).split(".")[:3])
            if self._exact_search is None:
                self._exact_search = self.pgvector_version < (0, 8)
            self._open_pool()

    def open_for_reading(self) -> None:
        """Open the pool without applying migrations, every connection read-only: for a
        reader (`memharness audit`) that must not change what it reads. Fails naming
        the namespace when it has no tables, or a schema older than this code's."""
        with self._setup_lock:
            try:
                with psycopg.connect(self._url, connect_timeout=int(self._connect_timeout)) as conn:
                    conn.read_only = True
                    versions = applied_versions(conn, self.namespace)
            except psycopg.errors.UndefinedTable:
                raise MemoryStoreError(
                    f"no long-term memory under the prefix {self.namespace.prefix!r} in "
                    f"{self.server}"
                ) from None
            except psycopg.OperationalError as exc:
                raise self._unavailable(f"open: {exc}") from exc
            current = max(m.version for m in MIGRATIONS)
            if max(versions, default=0) < current:
                raise MemoryStoreError(
                    f"the long-term memory under the prefix {self.namespace.prefix!r} has "
                    f"schema version {max(versions, default=0)}, this code reads {current}: "
                    "start the reference on it once (its setup migrates the schema)"
                )
            self._read_only = True
            self._open_pool()

    def _open_pool(self) -> None:
        if self._pool is None:
            pool = self._new_pool()
            try:
                pool.open(wait=True, timeout=self._connect_timeout)
            except PoolTimeout as exc:
                pool.close()
                raise self._unavailable(f"the connection pool did not open: {exc}") from exc
            self._pool = pool

    def _new_pool(self) -> ConnectionPool[psycopg.Connection[Any]]:
        return ConnectionPool(
            self._url,
            min_size=1,
            max_size=self._pool_size,
            configure=self._configure,
            open=False,
            name=f"memh-ltm-{self.namespace.prefix}",
            kwargs=self._connection_kwargs(),
            timeout=self.timeouts.operation_s,
            check=self._check,
        )

    def _renew_pool(self) -> None:
        """Replace a pool that could not hand out a connection by a new one, at most once
        a second. The old pool retries a lost server with exponential backoff (1, 2, 4...
        seconds, for 5 minutes), so after a restart it may wait long before trying; a new
        pool connects at once. Connections in use finish on the old pool, which closes."""
        with self._setup_lock:
            old = self._pool
            now = time.monotonic()
            if old is None or now - self._renewed_at < 1.0:
                return
            self._renewed_at = now
            self._pool = self._new_pool()
            self._pool.open(wait=False)
        threading.Thread(target=old.close, kwargs={"timeout": 1.0}, daemon=True).start()

    def _connection_kwargs(self) -> dict[str, Any]:
        """Timeouts of the pool's connections (`statement_timeout` is set by `_configure`).
        Keepalives and tcp_user_timeout bound a lost TCP peer (libpq ignores them on a Unix
        socket, where the deadline does)."""
        op_ms = int(self.timeouts.operation_s * 1000)
        return {
            "connect_timeout": self._connect_timeout,
            "keepalives": 1,
            "keepalives_idle": max(1, round(self.timeouts.operation_s)),
            "keepalives_interval": 1,
            "keepalives_count": 3,
            "tcp_user_timeout": op_ms,
        }

    def _check(self, conn: psycopg.Connection[Any]) -> None:
        """The pool's check of a connection it hands out, after a failure only: one
        round trip under the deadline, and a dead connection is replaced."""
        if time.monotonic() < self._check_until:
            with self._deadlines.guard(_fileno(conn)):
                ConnectionPool.check_connection(conn)

    def _suspect(self, exc: BackendUnavailable) -> None:
        """Before a retry: check pooled connections for a while (the server may have
        dropped them all), and renew a pool that had none to give."""
        self._check_until = time.monotonic() + self.retry.budget_s + self.timeouts.operation_s
        if isinstance(exc.__cause__, PoolTimeout | PoolClosed):
            self._renew_pool()

    def _unavailable(self, detail: str, *, in_doubt: bool = False) -> BackendUnavailable:
        return BackendUnavailable(detail, layer=LONG_TERM, server=self.server, in_doubt=in_doubt)

    @pg_guarded(idempotent=True)
    def drop(self) -> None:
        with self._transaction() as cur:
            drop_schema(cur.connection, self.namespace)
        self.dispose()

    def dispose(self) -> None:
        """Close the pool; `setup()` opens a new one."""
        with self._setup_lock:
            if self._pool is not None:
                self._pool.close()
                self._pool = None
            self._deadlines.close()
            self._deadlines = SocketDeadlines(self.timeouts.operation_s)

    @pg_guarded(idempotent=True)
    def schema_versions(self) -> list[int]:
        """Migration versions recorded for this namespace (inspection, tests)."""
        with self._transaction() as cur:
            return applied_versions(cur.connection, self.namespace)

    def _configure(self, conn: psycopg.Connection[Any]) -> None:
        from pgvector.psycopg import register_vector

        register_vector(conn)
        if self._read_only:  # every transaction, autocommit statements included
            conn.execute("SET default_transaction_read_only = on")
        conn.execute(sql.SQL("SET hnsw.ef_search = {}").format(sql.Literal(self._ef_search)))
        # A SET, not a startup option: poolers such as pgbouncer refuse unknown ones.
        op_ms = int(self.timeouts.operation_s * 1000)
        conn.execute(sql.SQL("SET statement_timeout = {}").format(sql.Literal(op_ms)))
        if not self._exact_search and (self.pgvector_version or ()) >= (0, 8):
            conn.execute("SET hnsw.iterative_scan = strict_order")
        conn.commit()  # the pool discards connections left inside a transaction

    @contextmanager
    def _transaction(
        self, *, read: bool = False, single: bool = False, pipelined: bool = False
    ) -> Iterator[psycopg.Cursor[Any]]:
        """One transaction: committed when the block ends, rolled back if it raises.
        Failures of the server or the connection become `BackendUnavailable`, `in_doubt`
        if they came during the commit.

        `read`: the block runs read-only statements (one, or several in one pipeline), in
        autocommit (each its own snapshot, as in a transaction of its own): one round trip
        instead of three (BEGIN, the statement, COMMIT). A `SELECT 1` over TCP to a local
        PostgreSQL 15: 0.51 ms in a transaction, 0.22 in autocommit. `single`: the block
        runs one write statement, in autocommit too (one statement is atomic on its own);
        a failure while it runs is in doubt, as a commit's. `pipelined`: the transaction
        in pipeline mode, so BEGIN goes with the first statement and COMMIT with the
        last (two round trips fewer; a statement whose result is fetched still waits)."""
        pool = self._pool
        if pool is None:
            raise MemoryStoreError("PostgresLongTermStore: call setup() before use")
        committing = False
        fired = [False]
        try:
            with pool.connection() as conn, self._deadlines.guard(_fileno(conn)) as fired:
                if read or single:
                    committing = single
                    conn.autocommit = True
                    try:
                        with conn.cursor() as cur:
                            yield cur
                    finally:
                        _end_autocommit(conn)
                    return
                with conn.pipeline() if pipelined else nullcontext():
                    with conn.cursor() as cur:
                        yield cur
                    committing = True
                    conn.commit()
        except PoolTimeout as exc:
            raise self._unavailable(
                f"no connection within {self.timeouts.operation_s:g} s ({exc})"
            ) from exc
        except PoolClosed as exc:  # renewed (`_renew_pool`) while this call waited
            raise self._unavailable(f"the connection pool was replaced ({exc})") from exc
        except psycopg.OperationalError as exc:
            state = exc.sqlstate
            if state is not None and not state.startswith("08") and state not in _GONE:
                raise
            detail = str(exc).strip() or type(exc).__name__
            if fired[0]:
                detail = f"no reply within {self.timeouts.operation_s:g} s ({detail})"
            if committing:
                detail = f"the commit's outcome is unknown: {detail}"
            raise self._unavailable(detail, in_doubt=committing) from exc


def _fileno(conn: psycopg.Connection[Any]) -> Callable[[], int]:
    """The connection's socket, or -1 once it is closed (for `SocketDeadlines`)."""

    def fileno() -> int:
        try:
            return int(conn.pgconn.socket)
        except psycopg.OperationalError:
            return -1

    return fileno


def _end_autocommit(conn: psycopg.Connection[Any]) -> None:
    """Give a read's connection back out of autocommit; one left mid-statement (the read
    was interrupted: a killed greenlet, a timeout) is closed instead, which the pool
    replaces. Raising here would replace the interruption with a ProgrammingError
    ("can't change 'autocommit' now"), and a load test's user killed at the end of its
    run would take that for a failed task and keep running."""
    if conn.closed:
        return
    if conn.info.transaction_status is TransactionStatus.IDLE:
        conn.autocommit = False
    else:
        conn.close()

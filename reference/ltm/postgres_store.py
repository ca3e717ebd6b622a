"""The PostgreSQL + pgvector long-term store.

Lifecycle: build one per process (or Ray actor) from a conninfo/URL; nothing connects
until `setup()`, which applies the migrations on a connection of its own (creating the
`vector` extension first), reads the pgvector version, and then opens the pool, whose
connections register pgvector's adapters as they open (they need the extension).
`dispose()` closes the pool. Each public call is one transaction on one pooled
connection, so a failure anywhere rolls back the change together with its audit row.

Search: within one user, per-user filters make an HNSW scan unreliable before pgvector
0.8 (the index returns `ef_search` candidates, and the filter then drops other users'
rows, leaving fewer than k). Before 0.8 the store therefore scores the user's live facts
exactly (the per-user index finds them, a materialised CTE keeps the planner off the HNSW
index). From 0.8 on, `hnsw.iterative_scan = strict_order` keeps scanning until k rows
pass the filter, and the planner may use the index.

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

import dataclasses
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, ClassVar

import psycopg
from psycopg import sql
from psycopg.pq import TransactionStatus
from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool, PoolClosed, PoolTimeout

from reference.clock import Clock
from reference.errors import BackendUnavailable, MemoryStoreError
from reference.ids import new_id
from reference.keys import Namespace
from reference.ltm.base import (
    LongTermStore,
    LtmFilter,
)
from reference.ltm.common import audit_draft, nonzero_vector, storable_json, storable_text
from reference.ltm.migrations import HnswParams, applied_versions, apply_migrations, drop_schema
from reference.ltm.pg_rows import RenderedStatements
from reference.ltm.pg_rows import columns as _columns
from reference.ltm.pg_rows import fact as _fact
from reference.ltm.postgres_forgetting import (
    ForgettingStatements,
    PostgresForgetting,
    pg_guarded,
    value_sealed_at,
)
from reference.models import AuditEntry, Category, Fact, Hit
from reference.resilience import (
    DEFAULT_RETRY,
    DEFAULT_TIMEOUTS,
    LONG_TERM,
    RetryPolicy,
    SocketDeadlines,
    Timeouts,
    redact_conninfo,
)
from reference.text_interfaces import Embedder

_AUDIT_COLUMNS = [
    *("fact_id", "user_id", "category", "key", "action", "actor", "at", "version"),
    *("old_value", "new_value"),
]
_LIVE = "status = 'active' AND (expires_at IS NULL OR expires_at > %(now)s)"
_UPSERT_ATTEMPTS = 5
#: SQLSTATEs that mean the server or the connection went away, or a statement outlived
#: `statement_timeout`: 08 connection exceptions, 57P01-03 shutdowns (pg_terminate_backend
#: is 57P01), 57014 query canceled.
_GONE = ("57P01", "57P02", "57P03", "57014")


class PostgresLongTermStore(PostgresForgetting, LongTermStore):
    """Facts in one table per namespace, audited in another, searched with pgvector."""

    supports_forgetting: ClassVar[bool] = True

    def __init__(
        self,
        url: str,
        *,
        clock: Clock,
        namespace: Namespace,
        embedder: Embedder,
        pool_size: int = 4,
        hnsw_ef_search: int = 40,
        hnsw_m: int = 16,
        hnsw_ef_construction: int = 64,
        exact_search: bool | None = None,
        timeouts: Timeouts = DEFAULT_TIMEOUTS,
        retry: RetryPolicy = DEFAULT_RETRY,
    ) -> None:
        """`exact_search` None: exact per-user scoring before pgvector 0.8, the index after."""
        super().__init__(clock=clock, namespace=namespace, embedder=embedder)
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
        self._ef_search = hnsw_ef_search
        self._hnsw = HnswParams(m=hnsw_m, ef_construction=hnsw_ef_construction)
        self._exact_search = exact_search
        self._connect_timeout = max(2, round(timeouts.connect_s))  # libpq: whole seconds, >= 2
        self._pool: ConnectionPool[psycopg.Connection[Any]] | None = None
        self._setup_lock = threading.Lock()
        self.pgvector_version: tuple[int, ...] | None = None
        self._sql = _Statements(namespace)
        self._fsql = ForgettingStatements(namespace)

    # ------------------------------------------------------------------ lifecycle
    def setup(self) -> None:
        """Apply pending migrations, then open the pool; idempotent and safe in parallel."""
        with self._setup_lock:
            try:
                with psycopg.connect(self._url, connect_timeout=int(self._connect_timeout)) as conn:
                    apply_migrations(conn, self.namespace, self._hnsw)
                    row = conn.execute(
                        "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
                    ).fetchone()
            except psycopg.OperationalError as exc:
                raise self._unavailable(f"setup: {exc}") from exc
            assert row is not None  # the first migration created the extension
            self.pgvector_version = tuple(int(p) for p in str(row[0]).split(".")[:3])
            if self._exact_search is None:
                self._exact_search = self.pgvector_version < (0, 8)
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
        conn.execute(sql.SQL("SET hnsw.ef_search = {}").format(sql.Literal(self._ef_search)))
        # A SET, not a startup option: poolers such as pgbouncer refuse unknown ones.
        op_ms = int(self.timeouts.operation_s * 1000)
        conn.execute(sql.SQL("SET statement_timeout = {}").format(sql.Literal(op_ms)))
        if not self._exact_search and (self.pgvector_version or ()) >= (0, 8):
            conn.execute("SET hnsw.iterative_scan = strict_order")
        conn.commit()  # the pool discards connections left inside a transaction

    @contextmanager
    def _transaction(self, *, read: bool = False) -> Iterator[psycopg.Cursor[Any]]:
        """One transaction: committed when the block ends, rolled back if it raises.
        Failures of the server or the connection become `BackendUnavailable`, `in_doubt`
        if they came during the commit.

        `read`: the block runs one read-only statement, in autocommit (its own snapshot,
        as in a transaction of its own): one round trip instead of three (BEGIN, the
        statement, COMMIT). A `SELECT 1` over TCP to a local PostgreSQL 15: 0.51 ms in
        a transaction, 0.22 in autocommit."""
        pool = self._pool
        if pool is None:
            raise MemoryStoreError("PostgresLongTermStore: call setup() before use")
        committing = False
        fired = [False]
        try:
            with pool.connection() as conn, self._deadlines.guard(_fileno(conn)) as fired:
                if read:
                    conn.autocommit = True
                    try:
                        with conn.cursor() as cur:
                            yield cur
                    finally:
                        _end_autocommit(conn)
                    return
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

    def _write_audit(self, cur: psycopg.Cursor[Any], entries: list[AuditEntry]) -> None:
        """Insert audit rows in the caller's transaction (the hook failure tests patch)."""
        if not entries:
            return
        rows = [_audit_row(e) for e in entries]
        if len(rows) == 1:
            cur.execute(self._sql.insert_audit, rows[0])
        else:
            cur.executemany(self._sql.insert_audit, rows)

    # ------------------------------------------------------------------ primitives
    @pg_guarded(idempotent=False)
    def _upsert(
        self,
        *,
        user_id: str,
        category: Category,
        key: str,
        value: dict[str, Any],
        text: str,
        importance: float,
        expires_at: float | None,
        actor: str,
        embedding: list[float],
        now: float,
    ) -> Fact:
        storable_json("value", value)
        storable_text("key", key)
        storable_text("text", text)
        vector = nonzero_vector("embedding", embedding)
        ident = {"user_id": user_id, "category": category.value, "key": key}
        sealed = value_sealed_at(value)
        with self._transaction() as cur:
            for _ in range(_UPSERT_ATTEMPTS):
                prior = cur.execute(self._sql.lock_current, ident).fetchone()
                params = {
                    **ident,
                    "fact_id": _new_fact_id(),
                    "value": Jsonb(value),
                    "sealed_at": sealed,
                    "text": text,
                    "embedding": vector,
                    "importance": importance,
                    "expires_at": expires_at,
                    "now": now,
                    # The update applies only to the row locked above; if another writer
                    # inserted the key since, nothing is returned and we lock it and retry.
                    "prior_version": None if prior is None else prior[1],
                }
                row = cur.execute(self._sql.upsert, params).fetchone()
                if row is not None:
                    break
            else:
                raise MemoryStoreError(f"upsert of {key!r}: too many concurrent writers")
            fact = _fact(row)
            action, old_value = ("insert", None) if prior is None else ("update", prior[2])
            self._write_audit(cur, [audit_draft(fact, action, actor, now, old_value, fact.value)])
        return fact

    @pg_guarded(idempotent=False)
    def _get(self, *, user_id: str, category: Category, key: str, now: float) -> Fact | None:
        params = {"user_id": user_id, "category": category.value, "key": key, "now": now}
        with self._transaction() as cur:
            row = cur.execute(self._sql.get_touch, params).fetchone()
        return None if row is None else _fact(row)

    @pg_guarded(idempotent=lambda kw: not kw["touch"])
    def _query(
        self, embedding: list[float], flt: LtmFilter, k: int, now: float, *, touch: bool
    ) -> list[Hit[Fact]]:
        vector = nonzero_vector("embedding", embedding)
        where, params = _where(flt, now)
        params.update(query=vector, k=k)
        statement = self._sql.query(where, exact=self._exact_search is not False, touch=touch)
        with self._transaction(read=not touch) as cur:
            rows = cur.execute(statement, params).fetchall()
        # Neither UPDATE ... RETURNING nor the join keeps the ranking's order.
        rows.sort(key=lambda r: (r[-1], r[0]))
        return [Hit(record=_fact(r), score=1.0 - float(r[-1])) for r in rows]

    @pg_guarded(idempotent=True)
    def _archive(self, flt: LtmFilter, *, actor: str, now: float) -> int:
        where, params = _where(flt, now)
        with self._transaction() as cur:
            rows = cur.execute(self._sql.archive(where), params).fetchall()
            entries = [audit_draft(_fact(r), "archive", actor, now, None, None) for r in rows]
            self._write_audit(cur, entries)
        return len(entries)

    @pg_guarded(idempotent=True)
    def _delete(self, flt: LtmFilter, *, actor: str, now: float) -> int:
        # Deleting means gone for good: archived and expired facts are included.
        where, params = _where(dataclasses.replace(flt, include_dead=True), now)
        with self._transaction() as cur:
            rows = cur.execute(self._sql.delete(where), params).fetchall()
            self._write_audit(cur, _deleted(rows, actor, now))
        return len(rows)

    @pg_guarded(idempotent=True)
    def _list(self, flt: LtmFilter, now: float) -> list[Fact]:
        where, params = _where(flt, now)
        with self._transaction(read=True) as cur:
            rows = cur.execute(self._sql.list_facts(where), params).fetchall()
        return [_fact(r) for r in rows]

    @pg_guarded(idempotent=True)
    def _count(self, flt: LtmFilter | None, now: float) -> int:
        if flt is None:
            where, params = _LIVE, {"now": now}
        else:
            where, params = _where(flt, now)
        with self._transaction(read=True) as cur:
            row = cur.execute(self._sql.count(where), params).fetchone()
        return 0 if row is None else int(row[0])

    @pg_guarded(idempotent=True)
    def _audit_log(self, *, user_id: str, fact_id: str | None) -> list[AuditEntry]:
        with self._transaction(read=True) as cur:
            rows = cur.execute(
                self._sql.audit_log, {"user_id": user_id, "fact_id": fact_id}
            ).fetchall()
        return [_audit_entry(r) for r in rows]

    @pg_guarded(idempotent=True)
    def _sweep(self, *, now: float, batch_size: int, actor: str) -> int:
        with self._transaction() as cur:
            rows = cur.execute(self._sql.sweep, {"now": now, "batch": batch_size}).fetchall()
            self._write_audit(cur, _deleted(rows, actor, now))
        return len(rows)


class _Statements(RenderedStatements):
    """The SQL of one namespace: identifiers quoted once, values always as parameters,
    each statement rendered once (a statement over a filter, once per shape of filter)."""

    def __init__(self, ns: Namespace) -> None:
        super().__init__(
            {
                "facts": sql.Identifier(ns.facts_table),
                "audit": sql.Identifier(ns.audit_table),
                "cols": _columns(),
                "f_cols": _columns("f."),
                "audit_cols": sql.SQL(", ").join(map(sql.Identifier, _AUDIT_COLUMNS)),
            }
        )
        q = self._compose
        self.lock_current = q(
            "SELECT fact_id, version, value FROM {facts}"
            " WHERE user_id = %(user_id)s AND category = %(category)s AND key = %(key)s"
            " FOR UPDATE"
        )
        self.upsert = q(
            "INSERT INTO {facts} AS f (fact_id, user_id, category, key, value, text, embedding,"
            " importance, version, status, created_at, updated_at, last_accessed_at,"
            " access_count, expires_at, sealed_at)"
            " VALUES (%(fact_id)s, %(user_id)s, %(category)s, %(key)s, %(value)s, %(text)s,"
            " %(embedding)s, %(importance)s, 1, 'active', %(now)s, %(now)s, %(now)s, 0,"
            " %(expires_at)s, %(sealed_at)s)"
            " ON CONFLICT (user_id, category, key) DO UPDATE SET"
            " value = EXCLUDED.value, sealed_at = EXCLUDED.sealed_at,"
            " text = EXCLUDED.text, embedding = EXCLUDED.embedding,"
            " importance = EXCLUDED.importance, expires_at = EXCLUDED.expires_at,"
            " version = f.version + 1, status = 'active', updated_at = EXCLUDED.updated_at"
            " WHERE f.version = %(prior_version)s"
            " RETURNING {f_cols}"
        )
        self.insert_audit = q(
            "INSERT INTO {audit} ({audit_cols}) VALUES ({placeholders})",
            placeholders=sql.SQL(", ").join(sql.Placeholder() * len(_AUDIT_COLUMNS)),
        )
        self.get_touch = q(
            "UPDATE {facts} SET last_accessed_at = %(now)s, access_count = access_count + 1"
            " WHERE user_id = %(user_id)s AND category = %(category)s AND key = %(key)s"
            f" AND {_LIVE} RETURNING {{cols}}"
        )
        self.audit_log = q(
            "SELECT audit_id, {audit_cols} FROM {audit} WHERE user_id = %(user_id)s"
            " AND (%(fact_id)s::text IS NULL OR fact_id = %(fact_id)s) ORDER BY audit_id"
        )
        # SKIP LOCKED: concurrent sweepers take different batches instead of queueing.
        self.sweep = q(
            "DELETE FROM {facts} WHERE fact_id IN (SELECT fact_id FROM {facts}"
            " WHERE expires_at <= %(now)s ORDER BY expires_at, fact_id LIMIT %(batch)s"
            " FOR UPDATE SKIP LOCKED) RETURNING {cols}"
        )

    # Statements over a filter: `where` is the clause text of `_where`.
    _TOUCH = (
        " UPDATE {facts} AS f SET last_accessed_at = %(now)s,"
        " access_count = f.access_count + 1"
        " FROM top WHERE f.fact_id = top.fact_id AND f.status = 'active'"
        " RETURNING {f_cols}, top.distance"
    )

    _PEEK = " SELECT {f_cols}, top.distance FROM {facts} AS f JOIN top ON f.fact_id = top.fact_id"

    def query(self, where: str, *, exact: bool, touch: bool) -> bytes:
        tail = self._TOUCH if touch else self._PEEK
        if exact:
            # MATERIALIZED fences the user's candidates off from the ORDER BY, so the
            # planner cannot answer it from the HNSW index: the scores are exact.
            return self._over(
                "WITH candidates AS MATERIALIZED (SELECT fact_id, embedding <=> %(query)s"
                " AS distance FROM {facts} WHERE {where}),"
                " top AS (SELECT fact_id, distance FROM candidates"
                " ORDER BY distance, fact_id LIMIT %(k)s)" + tail,
                where,
            )
        return self._over(
            "WITH top AS (SELECT fact_id, embedding <=> %(query)s AS distance FROM {facts}"
            " WHERE {where} ORDER BY embedding <=> %(query)s, fact_id LIMIT %(k)s)" + tail,
            where,
        )

    def archive(self, where: str) -> bytes:
        return self._over(
            "UPDATE {facts} SET status = 'archived', updated_at = %(now)s"
            " WHERE {where} AND status = 'active' RETURNING {cols}",
            where,
        )

    def delete(self, where: str) -> bytes:
        return self._over("DELETE FROM {facts} WHERE {where} RETURNING {cols}", where)

    def list_facts(self, where: str) -> bytes:
        return self._over(
            "SELECT {cols} FROM {facts} WHERE {where} ORDER BY created_at, fact_id", where
        )

    def count(self, where: str) -> bytes:
        return self._over("SELECT count(*) FROM {facts} WHERE {where}", where)


def _where(flt: LtmFilter, now: float) -> tuple[str, dict[str, Any]]:
    """The SQL meaning of `LtmFilter.matches`, with every value a parameter: clauses of
    constant text (one per shape of filter, so each statement over it is rendered once)."""
    clauses = ["user_id = %(user_id)s", "status <> 'deleted'"]
    params: dict[str, Any] = {"user_id": flt.user_id, "now": now}
    if flt.categories is not None:
        clauses.append("category = ANY(%(categories)s::text[])")
        params["categories"] = sorted(c.value for c in flt.categories)
    if flt.keys is not None:
        clauses.append("key = ANY(%(keys)s::text[])")
        params["keys"] = sorted(flt.keys)
    if flt.fact_ids is not None:
        clauses.append("fact_id = ANY(%(fact_ids)s::text[])")
        params["fact_ids"] = sorted(flt.fact_ids)
    if not flt.include_dead:
        clauses.append(_LIVE)
    return " AND ".join(clauses), params


def _audit_entry(row: tuple[Any, ...]) -> AuditEntry:
    fields = dict(zip(["audit_id", *_AUDIT_COLUMNS], row, strict=True))
    fields["category"] = Category(fields["category"])
    return AuditEntry(**fields)


def _audit_row(entry: AuditEntry) -> list[Any]:
    values = [getattr(entry, column) for column in _AUDIT_COLUMNS]
    # psycopg would dump an Enum by name, and a dict only as JSON when wrapped.
    return [
        v.value if isinstance(v, Category) else Jsonb(v) if isinstance(v, dict) else v
        for v in values
    ]


def _deleted(rows: list[tuple[Any, ...]], actor: str, now: float) -> list[AuditEntry]:
    # A deletion's audit keeps the value it removed; erasure redacts it later.
    facts = [_fact(r) for r in rows]
    return [audit_draft(f, "delete", actor, now, f.value, None) for f in facts]


def _new_fact_id() -> str:
    return new_id()


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

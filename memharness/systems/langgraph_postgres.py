"""LangGraph's `PostgresStore` under test: its native TTL and pgvector index, on virtual time.

**What runs.** langgraph-checkpoint-postgres's `PostgresStore`, unchanged: its own tables
(`store`, `store_vectors`, made by its `setup()` migrations), its own SQL for `put`,
`search`, deletes and `sweep_ttl()`, its TTL (`TTLConfig`: `default_ttl` None, a TTL per
`put` in whole minutes, `refresh_on_read`, `omit_expired`) and its pgvector index (`dims`
of the harness's embedder, `fields=["text"]`, cosine). Memories sit in the namespace
`(user label, "memories")`; the user label is the user id with `%` and `.` escaped
(LangGraph's namespace labels cannot contain a dot).

**Virtual time.** Every expiry decision of `PostgresStore` is SQL reading `NOW()`: a put
sets `expires_at = NOW() + ttl`, a read with refresh sets it again from `ttl_minutes`,
`omit_expired` filters `expires_at > NOW()`, and `sweep_ttl()` deletes
`expires_at < NOW()`. `NOW()` is an ordinary function call that PostgreSQL resolves
through `search_path`, and `pg_catalog` is searched where the path names it. So each
adapter instance gets a schema of its own holding LangGraph's tables and a function
`now()` returning this connection's virtual time (the setting `memh.virtual_now`, epoch
seconds, set by `set_clock`), and its connection's path is `<schema>, pg_catalog, ...`:
LangGraph's own statements, untouched, then compute and compare expiry on the harness's
clock. Nothing else reads it: `created_at`/`updated_at` (SQL `CURRENT_TIMESTAMP`, not a
function call) stay on the wall clock, and LangGraph uses them for nothing but ordering
and display. Other connections (the reference's, other adapters') keep the real
`now()`. A connection whose clock was never set fails loudly (an unknown setting), it
never falls back to the wall clock. Hence `NativeExpiry(clock="virtual")`.

**Sweeps.** `PostgresStore.start_ttl_sweeper` calls `sweep_ttl()` every
`sweep_interval_minutes` of wall time on a thread; here `sweep(at)` calls the same
`sweep_ttl()` when at least `sweep_interval_minutes` of *virtual* time have passed since
the last one (5 by default, the sweeper's own default). `sweep_ttl()` deletes every
expired row of its `store` table: one schema per instance is what keeps one replay's
sweep (at its own virtual time) from deleting another's rows.

**Expired before a sweep.** With `omit_expired=False` (LangGraph's default, used here by
default) an expired row is still returned by `search` and `get` until a sweep deletes it:
that is what the stale figures between sweeps measure. With `omit_expired=True` reads
hide it until the sweep.

**Granularity.** A TTL is minutes, and the store keeps `ttl_minutes` as an integer (a
refresh re-reads it), so the harness's TTL is rounded up to whole minutes (60 s).

**Lifecycle.** `open` starts (or joins) the embedded PostgreSQL under
`settings.data_dir / "pg"` unless `settings.pg_url` is set, opens one connection, creates
the schema and runs `setup()`. One adapter is used by one thread. `close` drops the
schema (this instance's tables only), closes the connection and releases the server.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import uuid
from typing import TYPE_CHECKING, Any, ClassVar

import psycopg
from langgraph.store.base import PutOp, TTLConfig
from langgraph.store.postgres import PostgresStore
from langgraph.store.postgres.base import PostgresIndexConfig
from psycopg import sql
from psycopg.rows import DictRow, dict_row

from memharness.systems.base import (
    Capabilities,
    Footprint,
    Hit,
    MemoryAdapter,
    NativeExpiry,
    Written,
)
from reference.errors import InvalidInput

if TYPE_CHECKING:
    from reference.embedding import Embedder
    from reference.ltm.embedded_pg import EmbeddedPostgres
    from reference.settings import Settings

#: The connection setting the schema's `now()` reads: the virtual time, epoch seconds.
VIRTUAL_NOW_SETTING = "memh.virtual_now"
#: The label under each user in the store's namespace.
MEMORIES_LABEL = "memories"
#: LangGraph's sweeper interval when none is configured (`start_ttl_sweeper`).
DEFAULT_SWEEP_INTERVAL_MINUTES = 5
_DELETE_CHUNK = 1000


def schema_name(namespace: str) -> str:
    """The PostgreSQL schema of the adapter instance named `namespace` (≤ 63 bytes)."""
    readable = re.sub(r"[^a-z0-9_]", "_", namespace.lower())[:36]
    digest = hashlib.blake2b(namespace.encode(), digest_size=6).hexdigest()
    return f"lgpg_{readable}_{digest}"


def user_label(user_id: str) -> str:
    """The namespace label of a user: reversible, never empty, without a dot."""
    if not isinstance(user_id, str) or not user_id or "\x00" in user_id:
        raise InvalidInput("user_id", f"must be a non-empty string without NUL, got {user_id!r}")
    return user_id.replace("%", "%25").replace(".", "%2E")


def ttl_minutes(ttl_s: float | None) -> int | None:
    """The strategy's TTL as the store's whole minutes, rounded up (None: keep)."""
    if ttl_s is None:
        return None
    if isinstance(ttl_s, bool) or not isinstance(ttl_s, int | float) or not 0 < ttl_s < math.inf:
        raise InvalidInput("ttl_s", f"must be a finite number > 0 or None, got {ttl_s!r}")
    # To the millisecond first, so 120.0000001 s (float noise) stays 2 minutes.
    return max(1, math.ceil(round(ttl_s, 3) / 60))


class LangGraphPostgresAdapter(MemoryAdapter):
    """LangGraph `PostgresStore` with its native TTL on the harness's virtual clock."""

    name: ClassVar[str] = "langgraph-postgres"
    extra: ClassVar[str | None] = "langgraph"

    def __init__(
        self,
        *,
        conn: psycopg.Connection[DictRow],
        schema: str,
        embedder: Embedder,
        server: EmbeddedPostgres | None,
        refresh_on_read: bool,
        omit_expired: bool,
        sweep_interval_minutes: float,
    ) -> None:
        self._conn = conn
        self._schema = schema
        self._server = server
        self._now: float | None = None
        self._last_sweep: float | None = None
        self._sweep_interval_s = sweep_interval_minutes * 60.0
        self._closed = False
        ttl: TTLConfig = {
            "default_ttl": None,  # every put passes the strategy's TTL (None: keep)
            "refresh_on_read": refresh_on_read,
            "omit_expired": omit_expired,
            "sweep_interval_minutes": int(sweep_interval_minutes),
        }
        index: PostgresIndexConfig = {
            "dims": embedder.dim,
            "embed": lambda texts: embedder.embed(list(texts)).tolist(),
            "fields": ["text"],
            "distance_type": "cosine",
        }
        self.store = PostgresStore(conn, index=index, ttl=ttl)
        notes = [
            "TTL, search and sweeps are LangGraph's own SQL; its NOW() reads the virtual "
            "clock through a per-instance schema function (see the module docstring)",
            "sweeps run PostgresStore.sweep_ttl() at the harness's sweep calls, at most "
            f"once per {sweep_interval_minutes:g} virtual minutes (its sweeper's interval)",
            "delete_user lists the user's keys in the store table and deletes them with "
            "the store's own batched deletes (PostgresStore has no delete by namespace)",
        ]
        self.capabilities = Capabilities(
            native_expiry=NativeExpiry(
                granularity_s=60.0,
                expired="hidden" if omit_expired else "readable",
                refresh_on_read=refresh_on_read,
                clock="virtual",
            ),
            delete=True,
            delete_user=True,
            notes=tuple(notes),
        )

    # ------------------------------------------------------------------ lifecycle
    @classmethod
    def open(
        cls,
        *,
        namespace: str,
        embedder: Embedder,
        settings: Settings,
        refresh_on_read: bool = True,
        omit_expired: bool = False,
        sweep_interval_minutes: float = DEFAULT_SWEEP_INTERVAL_MINUTES,
    ) -> LangGraphPostgresAdapter:
        """A new, empty store in a schema of its own (see the module docstring).

        `refresh_on_read` and `omit_expired` are LangGraph's `TTLConfig` fields (its
        defaults: True, False); `sweep_interval_minutes` is virtual minutes between sweeps.
        """
        if not isinstance(namespace, str) or not namespace:
            raise InvalidInput("namespace", f"must be a non-empty string, got {namespace!r}")
        if isinstance(sweep_interval_minutes, bool) or not sweep_interval_minutes >= 0:
            raise InvalidInput(
                "sweep_interval_minutes", f"must be a number >= 0, got {sweep_interval_minutes!r}"
            )
        server: EmbeddedPostgres | None = None
        if settings.pg_url is not None:
            url = settings.pg_url.get_secret_value()
        else:
            from reference.ltm.embedded_pg import start_embedded_postgres

            server = start_embedded_postgres(settings.data_dir / "pg")
            url = server.url
        try:
            conn = psycopg.connect(
                url,
                autocommit=True,
                prepare_threshold=0,
                row_factory=dict_row,
                connect_timeout=max(1, round(settings.timeouts.connect_s)),
            )
        except BaseException:
            if server is not None:
                server.close()
            raise
        schema = schema_name(namespace)
        created = False
        try:
            _create_schema(conn, schema, namespace)
            created = True
            adapter = cls(
                conn=conn,
                schema=schema,
                embedder=embedder,
                server=server,
                refresh_on_read=refresh_on_read,
                omit_expired=omit_expired,
                sweep_interval_minutes=sweep_interval_minutes,
            )
            adapter.store.setup()
        except BaseException:
            # Nothing half-made survives a failed open (the schema is ours: just created).
            try:
                if created:
                    _drop_schema(conn, schema)
            finally:
                conn.close()
            if server is not None:
                server.close()
            raise
        return adapter

    def close(self) -> None:
        """Drop this instance's schema (its tables, rows and clock), release the server."""
        if self._closed:
            return
        self._closed = True
        try:
            if not self._conn.closed:
                _drop_schema(self._conn, self._schema)
        finally:
            self._conn.close()
            if self._server is not None:
                self._server.close()

    # ------------------------------------------------------------------ time
    def set_clock(self, at: float) -> None:
        """The virtual time LangGraph's `NOW()` returns on this connection from now on."""
        if isinstance(at, bool) or not isinstance(at, int | float) or at != at:
            raise InvalidInput("at", f"must be epoch seconds, got {at!r}")
        if at == self._now:
            return
        self._conn.execute(
            "SELECT set_config(%s, %s, false)", (VIRTUAL_NOW_SETTING, repr(float(at)))
        )
        self._now = float(at)

    # ------------------------------------------------------------------ memories
    def add(
        self,
        *,
        user_id: str,
        session_id: str,
        text: str,
        at: float,
        metadata: dict[str, Any],
        ttl_s: float | None,
    ) -> Written:
        namespace = (user_label(user_id), MEMORIES_LABEL)
        if not isinstance(text, str) or not text.strip():
            raise InvalidInput("text", "must be a non-empty string")
        minutes = ttl_minutes(ttl_s)
        value = {"text": text, "session_id": session_id, "at": at, "metadata": metadata}
        if not isinstance(metadata, dict):
            raise InvalidInput("metadata", f"must be a dict, got {type(metadata).__name__}")
        try:  # the store writes it as jsonb (psycopg's json.dumps): refuse it up front
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise InvalidInput("metadata", f"must be JSON-serialisable: {exc}") from exc
        self.set_clock(at)
        key = uuid.uuid4().hex
        self.store.put(namespace, key, value, ttl=minutes)
        return Written(memory_ids=[key])

    def search(
        self, *, user_id: str, query: str, k: int, at: float, read_only: bool = False
    ) -> list[Hit]:
        """LangGraph's vector search in the user's namespace; refreshes TTLs per config,
        never on a `read_only` (probe) search (`refresh_ttl=False`)."""
        namespace = (user_label(user_id), MEMORIES_LABEL)
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise InvalidInput("k", f"must be an integer >= 1, got {k!r}")
        self.set_clock(at)
        refresh = False if read_only else None  # None: the store's refresh_on_read
        items = self.store.search(namespace, query=query, limit=k, refresh_ttl=refresh)
        return [Hit(item.key, str(item.value["text"]), float(item.score or 0.0)) for item in items]

    def holds(self, *, user_id: str, memory_id: str) -> bool:
        """Whether the row is in the store table (expired but unswept included); a plain
        SELECT, so no TTL is refreshed."""
        prefix = _prefix(user_id)
        row = self._conn.execute(
            sql.SQL("SELECT 1 AS one FROM {}.store WHERE prefix = %s AND key = %s").format(
                sql.Identifier(self._schema)
            ),
            (prefix, memory_id),
        ).fetchone()
        return row is not None

    def delete(self, *, user_id: str, memory_id: str) -> None:
        self.store.delete((user_label(user_id), MEMORIES_LABEL), memory_id)

    def delete_user(self, *, user_id: str) -> None:
        """Every row of the user's namespace, expired ones included, through the store's
        own deletes (it has no delete by namespace): keys listed read-only by SQL."""
        namespace = (user_label(user_id), MEMORIES_LABEL)
        rows = self._conn.execute(
            sql.SQL("SELECT key FROM {}.store WHERE prefix = %s").format(
                sql.Identifier(self._schema)
            ),
            (_prefix(user_id),),
        ).fetchall()
        keys = [str(r["key"]) for r in rows]
        for start in range(0, len(keys), _DELETE_CHUNK):
            chunk = keys[start : start + _DELETE_CHUNK]
            self.store.batch([PutOp(namespace, key, None) for key in chunk])

    def sweep(self, at: float) -> int:
        """`PostgresStore.sweep_ttl()` at virtual time `at`, when `sweep_interval_minutes`
        have passed since the last sweep (the first call always sweeps)."""
        self.set_clock(at)
        if self._last_sweep is not None and at - self._last_sweep < self._sweep_interval_s:
            return 0
        self._last_sweep = at
        return self.store.sweep_ttl()

    def footprint(self) -> Footprint:
        """Rows of this instance's store table, and the bytes of their values and vectors
        (`pg_column_size`, as PostgreSQL stores them, compressed or not)."""
        schema = sql.Identifier(self._schema)
        row = self._conn.execute(
            sql.SQL(
                "SELECT (SELECT count(*) FROM {s}.store) AS memories,"
                " (SELECT coalesce(sum(pg_column_size(value)), 0) FROM {s}.store)"
                " + (SELECT coalesce(sum(pg_column_size(embedding)), 0) FROM {s}.store_vectors)"
                " AS bytes"
            ).format(s=schema)
        ).fetchone()
        assert row is not None  # an aggregate always returns one row
        return Footprint(memories=int(row["memories"]), bytes=int(row["bytes"]))


def _prefix(user_id: str) -> str:
    """The store's text form of the user's namespace (`PostgresStore` joins with dots)."""
    return f"{user_label(user_id)}.{MEMORIES_LABEL}"


def _create_schema(conn: psycopg.Connection[DictRow], schema: str, namespace: str) -> None:
    """Create the instance's schema and its virtual `now()`, and put them first on the
    connection's path, ahead of `pg_catalog` (so `NOW()` resolves to the virtual one)."""
    ident = sql.Identifier(schema)
    exists = conn.execute(
        "SELECT 1 AS one FROM pg_namespace WHERE nspname = %s", (schema,)
    ).fetchone()
    if exists is not None:
        raise InvalidInput(
            "namespace",
            f"{namespace!r} is in use (schema {schema} exists): each adapter needs a "
            "namespace no other instance uses",
        )
    row = conn.execute("SELECT current_setting('search_path') AS path").fetchone()
    previous = str(row["path"]).strip() if row is not None else ""
    conn.execute(sql.SQL("CREATE SCHEMA {}").format(ident))
    conn.execute(
        sql.SQL(
            "CREATE FUNCTION {}.now() RETURNS timestamptz LANGUAGE sql STABLE AS "
            "$$ SELECT to_timestamp(current_setting({})::float8) $$"
        ).format(ident, sql.Literal(VIRTUAL_NOW_SETTING))
    )
    # The server's own path (its text, as PostgreSQL printed it) follows, so pgvector's
    # types resolve wherever the extension lives.
    rest = sql.SQL(", {}").format(sql.SQL(previous)) if previous else sql.SQL("")
    conn.execute(sql.SQL("SET search_path = {}, pg_catalog{}").format(ident, rest))


def _drop_schema(conn: psycopg.Connection[DictRow], schema: str) -> None:
    conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))

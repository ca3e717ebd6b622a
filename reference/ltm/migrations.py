"""Schema migrations of the long-term layer, applied in order and recorded per namespace.

Each migration is a version, a name and the SQL statements it runs, built from the
`Namespace` (so every run prefix has its own tables) and the HNSW build parameters.
`apply_migrations` runs in one transaction under an advisory lock, so parallel workers
calling `setup()` at the same moment apply each migration exactly once.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from reference.crypto import SEALED, SEALED_AT
from reference.keys import Namespace
from reference.ltm.lexemes import write_lexemes
from reference.models import Category

EMBEDDING_DIM = 384
_FIRST_CATEGORIES = ("preference", "profile", "entity", "fact", "knowledge")

# Every get and query touches the facts it returns (last_accessed_at, access_count). A row
# with its vector is ~1.7 kB, so at the default fillfactor a page has no room for the new
# row version, the update is not HOT, and PostgreSQL re-inserts it into every index,
# HNSW included: 5-20 ms per read instead of <1 ms (measured, 10,000 facts). Half-empty
# pages keep touches HOT, at twice the heap size.
FACTS_FILLFACTOR = 50

# One key for every namespace: CREATE EXTENSION and CREATE TABLE IF NOT EXISTS both race
# when run concurrently, even on different tables, so all setups take turns.
_LOCK_KEY = int.from_bytes(
    hashlib.sha256(b"memharness:ltm:migrations").digest()[:8], "big", signed=True
)


@dataclass(frozen=True, slots=True)
class HnswParams:
    """Build parameters of the HNSW index (pgvector defaults)."""

    m: int = 16
    ef_construction: int = 64


@dataclass(frozen=True, slots=True)
class Migration:
    """One schema change: `build` returns its statements for a namespace; `rewrite`, if
    any, then rewrites rows in Python (in the same transaction)."""

    version: int
    name: str
    build: Callable[[Namespace, HnswParams], list[sql.SQL | sql.Composed]]
    rewrite: Callable[[psycopg.Connection[Any], Namespace], object] | None = None


def index_name(namespace: Namespace, suffix: str) -> str:
    """Names of the secondary indexes (the HNSW index is named in keys.py)."""
    return f"{namespace.facts_table}_{suffix}"


def _initial_schema(ns: Namespace, hnsw: HnswParams) -> list[sql.SQL | sql.Composed]:
    facts = sql.Identifier(ns.facts_table)
    audit = sql.Identifier(ns.audit_table)
    # The categories as they were when this migration was written: a migration never
    # changes once applied somewhere (later categories come with migrations of their own).
    categories = sql.SQL(", ").join(sql.Literal(c) for c in _FIRST_CATEGORIES)
    # Timestamps are epoch seconds from the injected clock, never the server's now():
    # a virtual clock may be months ahead of the server.
    return [
        sql.SQL("CREATE EXTENSION IF NOT EXISTS vector"),
        sql.SQL(
            """
            CREATE TABLE {facts} (
                fact_id text PRIMARY KEY,
                user_id text NOT NULL,
                category text NOT NULL CHECK (category IN ({categories})),
                key text NOT NULL,
                value jsonb NOT NULL,
                text text NOT NULL,
                embedding vector({dim}) NOT NULL,
                importance real NOT NULL,
                version integer NOT NULL CHECK (version >= 1),
                status text NOT NULL CHECK (status IN ('active', 'archived', 'deleted')),
                created_at double precision NOT NULL,
                updated_at double precision NOT NULL,
                last_accessed_at double precision NOT NULL,
                access_count integer NOT NULL DEFAULT 0,
                expires_at double precision,
                UNIQUE (user_id, category, key)
            ) WITH (fillfactor = {fillfactor})
            """
        ).format(
            facts=facts,
            fillfactor=sql.Literal(FACTS_FILLFACTOR),
            categories=categories,
            dim=sql.Literal(EMBEDDING_DIM),
        ),
        sql.SQL("CREATE INDEX {name} ON {facts} (user_id, status)").format(
            name=sql.Identifier(index_name(ns, "user_status_idx")), facts=facts
        ),
        # The sweeper reads facts by expiry; most facts never expire, so index only those.
        sql.SQL(
            "CREATE INDEX {name} ON {facts} (expires_at, fact_id) WHERE expires_at IS NOT NULL"
        ).format(name=sql.Identifier(index_name(ns, "expires_idx")), facts=facts),
        sql.SQL(
            "CREATE INDEX {name} ON {facts} USING hnsw (embedding vector_cosine_ops) "
            "WITH (m = {m}, ef_construction = {ef})"
        ).format(
            name=sql.Identifier(ns.facts_embedding_index),
            facts=facts,
            m=sql.Literal(hnsw.m),
            ef=sql.Literal(hnsw.ef_construction),
        ),
        sql.SQL(
            """
            CREATE TABLE {audit} (
                audit_id bigserial PRIMARY KEY,
                fact_id text NOT NULL,
                user_id text NOT NULL,
                category text NOT NULL,
                key text NOT NULL,
                action text NOT NULL CHECK (action IN ('insert', 'update', 'archive', 'delete')),
                actor text NOT NULL,
                at double precision NOT NULL,
                version integer NOT NULL,
                old_value jsonb,
                new_value jsonb
            )
            """
        ).format(audit=audit),
        sql.SQL("CREATE INDEX {name} ON {audit} (user_id, fact_id)").format(
            name=sql.Identifier(f"{ns.audit_table}_user_fact_idx"), audit=audit
        ),
    ]


def _forgetting(ns: Namespace, hnsw: HnswParams) -> list[sql.SQL | sql.Composed]:
    """What the forgetting engine needs: 'erase' and 'anonymise' audit actions, and the
    per-user activity that archival of inactive users reads."""
    audit = sql.Identifier(ns.audit_table)
    # The CHECK of migration 1 is unnamed, and PostgreSQL's generated name may be
    # truncated for long prefixes: find it by table instead of guessing it.
    drop_checks = sql.SQL(
        """
        DO $$
        DECLARE c text;
        BEGIN
          FOR c IN SELECT conname FROM pg_constraint
                   WHERE conrelid = {table}::regclass AND contype = 'c'
          LOOP
            EXECUTE format('ALTER TABLE %I DROP CONSTRAINT %I', {name}, c);
          END LOOP;
        END $$
        """
    ).format(table=sql.Literal(ns.audit_table), name=sql.Literal(ns.audit_table))
    actions = sql.SQL(", ").join(
        sql.Literal(a) for a in ("insert", "update", "archive", "delete", "erase", "anonymise")
    )
    return [
        drop_checks,
        sql.SQL("ALTER TABLE {audit} ADD CONSTRAINT {name} CHECK (action IN ({actions}))").format(
            audit=audit, name=sql.Identifier(f"{ns.audit_table}_action_ck"), actions=actions
        ),
        # Erasure redacts a user's audit entries by key as well as by fact; sweeps strip
        # sealed values from the audit of facts by id, across users.
        sql.SQL("CREATE INDEX {name} ON {audit} (user_id, key)").format(
            name=sql.Identifier(f"{ns.audit_table}_user_key_idx"), audit=audit
        ),
        sql.SQL("CREATE INDEX {name} ON {audit} (fact_id)").format(
            name=sql.Identifier(f"{ns.audit_table}_fact_idx"), audit=audit
        ),
        sql.SQL(
            "CREATE TABLE {users} ("
            " user_id text PRIMARY KEY,"
            # Epoch seconds from the injected clock, like every timestamp of the layer.
            " last_active_at double precision NOT NULL)"
        ).format(users=sql.Identifier(ns.users_table)),
    ]


def sealed_at_sql(value: sql.Composable) -> sql.Composed:
    """`policy.sealed_at` of a JSONB value, in SQL: the earliest `_sealed_at` of the value
    and of its object fields that have a `_sealed` key; -Infinity for a seal whose stamp
    is not a number; NULL when nothing is sealed. A stamp a double cannot hold (beyond
    1e308 or below 1e-300 in magnitude, not zero) counts as -Infinity too: earlier than
    exact is safe (a due scan keeps only what is due), and the cast would fail."""
    return sql.SQL(
        "(SELECT min(CASE WHEN jsonb_typeof(p.part -> {stamp}) IS DISTINCT FROM 'number'"
        " THEN '-Infinity'::float8"
        " WHEN abs((p.part -> {stamp})::numeric) >= 1e308"
        " OR ((p.part -> {stamp})::numeric <> 0 AND abs((p.part -> {stamp})::numeric) < 1e-300)"
        " THEN '-Infinity'::float8"
        " ELSE (p.part -> {stamp})::numeric::float8 END)"
        " FROM (SELECT {value} AS part UNION ALL SELECT e.value FROM jsonb_each({value}) AS e"
        " WHERE jsonb_typeof(e.value) = 'object') AS p WHERE p.part ? {seal})"
    ).format(value=value, stamp=sql.Literal(SEALED_AT), seal=sql.Literal(SEALED))


def _due_index(ns: Namespace, hnsw: HnswParams) -> list[sql.SQL | sql.Composed]:
    """What a sweep that visits only what is due needs (DESIGN.md "Time", due index):
    each fact's sealing time as a column (backfilled; the store writes it with every
    value), and partial indexes for each kind of deadline. Expiry has its index already
    (migration 1)."""
    facts = sql.Identifier(ns.facts_table)
    users = sql.Identifier(ns.users_table)
    return [
        sql.SQL("ALTER TABLE {facts} ADD COLUMN sealed_at double precision").format(facts=facts),
        # Only rows holding a seal somewhere get a value; the others stay NULL.
        sql.SQL(
            "UPDATE {facts} SET sealed_at = {expr}"
            " WHERE value ? {seal} OR EXISTS (SELECT 1 FROM jsonb_each(value) AS e"
            " WHERE jsonb_typeof(e.value) = 'object' AND e.value ? {seal})"
        ).format(facts=facts, expr=sealed_at_sql(sql.SQL("value")), seal=sql.Literal(SEALED)),
        sql.SQL("CREATE INDEX {name} ON {facts} (sealed_at) WHERE sealed_at IS NOT NULL").format(
            name=sql.Identifier(index_name(ns, "sealed_idx")), facts=facts
        ),
        sql.SQL("CREATE INDEX {name} ON {facts} (updated_at) WHERE status = 'archived'").format(
            name=sql.Identifier(index_name(ns, "archived_idx")), facts=facts
        ),
        sql.SQL("CREATE INDEX {name} ON {users} (last_active_at)").format(
            name=sql.Identifier(f"{ns.users_table}_last_active_idx"), users=users
        ),
    ]


def _episodes(ns: Namespace, hnsw: HnswParams) -> list[sql.SQL | sql.Composed]:
    """The `episode` category (consolidation): the category CHECK of migration 1 is
    replaced by a named one over every `Category`. Migration 1's CHECK is unnamed and
    the facts table has others (version, status): it is found by its definition."""
    facts = sql.Identifier(ns.facts_table)
    drop_check = sql.SQL(
        """
        DO $$
        DECLARE c text;
        BEGIN
          FOR c IN SELECT conname FROM pg_constraint
                   WHERE conrelid = {table}::regclass AND contype = 'c'
                     AND pg_get_constraintdef(oid) LIKE '%category%'
          LOOP
            EXECUTE format('ALTER TABLE %I DROP CONSTRAINT %I', {name}, c);
          END LOOP;
        END $$
        """
    ).format(table=sql.Literal(ns.facts_table), name=sql.Literal(ns.facts_table))
    categories = sql.SQL(", ").join(sql.Literal(c.value) for c in Category)
    return [
        drop_check,
        sql.SQL("ALTER TABLE {facts} ADD CONSTRAINT {name} CHECK (category IN ({cats}))").format(
            facts=facts, name=sql.Identifier(index_name(ns, "category_ck")), cats=categories
        ),
    ]


def _causes(ns: Namespace, hnsw: HnswParams) -> list[sql.SQL | sql.Composed]:
    """Why each change happened: the audit's `cause` (rows written before say ''), an
    archived fact's `archive_reason` (NULL for facts archived before: unknown), and an
    index by time for audit reports over a time range."""
    audit = sql.Identifier(ns.audit_table)
    return [
        sql.SQL("ALTER TABLE {audit} ADD COLUMN cause text NOT NULL DEFAULT ''").format(
            audit=audit
        ),
        sql.SQL("ALTER TABLE {facts} ADD COLUMN archive_reason text").format(
            facts=sql.Identifier(ns.facts_table)
        ),
        sql.SQL("CREATE INDEX {name} ON {audit} (at)").format(
            name=sql.Identifier(f"{ns.audit_table}_at_idx"), audit=audit
        ),
    ]


def _lexemes(ns: Namespace, hnsw: HnswParams) -> list[sql.SQL | sql.Composed]:
    """Lexical search beside the vectors: each fact's terms as a tsvector (written by the
    store with every text: `array_to_tsvector` of `reference.lexical.lexical_terms`, no
    parser or dictionary between, so Chinese is segmented by jieba), under a GIN index.
    Rows written before are backfilled by the `simple` configuration over the lower-cased
    text; migration 7 then rewrites them with the store's own terms."""
    facts = sql.Identifier(ns.facts_table)
    return [
        sql.SQL("ALTER TABLE {facts} ADD COLUMN lexemes tsvector").format(facts=facts),
        sql.SQL("UPDATE {facts} SET lexemes = to_tsvector('simple', lower(text))").format(
            facts=facts
        ),
        sql.SQL("ALTER TABLE {facts} ALTER COLUMN lexemes SET NOT NULL").format(facts=facts),
        sql.SQL("CREATE INDEX {name} ON {facts} USING gin (lexemes)").format(
            name=sql.Identifier(index_name(ns, "lexemes_idx")), facts=facts
        ),
    ]


def _no_statements(ns: Namespace, hnsw: HnswParams) -> list[sql.SQL | sql.Composed]:
    return []


MIGRATIONS: list[Migration] = [
    Migration(1, "facts, audit log, HNSW cosine index", _initial_schema),
    Migration(2, "erase/anonymise audit actions, user activity for archival", _forgetting),
    Migration(3, "due index: sealed_at column, partial indexes by deadline", _due_index),
    Migration(4, "episode category (consolidation of ended sessions)", _episodes),
    Migration(5, "audit causes, archive reasons, audit index by time", _causes),
    Migration(6, "lexical search: lexemes tsvector column, GIN index", _lexemes),
    # English words became their stems (`reference.lexical`): every row's lexemes are
    # written anew from its text, as the store writes them (`reference/ltm/lexemes.py`).
    Migration(7, "lexical search: English stems", _no_statements, write_lexemes),
]


def apply_migrations(
    conn: psycopg.Connection[Any], namespace: Namespace, hnsw: HnswParams | None = None
) -> list[int]:
    """Apply the pending migrations of `namespace` in order; returns the versions applied.

    Runs in one transaction of its own: commits on success, leaves nothing on failure.
    """
    hnsw = hnsw or HnswParams()
    table = sql.Identifier(namespace.migrations_table)
    applied: list[int] = []
    with conn.transaction():
        # Transaction-level: released by the commit, even if the caller forgets.
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
        conn.execute(
            sql.SQL(
                "CREATE TABLE IF NOT EXISTS {table} ("
                " version integer PRIMARY KEY,"
                " name text NOT NULL,"
                # Bookkeeping about the schema, not memory data: the server clock is fine.
                " applied_at timestamptz NOT NULL DEFAULT now())"
            ).format(table=table)
        )
        done = {row[0] for row in conn.execute(sql.SQL("SELECT version FROM {}").format(table))}
        for migration in sorted(MIGRATIONS, key=lambda m: m.version):
            if migration.version in done:
                continue
            for statement in migration.build(namespace, hnsw):
                conn.execute(statement)
            if migration.rewrite is not None:
                migration.rewrite(conn, namespace)
            conn.execute(
                sql.SQL("INSERT INTO {} (version, name) VALUES (%s, %s)").format(table),
                (migration.version, migration.name),
            )
            applied.append(migration.version)
    return applied


def applied_versions(conn: psycopg.Connection[Any], namespace: Namespace) -> list[int]:
    """The versions recorded in the migrations table, in order (with any duplicates)."""
    rows = conn.execute(
        sql.SQL("SELECT version FROM {} ORDER BY version").format(
            sql.Identifier(namespace.migrations_table)
        )
    ).fetchall()
    return [row[0] for row in rows]


def drop_schema(conn: psycopg.Connection[Any], namespace: Namespace) -> None:
    """Drop every table of `namespace` (tests, and runs that clean up after themselves)."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
        conn.execute(
            sql.SQL("DROP TABLE IF EXISTS {}, {}, {}, {}").format(
                sql.Identifier(namespace.audit_table),
                sql.Identifier(namespace.facts_table),
                sql.Identifier(namespace.users_table),
                sql.Identifier(namespace.migrations_table),
            )
        )

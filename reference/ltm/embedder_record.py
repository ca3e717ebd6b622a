"""Which embedder's vectors a namespace's facts table holds, recorded as the table's
comment (`memh_embedder=<identity>`): a store with another embedder refuses to open it,
since vectors of two embedders do not mix. A table from before the record is stamped by
the first store to open it."""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql

from reference.errors import ConfigurationError
from reference.keys import Namespace
from reference.ltm.migrations import _LOCK_KEY

PREFIX = "memh_embedder="


def recorded_embedder(conn: psycopg.Connection[Any], namespace: Namespace) -> str | None:
    """The identity recorded on the facts table, or None."""
    row = conn.execute(
        "SELECT obj_description(to_regclass(%s), 'pg_class')", (namespace.facts_table,)
    ).fetchone()
    comment = row[0] if row else None
    if comment is None or not comment.startswith(PREFIX):
        return None
    return str(comment[len(PREFIX) :])


def check_embedder(conn: psycopg.Connection[Any], namespace: Namespace, identity: str) -> None:
    """Record `identity` on a table without one; a different one is a `ConfigurationError`."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
        wrote = recorded_embedder(conn, namespace)
        if wrote is None:
            conn.execute(
                sql.SQL("COMMENT ON TABLE {} IS {}").format(
                    sql.Identifier(namespace.facts_table), sql.Literal(PREFIX + identity)
                )
            )
        elif wrote != identity:
            raise ConfigurationError(
                f"long-term table {namespace.facts_table!r} holds vectors of embedder "
                f"{wrote!r}; this store embeds with {identity!r} (choose that embedder and "
                "runtime: MEMH_EMBEDDER, MEMH_EMBEDDER_RUNTIME; or use another prefix)"
            )

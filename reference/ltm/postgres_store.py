"""The PostgreSQL + pgvector long-term store.

Search: within one user, per-user filters make an HNSW scan unreliable before pgvector
0.8 (the index returns `ef_search` candidates, and the filter then drops other users'
rows, leaving fewer than k). Before 0.8 the store therefore scores the user's live facts
exactly (the per-user index finds them, a materialised CTE keeps the planner off the HNSW
index). From 0.8 on, `hnsw.iterative_scan = strict_order` keeps scanning until k rows
pass the filter, and the planner may use the index.

Connections, transactions and faults: `reference.ltm.pg_pool`.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

from reference.clock import Clock
from reference.errors import MemoryStoreError
from reference.ids import new_id
from reference.keys import Namespace
from reference.lexical import lexical_terms
from reference.ltm.base import LongTermStore
from reference.ltm.common import audit_draft, nonzero_vector, storable_json, storable_text
from reference.ltm.dispatch import MethodPerOperation
from reference.ltm.filters import LtmFilter
from reference.ltm.migrations import HnswParams
from reference.ltm.pg_pool import PostgresConnections, pg_guarded
from reference.ltm.pg_rows import RenderedStatements
from reference.ltm.pg_rows import columns as _columns
from reference.ltm.pg_rows import fact as _fact
from reference.ltm.postgres_forgetting import (
    ForgettingStatements,
    PostgresForgetting,
    value_sealed_at,
)
from reference.ltm.primitives import AuditLog, UpsertFact
from reference.models import AuditEntry, Category, Fact, Hit
from reference.resilience import (
    DEFAULT_RETRY,
    DEFAULT_TIMEOUTS,
    RetryPolicy,
    Timeouts,
)
from reference.text_interfaces import Embedder

_AUDIT_COLUMNS = [
    *("fact_id", "user_id", "category", "key", "action", "actor", "at", "version"),
    *("old_value", "new_value", "cause"),
]
_LIVE = "status = 'active' AND (expires_at IS NULL OR expires_at > %(now)s)"
_UPSERT_ATTEMPTS = 5


class PostgresLongTermStore(
    MethodPerOperation, PostgresConnections, PostgresForgetting, LongTermStore
):
    """Facts in one table per namespace, audited in another, searched with pgvector."""

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
        self._init_connections(
            url,
            pool_size=pool_size,
            hnsw=HnswParams(m=hnsw_m, ef_construction=hnsw_ef_construction),
            ef_search=hnsw_ef_search,
            exact_search=exact_search,
            timeouts=timeouts,
            retry=retry,
        )
        self._sql = _Statements(namespace)
        self._fsql = ForgettingStatements(namespace)

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
    def _upsert(self, op: UpsertFact) -> Fact:
        (
            user_id,
            category,
            key,
            value,
            text,
            importance,
            expires_at,
            actor,
            embedding,
            now,
            cause,
        ) = op
        storable_json("value", value)
        storable_text("key", key)
        storable_text("text", text)
        vector = nonzero_vector("embedding", embedding)
        lexemes = lexical_terms(text)
        ident = {"user_id": user_id, "category": category.value, "key": key}
        sealed = value_sealed_at(value)
        with self._transaction(pipelined=True) as cur:
            for _ in range(_UPSERT_ATTEMPTS):
                prior = cur.execute(self._sql.lock_current, ident).fetchone()
                params = {
                    **ident,
                    "fact_id": _new_fact_id(),
                    "value": Jsonb(value),
                    "sealed_at": sealed,
                    "text": text,
                    "lexemes": lexemes,
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
            entry = audit_draft(fact, action, actor, now, old_value, fact.value, cause)
            self._write_audit(cur, [entry])
        return fact

    @pg_guarded(idempotent=lambda kw: not kw["touch"])
    def _fetch(self, flt: LtmFilter, now: float, *, touch: bool) -> list[Fact]:
        where, params = _where(flt, now)
        statement = self._sql.touch(where) if touch else self._sql.list_facts(where)
        with self._transaction(read=not touch, single=touch) as cur:
            rows = cur.execute(statement, params).fetchall()
        facts = [_fact(r) for r in rows]
        if touch:  # UPDATE ... RETURNING keeps no order
            facts.sort(key=lambda f: (f.created_at, f.fact_id))
        return facts

    @pg_guarded(idempotent=lambda kw: not kw["touch"])
    def _search(
        self, embedding: list[float], flt: LtmFilter, k: int, now: float, *, touch: bool
    ) -> list[Hit[Fact]]:
        vector = nonzero_vector("embedding", embedding)
        where, params = _where(flt, now)
        params.update(query=vector, k=k)
        statement = self._sql.query(where, exact=self._exact_search is not False, touch=touch)
        with self._transaction(read=not touch, single=touch) as cur:
            rows = cur.execute(statement, params).fetchall()
        # Neither UPDATE ... RETURNING nor the join keeps the ranking's order.
        rows.sort(key=lambda r: (r[-1], r[0]))
        return [Hit(record=_fact(r), score=1.0 - float(r[-1])) for r in rows]

    @pg_guarded(idempotent=True)
    def _ranked(
        self, embedding: list[float], terms: list[str], flt: LtmFilter, k: int, now: float
    ) -> tuple[list[str], int, list[tuple[str, list[str]]]]:
        # Both statements in one pipeline: one round trip; the dense one selects ids only.
        vector = nonzero_vector("embedding", embedding)
        where, params = _where(flt, now)
        dense_params = {**params, "query": vector, "k": k}
        exact = self._exact_search is not False
        lexemes = [_tsquery_lexeme(term) for term in terms]
        params.update(terms=terms, term_queries=lexemes, any_term=" | ".join(lexemes))
        matches: list[tuple[Any, ...]] = []
        with (
            self._transaction(read=True) as cur,
            cur.connection.pipeline(),
            cur.connection.cursor() as lexical,
        ):
            cur.execute(self._sql.query(where, exact=exact, tail=self._sql.IDS), dense_params)
            if terms:
                lexical.execute(self._sql.lexical(where), params)
            dense = cur.fetchall()
            if terms:
                matches = lexical.fetchall()
        dense.sort(key=lambda r: (r[1], r[0]))
        total = int(matches[0][0]) if matches else 0
        return [r[0] for r in dense], total, [(fact_id, list(held)) for _, fact_id, held in matches]

    @pg_guarded(idempotent=True)
    def _lexical_matches(
        self, terms: list[str], flt: LtmFilter, now: float
    ) -> tuple[int, list[tuple[str, list[str]]]]:
        where, params = _where(flt, now)
        lexemes = [_tsquery_lexeme(term) for term in terms]
        params.update(terms=terms, term_queries=lexemes, any_term=" | ".join(lexemes))
        with self._transaction(read=True) as cur:
            rows = cur.execute(self._sql.lexical(where), params).fetchall()
        total = int(rows[0][0]) if rows else 0  # no candidate: no ranking, the total unused
        return total, [(fact_id, list(held)) for _, fact_id, held in rows]

    @pg_guarded(idempotent=True)
    def _archive(self, flt: LtmFilter, *, actor: str, now: float, cause: str) -> int:
        where, params = _where(flt, now)
        params["cause"] = cause
        with self._transaction() as cur:
            rows = cur.execute(self._sql.archive(where), params).fetchall()
            entries = [
                audit_draft(_fact(r), "archive", actor, now, None, None, cause) for r in rows
            ]
            self._write_audit(cur, entries)
        return len(entries)

    @pg_guarded(idempotent=True)
    def _delete(self, flt: LtmFilter, *, actor: str, now: float, cause: str) -> int:
        where, params = _where(flt, now)
        with self._transaction() as cur:
            rows = cur.execute(self._sql.delete(where), params).fetchall()
            self._write_audit(cur, _deleted(rows, actor, now, cause))
        return len(rows)

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
    def _audit_log(self, op: AuditLog) -> list[AuditEntry]:
        params = {
            "user_id": op.user_id,
            "fact_id": op.fact_id,
            "since": op.since,
            "until": op.until,
        }
        with self._transaction(read=True) as cur:
            rows = cur.execute(self._sql.audit_log, params).fetchall()
        return [_audit_entry(r) for r in rows]


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
            " access_count, expires_at, sealed_at, lexemes)"
            " VALUES (%(fact_id)s, %(user_id)s, %(category)s, %(key)s, %(value)s, %(text)s,"
            " %(embedding)s, %(importance)s, 1, 'active', %(now)s, %(now)s, %(now)s, 0,"
            " %(expires_at)s, %(sealed_at)s, array_to_tsvector(%(lexemes)s::text[]))"
            " ON CONFLICT (user_id, category, key) DO UPDATE SET"
            " value = EXCLUDED.value, sealed_at = EXCLUDED.sealed_at,"
            " text = EXCLUDED.text, embedding = EXCLUDED.embedding, lexemes = EXCLUDED.lexemes,"
            " importance = EXCLUDED.importance, expires_at = EXCLUDED.expires_at,"
            " version = f.version + 1, status = 'active', updated_at = EXCLUDED.updated_at,"
            " archive_reason = NULL"
            " WHERE f.version = %(prior_version)s"
            " RETURNING {f_cols}"
        )
        self.insert_audit = q(
            "INSERT INTO {audit} ({audit_cols}) VALUES ({placeholders})",
            placeholders=sql.SQL(", ").join(sql.Placeholder() * len(_AUDIT_COLUMNS)),
        )
        self.audit_log = q(
            "SELECT audit_id, {audit_cols} FROM {audit}"
            " WHERE (%(user_id)s::text IS NULL OR user_id = %(user_id)s)"
            " AND (%(fact_id)s::text IS NULL OR fact_id = %(fact_id)s)"
            " AND at >= %(since)s::float8 AND at <= %(until)s::float8 ORDER BY audit_id"
        )

    # Statements over a filter: `where` is the clause text of `_where`.
    _TOUCH = (
        " UPDATE {facts} AS f SET last_accessed_at = %(now)s,"
        " access_count = f.access_count + 1"
        " FROM top WHERE f.fact_id = top.fact_id AND f.status = 'active'"
        " RETURNING {f_cols}, top.distance"
    )

    _PEEK = " SELECT {f_cols}, top.distance FROM {facts} AS f JOIN top ON f.fact_id = top.fact_id"

    #: The ranking alone: ids and distances.
    IDS = " SELECT fact_id, distance FROM top"

    def query(self, where: str, *, exact: bool, touch: bool = False, tail: str = "") -> bytes:
        """The top-k facts by distance, with `tail` selecting from `top` (default: the
        facts' rows, touched or not)."""
        tail = tail or (self._TOUCH if touch else self._PEEK)
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

    def lexical(self, where: str) -> bytes:
        # How many facts are in scope, then (the GIN index finds them) the rows holding
        # any term, each with its terms in query order.
        return self._over(
            "SELECT (SELECT count(*) FROM {facts} WHERE {where}), fact_id,"
            " ARRAY(SELECT t FROM unnest(%(terms)s::text[], %(term_queries)s::tsquery[])"
            " WITH ORDINALITY AS q(t, tq, n) WHERE lexemes @@ tq ORDER BY n)"
            " FROM {facts} WHERE {where} AND lexemes @@ %(any_term)s::tsquery",
            where,
        )

    def archive(self, where: str) -> bytes:
        return self._over(
            "UPDATE {facts} SET status = 'archived', updated_at = %(now)s,"
            " archive_reason = %(cause)s WHERE {where} AND status = 'active' RETURNING {cols}",
            where,
        )

    def delete(self, where: str) -> bytes:
        return self._over("DELETE FROM {facts} WHERE {where} RETURNING {cols}", where)

    def touch(self, where: str) -> bytes:
        return self._over(
            "UPDATE {facts} SET last_accessed_at = %(now)s, access_count = access_count + 1"
            " WHERE {where} RETURNING {cols}",
            where,
        )

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


def _deleted(rows: list[tuple[Any, ...]], actor: str, now: float, cause: str) -> list[AuditEntry]:
    # A deletion's audit keeps the value it removed; erasure redacts it later.
    facts = [_fact(r) for r in rows]
    return [audit_draft(f, "delete", actor, now, f.value, None, cause) for f in facts]


def _tsquery_lexeme(term: str) -> str:
    """A term as a quoted lexeme of tsquery input syntax (matched exactly, no parsing)."""
    return "'" + term.replace("\\", "\\\\").replace("'", "''") + "'"


def _new_fact_id() -> str:
    return new_id()

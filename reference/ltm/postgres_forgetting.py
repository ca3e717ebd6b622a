"""The forgetting engine's primitives of `PostgresLongTermStore` (a mixin, and its SQL).

Same transaction rules as the store: each call is one transaction on one pooled
connection, and every change writes its audit rows in it. Erasure redacts audit values
in place (`REDACTED`); anonymisation strips the sealed original out of the audit values
with JSONB operators, the SQL twin of `reference.crypto.anonymise_value`.

The due scan (`_scan_due`) ORs one partial index per kind of deadline (migrations 1 and
3): expiry, an archived fact's `updated_at`, and the `sealed_at` column, which every
statement writing `value` writes with it (`value_sealed_at`, i.e. `policy.sealed_at`).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

from reference.crypto import ANONYMISED, SEALED, SEALED_AT, anonymise_value
from reference.keys import Namespace
from reference.ltm.base import due_margin
from reference.ltm.common import audit_draft, storable_json
from reference.ltm.filters import REDACTED, FactChangeCounts, FactChanges, LtmFilter
from reference.ltm.pg_pool import pg_guarded
from reference.ltm.pg_rows import RenderedStatements, columns, fact
from reference.models import AuditEntry, Category, Fact, RetentionUpdate
from reference.policy.sweep import DueRule, sealed_at

_REDACT = {"redacted": Jsonb(REDACTED)}
_SEAL_KEYS = {"sealed": SEALED, "sealed_at": SEALED_AT, "anonymised": Jsonb({ANONYMISED: True})}
_REDACT_SET = (
    "old_value = CASE WHEN old_value IS NULL THEN NULL ELSE %(redacted)s END,"
    " new_value = CASE WHEN new_value IS NULL THEN NULL ELSE %(redacted)s END"
)


def value_sealed_at(value: dict[str, Any]) -> float | None:
    """The facts table's `sealed_at` for a value about to be stored: `policy.sealed_at`
    (the due index finds sealed facts by it). Every statement that writes `value` writes
    this with it; migration 3 backfilled the rows written before."""
    probe = Fact(
        fact_id="-",
        user_id="-",
        category=Category.FACT,
        key="-",
        value=value,
        text="",
        version=1,
        created_at=0.0,
        updated_at=0.0,
        last_accessed_at=0.0,
    )
    return sealed_at(probe)


def _strip(column: str) -> str:
    # `anonymise_value` in SQL: a value holding a sealed original loses it and is marked.
    return (
        f"CASE WHEN jsonb_typeof({column} -> %(sealed)s) = 'string'"
        f" THEN ({column} - %(sealed)s - %(sealed_at)s) || %(anonymised)s ELSE {column} END"
    )


class ForgettingStatements(RenderedStatements):
    """The engine's SQL for one namespace: identifiers quoted once, values as parameters,
    each statement rendered once."""

    def __init__(self, ns: Namespace) -> None:
        super().__init__(
            {
                "facts": sql.Identifier(ns.facts_table),
                "audit": sql.Identifier(ns.audit_table),
                "users": sql.Identifier(ns.users_table),
                "cols": columns(),
                "f_cols": columns("f."),
            }
        )
        q = self._compose
        self.update_retention = q(
            "UPDATE {facts} AS f SET last_accessed_at = %(now)s,"
            " access_count = f.access_count + 1, expires_at = u.expires_at,"
            " importance = u.importance"
            " FROM unnest(%(ids)s::text[], %(expires)s::float8[], %(importance)s::real[])"
            " AS u(fact_id, expires_at, importance)"
            " WHERE f.fact_id = u.fact_id AND f.user_id = %(user_id)s AND f.status = 'active'"
            " AND (f.expires_at IS NULL OR f.expires_at > %(now)s)"
        )
        # Keyset pages on the primary key: each page is an index range scan.
        self.scan_first = q(
            "SELECT {cols} FROM {facts} WHERE status <> 'deleted' ORDER BY fact_id LIMIT %(limit)s"
        )
        self.scan_after = q(
            "SELECT {cols} FROM {facts} WHERE fact_id > %(after)s AND status <> 'deleted'"
            " ORDER BY fact_id LIMIT %(limit)s"
        )
        self.delete_ids = q(
            "DELETE FROM {facts} WHERE fact_id = ANY(%(ids)s::text[]) RETURNING {cols}"
        )
        self.archive_ids = q(
            "UPDATE {facts} AS f SET status = 'archived', updated_at = %(now)s,"
            " archive_reason = u.cause"
            " FROM unnest(%(ids)s::text[], %(causes)s::text[]) AS u(fact_id, cause)"
            " WHERE f.fact_id = u.fact_id AND f.status = 'active' RETURNING {f_cols}"
        )
        # Anonymising rewrites the value only: the write time (updated_at) stays, so
        # TTLs, decay and archival keep counting from the user's own write.
        self.anonymise = q(
            "UPDATE {facts} AS f SET value = u.value, sealed_at = u.sealed_at"
            " FROM unnest(%(ids)s::text[], %(values)s::jsonb[], %(sealed_ats)s::float8[])"
            " AS u(fact_id, value, sealed_at)"
            " WHERE f.fact_id = u.fact_id AND f.status <> 'deleted' RETURNING {f_cols}"
        )
        self.strip_seals = q(
            "UPDATE {audit} SET"
            f" old_value = {_strip('old_value')}, new_value = {_strip('new_value')}"
            " WHERE fact_id = ANY(%(ids)s::text[])"
            " AND (jsonb_typeof(old_value -> %(sealed)s) = 'string'"
            " OR jsonb_typeof(new_value -> %(sealed)s) = 'string')"
        )
        self.redact_facts = q(
            f"UPDATE {{audit}} SET {_REDACT_SET} WHERE fact_id = ANY(%(ids)s::text[])"
        )
        self.mark_active = q(
            "INSERT INTO {users} AS u (user_id, last_active_at)"
            " SELECT * FROM unnest(%(users)s::text[], %(ats)s::float8[])"
            " ON CONFLICT (user_id) DO UPDATE"
            " SET last_active_at = GREATEST(u.last_active_at, EXCLUDED.last_active_at)"
        )
        self.last_active = q(
            "SELECT user_id, last_active_at FROM {users} WHERE user_id = ANY(%(users)s::text[])"
        )
        self.forget_activity = q("DELETE FROM {users} WHERE user_id = %(user_id)s")
        # A range of the last_active_at index (migration 3).
        self.activity_between = q(
            "SELECT user_id, last_active_at FROM {users}"
            " WHERE last_active_at > %(after)s AND last_active_at <= %(until)s"
        )

    def scan_due(self, rule: DueRule, *, first: bool) -> bytes:
        """A page of the facts that may be due under `rule` (`_scan_due`): one partial
        index per kind of deadline (expiry, an archived fact's grace, a seal's
        anonymisation deadline), OR-ed into one bitmap; a rule field that is None drops
        its kind. Parameters: now, archived_until, sealed_until, after, limit."""
        due = ["expires_at <= %(now)s"]
        if rule.archive_grace_s is not None:
            due.append("(status = 'archived' AND updated_at <= %(archived_until)s)")
        if rule.anonymise_after_s is not None:
            due.append("sealed_at <= %(sealed_until)s")
        return self._over(
            "SELECT {cols} FROM {facts} WHERE status <> 'deleted'"
            + ("" if first else " AND fact_id > %(after)s")
            + " AND ({where}) ORDER BY fact_id LIMIT %(limit)s",
            " OR ".join(due),
        )

    def erase_facts(self, where: str) -> bytes:
        return self._over("DELETE FROM {facts} WHERE {where} RETURNING {cols}", where)

    def redact_user(self, where: str) -> bytes:
        """Redact the user's audit entries that the erase filter names, or of facts gone."""
        return self._over(
            f"UPDATE {{audit}} SET {_REDACT_SET} WHERE user_id = %(user_id)s"
            " AND (({where}) OR fact_id = ANY(%(gone)s::text[]))",
            where,
        )


def erase_where(flt: LtmFilter) -> tuple[str, dict[str, Any]]:
    """The filter's user, categories, keys and fact_ids, whatever the status: erasure
    reaches dead facts, and the same clause selects the audit rows to redact."""
    clauses = ["user_id = %(user_id)s"]
    params: dict[str, Any] = {"user_id": flt.user_id}
    if flt.categories is not None:
        clauses.append("category = ANY(%(categories)s::text[])")
        params["categories"] = sorted(c.value for c in flt.categories)
    if flt.keys is not None:
        clauses.append("key = ANY(%(keys)s::text[])")
        params["keys"] = sorted(flt.keys)
    if flt.fact_ids is not None:
        clauses.append("fact_id = ANY(%(fact_ids)s::text[])")
        params["fact_ids"] = sorted(flt.fact_ids)
    return " AND ".join(clauses), params


class PostgresForgetting:
    """The engine primitives; mixed into `PostgresLongTermStore`, which provides
    `_transaction`, `_write_audit` and `_fsql`."""

    _fsql: ForgettingStatements

    if TYPE_CHECKING:

        def _transaction(
            self, *, read: bool = False
        ) -> AbstractContextManager[psycopg.Cursor[Any]]: ...

        def _write_audit(self, cur: psycopg.Cursor[Any], entries: list[AuditEntry]) -> None: ...

    @pg_guarded(idempotent=False)
    def _update_retention(self, user_id: str, updates: list[RetentionUpdate], now: float) -> int:
        params = {
            "user_id": user_id,
            "now": now,
            "ids": [u.record_id for u in updates],
            "expires": [u.expires_at for u in updates],
            "importance": [u.importance for u in updates],
        }
        with self._transaction() as cur:
            cur.execute(self._fsql.update_retention, params)
            return cur.rowcount

    @pg_guarded(idempotent=True)
    def _erase(self, flt: LtmFilter, *, actor: str, now: float, cause: str) -> int:
        where, params = erase_where(flt)
        with self._transaction() as cur:
            rows = cur.execute(self._fsql.erase_facts(where), params).fetchall()
            gone = [r[0] for r in rows]
            cur.execute(self._fsql.redact_user(where), {**params, "gone": gone, **_REDACT})
            self._write_audit(cur, _drafts(rows, "erase", actor, now, lambda _: cause))
        return len(rows)

    @pg_guarded(idempotent=True)
    def _scan_all(self, after: str | None, limit: int) -> list[Fact]:
        statement = self._fsql.scan_first if after is None else self._fsql.scan_after
        with self._transaction(read=True) as cur:
            rows = cur.execute(statement, {"after": after, "limit": limit}).fetchall()
        return [fact(r) for r in rows]

    @pg_guarded(idempotent=False)
    def _apply_changes(self, changes: FactChanges, *, actor: str, now: float) -> FactChangeCounts:
        q = self._fsql
        why = changes.cause_of
        removed = changes.delete | changes.erase
        anonymise = {k: v for k, v in changes.anonymise.items() if k not in removed}
        for value in anonymise.values():
            storable_json("anonymise", value)
        with self._transaction() as cur:
            deleted = _rows(cur, q.delete_ids, ids=sorted(changes.delete))
            # A deleted fact's audit keeps its masked value; the sealed original goes.
            self._write_audit(
                cur,
                [
                    audit_draft(
                        f, "delete", actor, now, anonymise_value(f.value), None, why(f.fact_id)
                    )
                    for f in map(fact, deleted)
                ],
            )
            if deleted:
                cur.execute(q.strip_seals, {"ids": [r[0] for r in deleted], **_SEAL_KEYS})
            erased = _rows(cur, q.delete_ids, ids=sorted(changes.erase - changes.delete))
            if erased:
                cur.execute(q.redact_facts, {"ids": [r[0] for r in erased], **_REDACT})
            self._write_audit(cur, _drafts(erased, "erase", actor, now, why))
            to_archive = sorted(changes.archive - removed)
            causes = [why(i) for i in to_archive]
            archived = _rows(cur, q.archive_ids, ids=to_archive, causes=causes, now=now)
            self._write_audit(cur, _drafts(archived, "archive", actor, now, why))
            rewritten: list[tuple[Any, ...]] = []
            if anonymise:
                ids = sorted(anonymise)
                params = {
                    "ids": ids,
                    "values": [Jsonb(anonymise[i]) for i in ids],
                    # The new value has no seal, or at most one it could not strip.
                    "sealed_ats": [value_sealed_at(anonymise[i]) for i in ids],
                }
                rewritten = cur.execute(q.anonymise, params).fetchall()
                cur.execute(q.strip_seals, {"ids": [r[0] for r in rewritten], **_SEAL_KEYS})
                self._write_audit(
                    cur,
                    [
                        audit_draft(f, "anonymise", actor, now, None, f.value, why(f.fact_id))
                        for f in map(fact, rewritten)
                    ],
                )
        return FactChangeCounts(
            deleted=len(deleted),
            erased=len(erased),
            archived=len(archived),
            anonymised=len(rewritten),
        )

    @pg_guarded(idempotent=True)
    def _scan_due(self, now: float, rule: DueRule, after: str | None, limit: int) -> list[Fact]:
        margin = due_margin(now)
        params: dict[str, Any] = {"now": now, "after": after, "limit": limit}
        if rule.archive_grace_s is not None:
            params["archived_until"] = now - rule.archive_grace_s + margin
        if rule.anonymise_after_s is not None:
            params["sealed_until"] = now - rule.anonymise_after_s + margin
        statement = self._fsql.scan_due(rule, first=after is None)
        with self._transaction(read=True) as cur:
            rows = cur.execute(statement, params).fetchall()
        return [fact(r) for r in rows]

    @pg_guarded(idempotent=True)
    def _activity_between(self, after: float, until: float) -> dict[str, float]:
        with self._transaction(read=True) as cur:
            rows = cur.execute(self._fsql.activity_between, {"after": after, "until": until})
            return {str(r[0]): float(r[1]) for r in rows.fetchall()}

    @pg_guarded(idempotent=True)
    def _mark_active(self, activity: dict[str, float]) -> None:
        users = sorted(activity)
        params = {"users": users, "ats": [activity[u] for u in users]}
        with self._transaction() as cur:
            cur.execute(self._fsql.mark_active, params)

    @pg_guarded(idempotent=True)
    def _last_active(self, user_ids: list[str]) -> dict[str, float]:
        with self._transaction(read=True) as cur:
            rows = cur.execute(self._fsql.last_active, {"users": user_ids}).fetchall()
        return {str(r[0]): float(r[1]) for r in rows}

    @pg_guarded(idempotent=True)
    def _forget_activity(self, user_id: str) -> bool:
        with self._transaction() as cur:
            cur.execute(self._fsql.forget_activity, {"user_id": user_id})
            return cur.rowcount > 0


def _rows(cur: psycopg.Cursor[Any], statement: bytes, **params: Any) -> list[Any]:
    # An empty id list would cost a round trip for nothing.
    return cur.execute(statement, params).fetchall() if params["ids"] else []


def _drafts(
    rows: list[Any], action: str, actor: str, now: float, why: Callable[[str], str]
) -> list[AuditEntry]:
    """Audit entries without values, each with `why(fact_id)` as its cause."""
    facts = [fact(r) for r in rows]
    return [audit_draft(f, action, actor, now, None, None, why(f.fact_id)) for f in facts]


__all__ = ["ForgettingStatements", "PostgresForgetting", "erase_where", "value_sealed_at"]

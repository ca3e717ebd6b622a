"""After a load run: are the servers still consistent? The conformance promises, checked on data.

A load run that ends in overload, errors or a stop in the middle of turns (Locust kills
the users' greenlets when the time is up) must leave the memory as its promises say:

- **session bookkeeping** (Redis): every session id in a user's session set has its hash,
  every hash is in its user's set and in the expiry index at its `expires_at`, and no
  context list outlives its hash (`reference/session/redis_store.py`'s layout);
- **STM → session**: every live STM record belongs to a live session of its user. A
  record outlives its session only until the next sweep consolidates or drops it; a
  load run does not sweep and is shorter than the session TTL (30 min), so here each must
  have one;
- **LTM → audit**: every fact has the audit entry of its current version, and every audit
  entry whose fact should exist (its last action an insert, update or archive) has it:
  a fact and its audit entry are written in one transaction;
- **namespace**: nothing of the run's users is outside the run's namespace: no Redis key
  naming them outside `prefix:`, no record of theirs in another Chroma collection, no
  row of theirs in another PostgreSQL table with a `user_id` column.

`check_erased` then checks that erasing the run's users (`delete_user_data`) left none of
their sessions, STM records or facts (audit entries stay: the audit trail is kept by
design, values of deletions included).

Checks read through the stores' public API where it has the answer, and through the
server's own client for what the API hides (Redis' indexes, other collections and
tables). A check that cannot reach its server is reported as an error naming the layer,
not as a pass.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from reference.ltm.filters import LtmFilter
from reference.stm.filters import StmFilter
from reference.system import MemorySystem

__all__ = ["MAX_PROBLEMS", "ConsistencyReport", "check_consistency", "check_erased"]

MAX_PROBLEMS = 20
#: The audit action that leaves its fact in the table (anything else removes it).
_KEEPS_FACT = frozenset({"insert", "update", "archive", "anonymise"})


@dataclass
class ConsistencyReport:
    """What was checked (counts), what is wrong (first MAX_PROBLEMS), what could not run."""

    name: str
    checked: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    problem_count: int = 0
    errors: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problem_count and not self.errors

    def problem(self, text: str) -> None:
        self.problem_count += 1
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append(text)

    def count(self, what: str, n: int = 1) -> None:
        self.checked[what] = self.checked.get(what, 0) + n

    def run(self, layer: str, check: Callable[[], None]) -> None:
        """Run one check; a server error is recorded against `layer`, not raised."""
        try:
            check()
        except (ConnectionError, OSError, TimeoutError) as exc:
            self.errors.append(f"{layer}: could not check: {type(exc).__name__}: {exc}")
        except Exception as exc:  # drivers' own error types (psycopg, chromadb, redis)
            if not _is_driver_error(exc):
                raise
            self.errors.append(f"{layer}: could not check: {type(exc).__name__}: {exc}")

    def as_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "checked": dict(self.checked),
            "problem_count": self.problem_count,
            "problems": list(self.problems),
            "errors": list(self.errors),
            "skipped": list(self.skipped),
        }

    def summary(self) -> str:
        checked = ", ".join(f"{n} {what}" for what, n in self.checked.items()) or "nothing"
        if self.ok:
            return f"{self.name}: consistent ({checked})"
        parts = [f"{self.name}: INCONSISTENT ({checked})"] if self.problem_count else []
        if not self.problem_count:
            parts.append(f"{self.name}: NOT CHECKED ({checked})")
        parts += [f"  {p}" for p in self.problems]
        if self.problem_count > len(self.problems):
            parts.append(f"  ... {self.problem_count - len(self.problems)} more")
        parts += [f"  {e}" for e in self.errors]
        return "\n".join(parts)


def _is_driver_error(exc: Exception) -> bool:
    module = type(exc).__module__.split(".")[0]
    return module in {"redis", "psycopg", "psycopg_pool", "chromadb", "httpx"} or (
        type(exc).__name__ == "BackendUnavailable"
    )


def check_consistency(
    system: MemorySystem,
    *,
    user_ids: Sequence[str],
    marker: str | None = None,
    pg_url: str | None = None,
    sessions_outlived: bool = False,
) -> ConsistencyReport:
    """The run's users' data against the layers' promises (see the module docstring).

    `marker` is a substring of every user id of the run (e.g. `load-<token>`): the Redis
    namespace check looks for keys holding it. `pg_url` lets the namespace check look at
    the other tables of the database (skipped without it). `sessions_outlived`: the run
    lived through more than a session TTL (a scaled clock), so an STM record may wait for
    the next sweep after its session ended, and STM -> session is skipped.
    """
    report = ConsistencyReport("consistency")
    report.count("users", len(user_ids))
    sessions: dict[str, set[str]] = {}
    report.run("session", lambda: _check_sessions(system, user_ids, sessions, report))
    if sessions_outlived:
        report.skipped.append("stm -> session: the run outlived the session TTL")
    elif len(sessions) == len(user_ids):
        report.run("stm", lambda: _check_stm(system, user_ids, sessions, report))
    else:
        report.skipped.append("stm -> session: the sessions could not be read")
    report.run("ltm", lambda: _check_ltm(system, user_ids, report))
    _check_namespace(system, user_ids, marker, pg_url, report)
    return report


def check_erased(system: MemorySystem, *, user_ids: Sequence[str]) -> ConsistencyReport:
    """After `delete_user_data` of each user: none of their sessions, STM records or facts."""
    report = ConsistencyReport("erasure")
    report.count("users", len(user_ids))

    def check() -> None:
        for user in user_ids:
            left = {
                "sessions": len(system.session.list_user_sessions(user_id=user)),
                "stm records": system.stm.count(filter=StmFilter(user_id=user, include_dead=True)),
                "facts": system.ltm.count(filter=LtmFilter(user_id=user, include_dead=True)),
            }
            for what, n in left.items():
                if n:
                    report.problem(f"user {user}: {n} {what} left after erasure")

    report.run("erasure", check)
    return report


# --------------------------------------------------------------------------- session
def _check_sessions(
    system: MemorySystem,
    user_ids: Iterable[str],
    sessions: dict[str, set[str]],
    report: ConsistencyReport,
) -> None:
    store = system.session
    client = getattr(store, "client", None)
    for user in user_ids:
        if client is not None:
            sessions[user] = _redis_sessions(store, client, user, report)
        else:  # in-memory: its one dict cannot disagree with itself; list the live ones
            live = store.list_user_sessions(user_id=user)
            sessions[user] = {s.session_id for s in live}
            report.count("sessions", len(live))
    if client is None:
        report.skipped.append("session indexes: not a Redis store")


def _redis_sessions(store: Any, client: Any, user: str, report: ConsistencyReport) -> set[str]:
    """The user's live session ids, checking the hash / set / expiry-index agreement."""
    ns, now = store.namespace, store.clock.now()
    listed = {_text(s) for s in client.smembers(ns.user_sessions_key(user))}
    prefix = ns.session_key(user, "")
    hashes = {
        key[len(prefix) :]
        for key in map(_text, client.scan_iter(match=_glob(prefix) + "*", count=500))
        if not key.endswith(":ctx")
    }
    contexts = {
        key[len(prefix) : -len(":ctx")]
        for key in map(_text, client.scan_iter(match=_glob(prefix) + "*:ctx", count=500))
    }
    live: set[str] = set()
    for sid in sorted(listed | hashes):
        report.count("sessions")
        where = f"session layer: user {user} session {sid}"
        if sid not in hashes:
            report.problem(f"{where}: in the user's session set without its hash")
            continue
        if sid not in listed:
            report.problem(f"{where}: hash without an entry in the user's session set")
        expires = client.hget(ns.session_key(user, sid), "expires_at")
        score = client.zscore(ns.session_expiry_key, ns.session_member(user, sid))
        if expires is None:
            report.problem(f"{where}: hash without expires_at")
        elif score is None:
            report.problem(f"{where}: not in the expiry index")
        elif abs(float(score) - float(_text(expires))) > 1e-3:
            report.problem(f"{where}: expiry index at {score} but the hash says {expires}")
        if expires is not None and float(_text(expires)) > now:
            live.add(sid)
    for sid in sorted(contexts - hashes):
        report.problem(f"session layer: user {user} session {sid}: context list without hash")
    return live


# --------------------------------------------------------------------------- STM
def _check_stm(
    system: MemorySystem,
    user_ids: Iterable[str],
    sessions: dict[str, set[str]],
    report: ConsistencyReport,
) -> None:
    for user in user_ids:
        for record in system.stm.records(filter=StmFilter(user_id=user)):
            report.count("stm records")
            if record.session_id not in sessions[user]:
                report.problem(
                    f"stm: record {record.record_id} of user {user} belongs to session "
                    f"{record.session_id}, which the session layer does not hold"
                )


# --------------------------------------------------------------------------- LTM
def _check_ltm(system: MemorySystem, user_ids: Iterable[str], report: ConsistencyReport) -> None:
    for user in user_ids:
        facts = {
            f.fact_id: f
            for f in system.ltm.facts(filter=LtmFilter(user_id=user, include_dead=True))
        }
        audit = system.ltm.audit_log(user_id=user)
        report.count("facts", len(facts))
        report.count("audit entries", len(audit))
        versions: dict[str, set[int]] = {}
        last: dict[str, str] = {}
        for entry in audit:  # in audit_id order: the last entry of a fact is its last action
            versions.setdefault(entry.fact_id, set()).add(entry.version)
            last[entry.fact_id] = entry.action
        for fact in facts.values():
            if fact.version not in versions.get(fact.fact_id, set()):
                report.problem(
                    f"ltm: fact {fact.fact_id} of user {user} ({fact.category}/{fact.key}) "
                    f"at version {fact.version} has no audit entry of that version"
                )
        for fact_id, action in last.items():
            if action in _KEEPS_FACT and fact_id not in facts:
                report.problem(
                    f"ltm: audit entry '{action}' of fact {fact_id} of user {user}, "
                    "but no such fact"
                )


# --------------------------------------------------------------------------- namespace
def _check_namespace(
    system: MemorySystem,
    user_ids: Sequence[str],
    marker: str | None,
    pg_url: str | None,
    report: ConsistencyReport,
) -> None:
    users = list(user_ids)
    client = getattr(system.session, "client", None)
    if client is not None and marker:
        prefix = system.session.namespace.prefix + ":"

        def redis_keys() -> None:
            for key in map(_text, client.scan_iter(match=f"*{_glob(marker)}*", count=1000)):
                report.count("redis keys")
                if not key.startswith(prefix):
                    report.problem(f"namespace: Redis key {key!r} outside {prefix!r}")

        report.run("session", redis_keys)
    else:
        report.skipped.append("namespace (Redis): not a Redis store, or no marker")
    chroma = getattr(system.stm, "client", None)
    if chroma is not None and users:
        own = system.stm.namespace.stm_collection

        def collections() -> None:
            for item in chroma.list_collections():
                name = getattr(item, "name", item)
                report.count("chroma collections")
                if name == own:
                    continue
                found = chroma.get_collection(name).get(
                    where={"user_id": {"$in": users}}, limit=1, include=[]
                )
                if found["ids"]:
                    report.problem(
                        f"namespace: Chroma collection {name!r} holds a run user's record"
                    )

        report.run("stm", collections)
    else:
        report.skipped.append("namespace (Chroma): not a Chroma store")
    if pg_url and users:
        ns = system.ltm.namespace
        own_tables = {ns.facts_table, ns.audit_table, ns.users_table}
        report.run("ltm", lambda: _pg_outside(pg_url, own_tables, users, report))
    else:
        report.skipped.append("namespace (PostgreSQL): no PostgreSQL URL")


def _pg_outside(url: str, own: set[str], users: list[str], report: ConsistencyReport) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(url, connect_timeout=5, autocommit=True) as conn:
        tables = conn.execute(
            "SELECT table_schema, table_name FROM information_schema.columns "
            "WHERE column_name = 'user_id' AND table_schema NOT IN "
            "('pg_catalog', 'information_schema')"
        ).fetchall()
        for schema, table in tables:
            report.count("pg tables")
            if table in own:
                continue
            query = sql.SQL("SELECT count(*) FROM {}.{} WHERE user_id = ANY(%s)").format(
                sql.Identifier(schema), sql.Identifier(table)
            )
            row = conn.execute(query, (users,)).fetchone()
            if row and row[0]:
                report.problem(
                    f"namespace: PostgreSQL table {schema}.{table} holds {row[0]} rows "
                    "of the run's users"
                )


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _glob(text: str) -> str:
    """`text` with Redis glob characters escaped."""
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)

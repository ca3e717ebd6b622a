"""The servers' files after an erasure: the erased values gone from the bytes on disk.

`erase_user` and the forget commands remove rows, records and keys; the servers' files
can still hold the old bytes. `reclaim_files` removes them, layer by layer:

- **PostgreSQL**: `VACUUM FULL` of the namespace's facts and audit tables (a plain
  `VACUUM` of the users table, which holds no value). A plain `VACUUM` is not enough:
  it compacts a page's live rows but leaves a deleted row's bytes in the freed space
  when no live row moves over them, and the GIN index of the facts' lexemes keeps a
  deleted fact's words as entry keys (`bench.erasure_reclaim`, 2,000 facts: the value
  in the facts' heap and lexeme index files after `VACUUM`, in the heap after `VACUUM`
  and `REINDEX` of the lexeme index, in no file after `VACUUM FULL`). `VACUUM FULL`
  rewrites the tables and rebuilds their indexes (the HNSW one too) under an exclusive
  lock: reads and writes of the namespace's facts wait for it. Then the WAL:
  `CHECKPOINT` writes the cleaned pages, and `pg_switch_wal()` + `CHECKPOINT` are
  repeated until every WAL segment that existed before is removed. That holds only
  with `wal_recycle = off` (set by `reference.ltm.embedded_pg` on every embedded
  server): a recycled segment is renamed, not erased, and keeps its old bytes until
  overwritten. The WAL steps run on the embedded server only (they need a superuser,
  and change its configuration); on a server given by URL they are skipped and
  reported.
- **Chroma** (every `chroma.sqlite3` one level under the data directory: the embedded
  client's and `chroma run`'s): the write-ahead log (`embeddings_queue`) keeps each
  record's document until the HNSW segment is persisted, so the log entries of records
  deleted since are removed (the delete entries stay, they hold only ids), the
  full-text index is merged (`optimize`) so no trigram of a deleted document stays in
  its segments, and the file is rebuilt with `VACUUM`: Chroma's own deletes leave the
  documents' bytes in the pages' free space (measured: all three documents of an
  erased user were still in `chroma.sqlite3`, in the metadata and full-text tables),
  and only a rebuild drops them. It holds SQLite's write lock for as long as the copy
  takes (the whole STM file). A WAL-mode database is then checkpointed with TRUNCATE.
  This runs in a child process (`reference/forgetting/chroma_files.py` says why).
- **Redis** keeps nothing on disk: the embedded server never snapshots and has no
  append-only file (`reference.session.embedded_redis`).

What stays: the vector of a deleted record in Chroma's HNSW files (marked deleted, no
text) until its slot is reused; freed disk blocks below the file system.
"""

from __future__ import annotations

import logging
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
from psycopg import sql

from reference.keys import Namespace

__all__ = ["Reclaimed", "reclaim_chroma_sqlite", "reclaim_files", "reclaim_postgres"]

log = logging.getLogger(__name__)

#: At most this many WAL switches per reclaim (segments allocated ahead are few).
MAX_WAL_SWITCHES = 16
#: How long Chroma's file cleanup may take (its rebuild copies the whole STM file).
CHROMA_TIMEOUT_S = 600.0


@dataclass
class Reclaimed:
    """What one reclaim did, and what it could not do (each a sentence, no value)."""

    done: list[str] = field(default_factory=list)
    residual: list[str] = field(default_factory=list)


def reclaim_postgres(url: str, namespace: Namespace, into: Reclaimed, *, wal: bool) -> None:
    """The tables rewritten, and with `wal` (a server of our own) the WAL cycled past
    every older segment."""
    rewritten = [namespace.facts_table, namespace.audit_table]
    with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
        for table in rewritten:
            conn.execute(sql.SQL("VACUUM FULL {}").format(sql.Identifier(table)))
        conn.execute(sql.SQL("VACUUM {}").format(sql.Identifier(namespace.users_table)))
        into.done.append("PostgreSQL: VACUUM FULL of the facts and audit tables")
        if not wal:
            into.residual.append(
                "PostgreSQL given by URL: its WAL, backups and replicas are its operator's"
            )
            return
        try:
            _cycle_wal(conn, into)
        except psycopg.errors.InsufficientPrivilege:
            into.residual.append(
                "PostgreSQL: not a superuser, the WAL was not cycled (its segments keep the "
                "old rows until the server recycles them)"
            )


def _cycle_wal(conn: psycopg.Connection[tuple[object, ...]], into: Reclaimed) -> None:
    if conn.execute("SHOW wal_recycle").fetchone() != ("off",):
        conn.execute("ALTER SYSTEM SET wal_recycle = off")
        conn.execute("SELECT pg_reload_conf()")
    conn.execute("CHECKPOINT")
    older = _wal_segments(conn)
    for switches in range(1, MAX_WAL_SWITCHES + 1):
        conn.execute("SELECT pg_switch_wal()")
        conn.execute("CHECKPOINT")
        if not older & _wal_segments(conn):
            into.done.append(f"PostgreSQL: WAL switched {switches} time(s), older segments gone")
            return
    into.residual.append(f"PostgreSQL: older WAL segments remain after {MAX_WAL_SWITCHES} switches")


def _wal_segments(conn: psycopg.Connection[tuple[object, ...]]) -> set[str]:
    rows = conn.execute("SELECT name FROM pg_ls_waldir() WHERE name ~ '^[0-9A-F]{24}$'")
    return {str(name) for (name,) in rows.fetchall()}


def reclaim_chroma_sqlite(path: Path, into: Reclaimed) -> None:
    """`reference/forgetting/chroma_files.py` on `path`, in a process of its own (see
    there why); raises if it fails."""
    script = Path(__file__).with_name("chroma_files.py")
    done = subprocess.run(
        [sys.executable, str(script), str(path)],
        capture_output=True,
        text=True,
        timeout=CHROMA_TIMEOUT_S,
        check=False,
    )
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"Chroma's file cleanup failed ({path.parent.name}): {last}")
    purged = done.stdout.strip()
    into.done.append(f"Chroma ({path.parent.name}): {purged} log entries of deleted records")


def reclaim_files(
    *, data_dir: Path, pg_url: str | None, namespace: Namespace, pg_wal: bool = True
) -> Reclaimed:
    """Every reclaim above for the servers of `data_dir` (PostgreSQL at `pg_url`, none
    when None; its WAL cycled when `pg_wal`: the embedded server). Raises what a server
    raises: the caller keeps the cleanup pending."""
    into = Reclaimed()
    if pg_url is not None:
        reclaim_postgres(pg_url, namespace, into, wal=pg_wal)
    for chroma in sorted(Path(data_dir).glob("*/chroma.sqlite3")):
        reclaim_chroma_sqlite(chroma, into)
    for line in into.residual:
        log.warning("reclaim: %s", line)
    return into

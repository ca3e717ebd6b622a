"""Chroma's SQLite file after deletions: the deleted records' bytes removed.

Run as a script, in a process of its own (`reference.forgetting.reclaim` does so): an
embedded Chroma client keeps the same file open through its own copy of SQLite, and two
copies of SQLite in one process do not see each other's locks (POSIX locks belong to the
process), so a VACUUM beside Chroma's writes in the same process can corrupt the file
(seen: "database disk image is malformed" within ten reclaims beside a writing turn
loop). Between processes the locks hold: Chroma's writes wait for the rebuild.

    python reference/forgetting/chroma_files.py DATA_DIR/chroma/chroma.sqlite3

prints the number of log entries removed. What it does: see `reclaim`'s module
docstring.
"""

from __future__ import annotations

import sqlite3
import sys

#: Chroma's operation code of a delete in `embeddings_queue`.
CHROMA_DELETE = 3
#: How long to wait for Chroma's own transactions before giving up.
BUSY_TIMEOUT_S = 30.0


def clean(path: str) -> int:
    """The deleted records' log entries removed, the full-text index merged, the file
    rebuilt, a WAL-mode database's WAL truncated; the number of entries removed."""
    conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        purged = conn.execute(
            "DELETE FROM embeddings_queue WHERE operation != ? AND EXISTS ("
            " SELECT 1 FROM embeddings_queue AS later WHERE later.operation = ?"
            " AND later.topic = embeddings_queue.topic AND later.id = embeddings_queue.id"
            " AND later.seq_id > embeddings_queue.seq_id)",
            (CHROMA_DELETE, CHROMA_DELETE),
        ).rowcount
        fts = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE name = 'embedding_fulltext_search'"
        ).fetchone()
        if fts is not None:
            conn.execute(
                "INSERT INTO embedding_fulltext_search(embedding_fulltext_search) "
                "VALUES ('optimize')"
            )
        conn.execute("COMMIT")
        conn.execute("VACUUM")
        if conn.execute("PRAGMA journal_mode").fetchone() == ("wal",):
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return int(purged)
    finally:
        conn.close()


if __name__ == "__main__":
    print(clean(sys.argv[1]))

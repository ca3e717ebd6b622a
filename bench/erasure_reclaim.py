"""What an erasure leaves in PostgreSQL's files, and what removing it costs.

    .venv/bin/python -m bench.erasure_reclaim --facts 2000

Fills an embedded system (fresh data directory, hashing embedder) with one fact per
user for `--facts` users, one user holding a marker in the middle, erases that user,
and stops the servers. Then, on copies of the PostgreSQL directory, each way of
reclaiming runs once per round: `VACUUM` of the namespace's tables, `VACUUM` plus
`REINDEX INDEX CONCURRENTLY` of the lexeme index, `VACUUM FULL`; each followed by a
`CHECKPOINT`. It prints each one's time and the relations whose files still hold the
marker (case-insensitive). Last, the Chroma reclaim (`reclaim_chroma_sqlite`) is timed
on the system's `chroma.sqlite3`.
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import psycopg
from psycopg import sql

from reference.clock import VirtualClock
from reference.crypto import generate_key
from reference.embedding import HashingEmbedder
from reference.factory import build_memory_system, stop_embedded_servers
from reference.forgetting.reclaim import Reclaimed, reclaim_chroma_sqlite
from reference.keys import Namespace
from reference.ltm.embedded_pg import release_embedded_postgres, start_embedded_postgres
from reference.settings import Settings

WAYS = ("VACUUM", "VACUUM + REINDEX lexemes", "VACUUM FULL")


def fill(root: Path, facts: int, marker: str, ns: Namespace) -> None:
    settings = Settings(
        backend="embedded", data_dir=root, prefix=ns.prefix, encryption_key=generate_key()
    )
    system = build_memory_system(
        settings, clock=VirtualClock(1.7e9), embedder=HashingEmbedder(), namespace=ns
    )
    for i in range(facts):
        text = f"I always prefer Carrier{i} Express for my deliveries."
        system.turn(user_id=f"bench.u{i}", session_id="s1", text=text)
        if i == facts // 2:
            text = f"I always prefer {marker} Express for my deliveries."
            system.turn(user_id="bench.erased", session_id="s1", text=text)
    system.delete_user_data(user_id="bench.erased")
    system.dispose()
    stop_embedded_servers(settings)


def reclaim_once(pg_dir: Path, way: str, ns: Namespace, marker: str) -> tuple[float, list[str]]:
    handle = start_embedded_postgres(pg_dir)
    tables = [ns.facts_table, ns.audit_table, ns.users_table]
    try:
        with psycopg.connect(handle.url, autocommit=True) as conn:
            conn.execute("CHECKPOINT")
            started = time.perf_counter()
            for table in tables:
                full = sql.SQL("FULL ") if way == "VACUUM FULL" else sql.SQL("")
                conn.execute(sql.SQL("VACUUM {}{}").format(full, sql.Identifier(table)))
            if way == "VACUUM + REINDEX lexemes":
                index = sql.Identifier(f"{ns.facts_table}_lexemes_idx")
                conn.execute(sql.SQL("REINDEX INDEX CONCURRENTLY {}").format(index))
            conn.execute("CHECKPOINT")
            ms = (time.perf_counter() - started) * 1000.0
            found = subprocess.run(
                ["grep", "-rlai", marker, str(pg_dir / "base")],
                capture_output=True,
                text=True,
                check=False,
            ).stdout.split()
            names = []
            for path in found:
                row = conn.execute(
                    "SELECT relname FROM pg_class WHERE relfilenode = %s", (int(Path(path).name),)
                ).fetchone()
                names.append(str(row[0]) if row else path)
            return ms, names
    finally:
        handle.close()
        release_embedded_postgres(pg_dir)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--facts", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    marker = "Zqxmarker" + uuid.uuid4().hex[:8]
    ns = Namespace("bench" + uuid.uuid4().hex[:8])
    with tempfile.TemporaryDirectory(prefix="memh-reclaim-") as tmp:
        root = Path(tmp) / "src"
        fill(root, args.facts, marker, ns)
        for round_ in range(args.rounds):
            for n, way in enumerate(WAYS):
                copy = Path(tmp) / f"r{round_}w{n}"
                copy.mkdir()
                # cp -a keeps the owner (PostgreSQL's own user when run as root).
                subprocess.run(["cp", "-a", str(root / "pg"), str(copy / "pg")], check=True)
                ms, left = reclaim_once(copy / "pg", way, ns, marker)
                print(f"{way:26} {args.facts} facts  {ms:8.1f} ms  marker in: {left or 'none'}")
        db = root / "chroma" / "chroma.sqlite3"
        for _ in range(args.rounds):
            started = time.perf_counter()
            reclaim_chroma_sqlite(db, Reclaimed())
            ms = (time.perf_counter() - started) * 1000.0
            size = db.stat().st_size / 1e6
            print(f"Chroma reclaim             {size:.1f} MB chroma.sqlite3  {ms:8.1f} ms")


if __name__ == "__main__":
    main()

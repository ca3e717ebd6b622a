"""Sweep throughput of the forgetting engine (hybrid) on the embedded real stack.

Loads N facts over 1,000 users straight into the namespace's facts table with COPY (the
store's own schema and indexes, HNSW included), then times a dry run, a sweep that has
work to do (10% expired, 5% sealed past the anonymisation deadline, 10% of the users
inactive for 100 days), and a steady-state sweep with nothing left to do.

usage: .venv/bin/python -m bench.sweep_throughput [N=100000] [DATA_DIR=a fresh temp dir]
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np
import psycopg
from psycopg import sql

from reference.clock import VirtualClock
from reference.crypto import generate_key
from reference.factory import build_memory_system
from reference.keys import Namespace
from reference.ltm.embedded_pg import start_embedded_postgres
from reference.ltm.postgres_forgetting import value_sealed_at
from reference.settings import Settings

N = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
DATA = Path(sys.argv[2]) if len(sys.argv) > 2 else Path(tempfile.mkdtemp(prefix="memh-sweep-"))
T0, DAY, USERS = 1_767_225_600.0, 86_400.0, 1000
COLUMNS = (
    "fact_id",
    "user_id",
    "category",
    "key",
    "value",
    "text",
    "embedding",
    "importance",
    "version",
    "status",
    "created_at",
    "updated_at",
    "last_accessed_at",
    "access_count",
    "expires_at",
    "sealed_at",  # the due index's column, as every write of the store keeps it
    "lexemes",  # the words of lexical retrieval (`reference.lexical.lexical_terms`)
)

ns = Namespace(f"sweep{uuid.uuid4().hex[:8]}")
clock = VirtualClock(T0)
settings = Settings(
    backend="embedded",
    data_dir=DATA,
    prefix=ns.prefix,
    embedder="hashing",
    encryption_key=generate_key(),
)
system = build_memory_system(settings, clock=clock, namespace=ns, strategy="hybrid")
url = start_embedded_postgres(DATA / "pg").url

rng = np.random.default_rng(0)
vectors = rng.standard_normal((256, 384)).astype(np.float32)
vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
as_text = ["[" + ",".join(f"{x:.6f}" for x in v) + "]" for v in vectors]
sealed = {"value": "138****5678", "_sealed": "v1:00000000:AAAA", "_sealed_at": T0 - 2 * DAY}

started = time.perf_counter()
with psycopg.connect(url) as conn, conn.cursor() as cur:
    copy_sql = sql.SQL("COPY {} ({}) FROM STDIN").format(
        sql.Identifier(ns.facts_table), sql.SQL(", ").join(map(sql.Identifier, COLUMNS))
    )
    with cur.copy(copy_sql) as copy:
        for i in range(N):
            value = sealed if i % 20 == 1 else {"value": f"value {i}"}
            expires = T0 - 1 if i % 10 == 0 else None
            copy.write_row(
                (
                    uuid.uuid4().hex,
                    f"u{i % USERS}",
                    "preference",
                    f"k{i}",
                    json.dumps(value),
                    f"text {i}",
                    as_text[i % 256],
                    5.0,
                    1,
                    "active",
                    T0 - DAY,
                    T0 - DAY,
                    T0 - DAY,
                    0,
                    expires,
                    value_sealed_at(value),
                    f"text {i}",  # tsvector input: the lexemes `text` and the number
                )
            )
    cur.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(ns.facts_table)))
load_s = time.perf_counter() - started
# 10% of the users last seen 100 days ago: archived by the sweep.
system.ltm.mark_active(
    activity={f"u{u}": T0 - (100 * DAY if u >= 900 else DAY) for u in range(USERS)}
)
print(f"loaded {N} facts with COPY in {load_s:.1f} s ({N / load_s:,.0f} rows/s)")


def report(label: str, stats) -> None:  # type: ignore[no-untyped-def]
    ltm = stats.by_layer["ltm"]
    print(
        f"{label:<22} examined {stats.examined:>7} in {stats.duration_s:6.2f} s"
        f" = {stats.examined_per_s:>9,.0f} records/s  (ltm: expired {ltm.expired},"
        f" archived {ltm.archived}, anonymised {ltm.anonymised}, deleted {ltm.deleted};"
        f" {ltm.batches} batches of {system.engine.strategy.sweep_batch_size})"  # type: ignore[union-attr]
    )


report("dry run", system.sweep(dry_run=True))
report("sweep with work", system.sweep())
report("steady-state sweep", system.sweep())
with psycopg.connect(url) as conn:
    from reference.ltm.migrations import drop_schema

    drop_schema(conn, ns)
system.dispose()

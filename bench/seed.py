"""Seeding the stores: once per bench session, in bulk, never per round.

Seed vectors come from the hashing embedder (fast and deterministic); the *measured*
calls embed with the embedder under test (MiniLM by default). Similarity values between
the two spaces mean nothing, but search cost does not depend on them.

The long-term layer is seeded with binary COPY on a connection of our own to the same
server (the store does not expose its pool), into the namespace's facts table, with the
HNSW index dropped during the load and rebuilt after it from its own definition: bulk
index builds are many times faster than row-by-row inserts into the graph. Seeded facts
get no audit rows (seeds are not changes anyone made; the audit table is only written,
never read, on the measured paths).

Under a strategy (`strategy=`) the seeds carry what its rules read: ages spread over the
past `SEED_AGE_S` (created and last accessed then, a few accesses each), importance 1-9,
and the strategy's deadline for the record's type or the fact's category, as written at
seeding time but never within `MIN_LIFETIME_S` (a deadline passing mid-run would empty
what is measured). Decay then re-ranks real ages and sliding windows move real deadlines.
Without one, every seed is written now, importance 5, with the store's TTL (STM) or none.
"""

from __future__ import annotations

import atexit
import random
import shutil
import string
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

from reference.embedding import HashingEmbedder
from reference.keys import Namespace
from reference.ltm.lexemes import write_lexemes
from reference.ltm.migrations import drop_schema
from reference.models import Category, MemoryRecord, MemoryType
from reference.policy.expiry import expires_at_on_write
from reference.policy.strategy import Strategy
from reference.session.base import SessionStore
from reference.settings import Settings
from reference.stm.base import ShortTermStore

_CATEGORIES = list(Category)
#: Vocabulary of the seeded sentences.
_VOCABULARY = (
    "ship deliver express parcel seat aisle window hotel room flight coffee tea address "
    "office meeting invoice refund order ticket repair heater printer budget report "
    "vegetarian spicy morning evening weekend airport taxi train museum doctor dentist "
    "garden bicycle laptop password account balance salary visa passport holiday"
)
_WORDS = tuple(_VOCABULARY.split())
_FACT_COLUMNS = (
    "fact_id user_id category key value text embedding importance version status "
    "created_at updated_at last_accessed_at access_count expires_at"
)
#: Under a strategy, seeds were written and accessed up to this long ago.
SEED_AGE_S = 3 * 86_400.0
#: Under a strategy, no seeded deadline falls sooner than this after seeding.
MIN_LIFETIME_S = 86_400.0
_FACT_TYPES = (
    "text text text text jsonb text vector float4 int4 text float8 float8 float8 int4 float8"
)


class Texts:
    """Seeded sentences: fresh ones (never seen, so never cached) and a fixed pool."""

    def __init__(self, seed: int = 7) -> None:
        self.rng = random.Random(seed)

    def sentence(self, low: int = 5, high: int = 12) -> str:
        return " ".join(self.rng.choice(_WORDS) for _ in range(self.rng.randint(low, high)))

    def nonce(self) -> str:
        # Letters only: digits could look like phone numbers to the PII masker.
        return "".join(self.rng.choice(string.ascii_lowercase) for _ in range(10))

    def fresh(self, lead: str = "Please remember") -> str:
        """A sentence no one has embedded yet in this run."""
        return f"{lead} {self.sentence()} ref {self.nonce()}"

    def utterance(self) -> str:
        """A turn's utterance: instructions, preferences, facts and chit-chat, fresh."""
        kind = self.rng.randrange(4)
        tail = f"{self.sentence(3, 8)} ref {self.nonce()}"
        if kind == 0:
            return f"Please book the {tail}"
        if kind == 1:
            return f"I always prefer the {self.rng.choice(_WORDS)} option, {tail}"
        if kind == 2:
            return f"My {self.rng.choice(_WORDS)} is {tail}"
        return f"haha ok thanks {tail}"


def ltm_user(index: int) -> str:
    return f"lu{index}"


def ltm_key(fact_index: int) -> tuple[Category, str]:
    """Where a user's seeded fact number `fact_index` lives: its `(category, key)`."""
    return _CATEGORIES[fact_index % len(_CATEGORIES)], f"k{fact_index}"


def seed_sessions(store: SessionStore, *, count: int, users: int = 100) -> list[tuple[str, str]]:
    """Open `count` sessions over `users` users; returns their (user_id, session_id)."""
    opened: list[tuple[str, str]] = []
    for index in range(count):
        user_id, session_id = f"su{index % users}", f"ss{index}"
        store.create(user_id=user_id, session_id=session_id)
        opened.append((user_id, session_id))
    return opened


def retention(
    rng: random.Random, strategy: Strategy | None, kind: MemoryType | Category, now: float
) -> tuple[float, float, int, float, float | None]:
    """A seed's (created_at, last_accessed_at, access_count, importance, expires_at) under
    `strategy` (module docstring); None: written now, importance 5, no deadline."""
    if strategy is None:
        return now, now, 0, 5.0, None
    created = now - rng.uniform(0.0, SEED_AGE_S)
    accessed = rng.uniform(created, now)
    importance = float(rng.randint(1, 9))
    deadline = expires_at_on_write(strategy, kind=kind, importance=importance, now=now)
    expires = None if deadline is None else max(deadline, now + MIN_LIFETIME_S)
    return created, accessed, rng.randint(0, 5), importance, expires


def seed_ltm(
    url: str,
    namespace: Namespace,
    *,
    rows: int,
    per_user: int,
    now: float,
    seed: int = 11,
    strategy: Strategy | None = None,
) -> dict[str, float]:
    """Bulk-load `rows` facts, `per_user` per user, into the namespace's (migrated) table.

    Returns the seconds the load and the index build took. The HNSW index is dropped for
    the load and rebuilt after it.
    """
    from pgvector.psycopg import register_vector

    started = time.perf_counter()
    texts = Texts(seed)
    embedder = HashingEmbedder()
    facts = sql.Identifier(namespace.facts_table)
    with psycopg.connect(url, connect_timeout=10) as conn:
        register_vector(conn)
        index_def = conn.execute(
            "SELECT indexdef FROM pg_indexes WHERE tablename = %s AND indexname = %s",
            (namespace.facts_table, namespace.facts_embedding_index),
        ).fetchone()
        if index_def is not None:
            conn.execute(
                sql.SQL("DROP INDEX {}").format(sql.Identifier(namespace.facts_embedding_index))
            )
        # Column names and their COPY types, in the order each row is written.
        columns = dict(zip(_FACT_COLUMNS.split(), _FACT_TYPES.split(), strict=True))
        statement = sql.SQL("COPY {} ({}) FROM STDIN (FORMAT BINARY)").format(
            facts, sql.SQL(", ").join(map(sql.Identifier, columns))
        )
        # Binary COPY cannot write a tsvector: the words of lexical retrieval are written
        # after the load, from each text, as the store writes them.
        lexemes = _has_column(conn, namespace.facts_table, "lexemes")
        if lexemes:
            conn.execute(sql.SQL("ALTER TABLE {} ALTER COLUMN lexemes DROP NOT NULL").format(facts))
        with conn.cursor() as cur, cur.copy(statement) as copy:
            copy.set_types(list(columns.values()))
            for batch in _batches(rows, 5_000):
                sentences = [texts.sentence() for _ in batch]
                vectors = embedder.embed(sentences)
                for row, sentence, vector in zip(batch, sentences, vectors, strict=True):
                    user, fact = divmod(row, per_user)
                    category, key = ltm_key(fact)
                    created, accessed, count, importance, expires = retention(
                        texts.rng, strategy, category, now
                    )
                    copy.write_row(
                        (
                            uuid.uuid4().hex,
                            ltm_user(user),
                            category.value,
                            key,
                            Jsonb({"value": sentence}),
                            sentence,
                            vector,
                            importance,
                            1,
                            "active",
                            created,
                            created,
                            accessed,
                            count,
                            expires,
                        )
                    )
        if lexemes:
            write_lexemes(conn, namespace, only_missing=True)
            conn.execute(sql.SQL("ALTER TABLE {} ALTER COLUMN lexemes SET NOT NULL").format(facts))
        conn.commit()
        loaded = time.perf_counter()
        if index_def is not None:
            # Room for the whole graph in memory (~2 kB a row at 384 dimensions): the
            # build is then one pass over the table, without spilling to disk.
            memory_mb = max(64, rows * 2 // 1000)
            conn.execute(sql.SQL("SET maintenance_work_mem = {}").format(f"{memory_mb}MB"))
            conn.execute(sql.SQL(index_def[0]))  # pg_get_indexdef output: safe, ours
        conn.execute(sql.SQL("ANALYZE {}").format(facts))
        conn.commit()
    done = time.perf_counter()
    return {"ltm_copy_s": loaded - started, "ltm_index_s": done - loaded}


def seed_stm(
    store: ShortTermStore,
    *,
    user_id: str,
    session_id: str,
    in_session: int,
    total: int,
    now: float,
    per_session: int = 20,
    seed: int = 13,
    strategy: Strategy | None = None,
) -> float:
    """`in_session` records in the measured session, the rest of `total` in other
    sessions of `per_session` records (other users). Returns the seconds taken.

    On Chroma the records go straight into the store's collection in batches, with the
    store's own metadata layout; on any other backend through `add`, one by one.
    """
    started = time.perf_counter()
    texts = Texts(seed)
    embedder = HashingEmbedder()
    owners = [(user_id, session_id)] * in_session
    for index in range(max(0, total - in_session)):
        group = index // per_session
        owners.append((f"su{group % 500}", f"stm{group}"))
    for batch in _batches(len(owners), 2_000):
        sentences = [f"Please remember {texts.sentence()}" for _ in batch]
        vectors = embedder.embed(sentences)
        records = []
        for row, sentence in zip(batch, sentences, strict=True):
            kind = MemoryType.INSTRUCTION
            created, accessed, count, importance, expires = retention(
                texts.rng, strategy, kind, now
            )
            if strategy is None:
                expires = now + store.ttl_s
            records.append(
                MemoryRecord(
                    record_id=uuid.uuid4().hex,
                    user_id=owners[row][0],
                    session_id=owners[row][1],
                    text=sentence,
                    type=kind,
                    created_at=created,
                    last_accessed_at=accessed,
                    access_count=count,
                    importance=importance,
                    expires_at=expires,
                )
            )
        _put_records(store, records, vectors)
    return time.perf_counter() - started


def _put_records(store: ShortTermStore, records: list[MemoryRecord], vectors: np.ndarray) -> None:
    from reference.stm.chroma_store import ChromaShortTermStore

    if isinstance(store, ChromaShortTermStore):
        # The store's metadata layout (a private helper: there is no public bulk put).
        from reference.stm.chroma_rows import to_metadata

        collection = store.client.get_collection(store.namespace.stm_collection)
        collection.add(
            ids=[record.record_id for record in records],
            embeddings=vectors,
            metadatas=[to_metadata(record) for record in records],
            documents=[record.text for record in records],
        )
        return
    for record, vector in zip(records, vectors, strict=True):
        store.add(
            user_id=record.user_id,
            session_id=record.session_id,
            text=record.text,
            embedding=vector,
            force=True,
        )


def drop_stm(settings: Settings, namespace: Namespace) -> None:
    from reference.stm.chroma_client import make_chroma_client

    client = make_chroma_client(settings.chroma_url, settings.data_dir)
    client.delete_collection(namespace.stm_collection)


def drop_ltm(url: str, namespace: Namespace) -> None:
    with psycopg.connect(url, connect_timeout=10) as conn:
        drop_schema(conn, namespace)


def pg_url(settings: Settings) -> tuple[str, Any]:
    """The URL of the LTM server, and a handle to close (the embedded server's, or None)."""
    if settings.pg_url is not None:
        return settings.pg_url.get_secret_value(), None
    from reference.ltm.embedded_pg import start_embedded_postgres

    handle = start_embedded_postgres(settings.data_dir / "pg")
    return handle.url, handle


def drop_redis_keys(settings: Settings, namespace: Namespace) -> int:
    """Remove every key of the namespace (sessions are seeded per prefix)."""
    import redis

    url = settings.redis_url
    if url is None:
        from reference.session.embedded_redis import start_embedded_redis

        url = start_embedded_redis(settings.data_dir / "redis").url
    client = redis.Redis.from_url(url)
    removed = 0
    try:
        batch: list[Any] = []
        for key in client.scan_iter(match=namespace.key_pattern(), count=1000):
            batch.append(key)
            if len(batch) >= 1000:
                removed += int(client.unlink(*batch))
                batch = []
        if batch:
            removed += int(client.unlink(*batch))
    finally:
        client.close()
    return removed


def _batches(total: int, size: int) -> Iterator[range]:
    for start in range(0, total, size):
        yield range(start, min(total, start + size))


def scratch_dir() -> Path:
    """A temporary directory for the embedded servers, removed at exit.

    Not pytest's `tmp_path_factory`: pytest sessions prune each other's old numbered
    directories, and a concurrent one on this machine took a running server's files
    with it mid-run. Removed by atexit, which runs handlers last-in first-out: this one,
    registered before any server starts, runs after the servers' own shutdown hooks.
    """
    path = Path(tempfile.mkdtemp(prefix="memh-bench-"))
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def _has_column(conn: psycopg.Connection[Any], table: str, column: str) -> bool:
    """Whether the (migrated) table has the column: a tree's schema may predate it."""
    found = conn.execute(
        "SELECT 1 FROM information_schema.columns WHERE table_name = %s AND column_name = %s",
        (table, column),
    ).fetchone()
    return found is not None

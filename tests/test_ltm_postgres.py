"""The PostgreSQL long-term store's own schema: the SQL twin of the policy's sealing
rule, the migrations that backfill rows an older store wrote, the bulk loader of the
benchmarks, and an unreachable server.

These read and write the tables directly, so they run on PostgreSQL only (embedded, and
the external server when MEMH_TEST_PG_URL is set); what every backend must do alike is
the conformance suite (tests/test_ltm_conformance.py, tests/test_ltm_lexical_conformance.py).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import psycopg
import pytest
from psycopg import sql
from psycopg.types.json import Jsonb

from reference.clock import VirtualClock
from reference.errors import BackendUnavailable, MemoryStoreError
from reference.forgetting.plans import anonymised
from reference.keys import Namespace
from reference.ltm import migrations
from reference.ltm.base import LongTermStore
from reference.ltm.filters import FactChanges, LtmFilter
from reference.ltm.migrations import sealed_at_sql
from reference.ltm.postgres_forgetting import value_sealed_at
from reference.ltm.postgres_store import PostgresLongTermStore
from reference.models import Category
from reference.policy.sweep import DueRule
from reference.text_interfaces import Embedder
from tests.conftest import T0
from tests.fixtures.ltm_backends import EXTERNAL_PG_ENV, LtmStoreFactory
from tests.fixtures.params import backend_params
from tests.test_ltm_conformance import DIM, put, sealed


@pytest.fixture(params=backend_params("pg-embedded", external="pg-external", env=EXTERNAL_PG_ENV))
def ltm_backend(request: pytest.FixtureRequest) -> str:
    """The PostgreSQL backends only."""
    return str(request.param)


def postgres(store: LongTermStore) -> PostgresLongTermStore:
    assert isinstance(store, PostgresLongTermStore)
    return store


#: Values and `policy.sealed_at` of each; the SQL twin of migration 3 must agree.
SEAL_CASES: list[dict[str, Any]] = [
    {"v": 1},
    sealed(5),
    sealed(T0 + 0.123456789),
    sealed(1_767_225_600_123_456_789),  # an int beyond 2**53: rounded alike
    sealed(5.5, card=sealed(3)),
    {"card": sealed(7.25), "phone": sealed(9), "n": 1, "s": "x"},
    sealed(None),
    sealed(None, _sealed_at="yesterday"),
    sealed(None, _sealed_at=True),
    sealed(None, _sealed_at=None),
    sealed(None, _sealed_at=[1]),
    {"card": sealed(None), "x": {"_sealed_at": 1}},
    {"x": {"_sealed_at": 1}, "_sealed_at": 2},
    {"deep": {"inner": sealed(1)}},
    {"list": [sealed(1)]},
    {"_sealed": 5, "_sealed_at": 2},
    {"_sealed": None, "card": {"_sealed": {"k": 1}, "_sealed_at": -4}},
    {"v": "x", "_anonymised": True},
    sealed(-1.5e10),
    sealed(0),
]


def test_sealed_at_in_sql_is_the_policy_rule(ltm_store: LongTermStore):
    store = postgres(ltm_store)
    query = sql.SQL("SELECT {}").format(sealed_at_sql(sql.SQL("%(v)s::jsonb")))
    with store._transaction() as cur:
        got = [cur.execute(query, {"v": Jsonb(v)}).fetchone()[0] for v in SEAL_CASES]  # type: ignore[index]
        # A stamp no double holds exactly counts as earliest: -inf, never later than exact.
        odd = [sealed(1.5e308), sealed(1e-310), {"_sealed": "t", "_sealed_at": 10**400}]
        odd_got = [cur.execute(query, {"v": Jsonb(v)}).fetchone()[0] for v in odd]  # type: ignore[index]
    assert got == [value_sealed_at(v) for v in SEAL_CASES]
    assert odd_got == [-math.inf] * 3


def test_migration_3_backfills_sealed_at(
    ltm_store_factory: LtmStoreFactory, monkeypatch: pytest.MonkeyPatch, namespace: Namespace
):
    store = postgres(ltm_store_factory())
    with monkeypatch.context() as patch:  # a namespace made before the due index
        patch.setattr(migrations, "MIGRATIONS", migrations.MIGRATIONS[:2])
        store.setup()
    assert store.schema_versions() == [1, 2]
    insert = sql.SQL(
        "INSERT INTO {} (fact_id, user_id, category, key, value, text, embedding, importance,"
        " version, status, created_at, updated_at, last_accessed_at, expires_at)"
        " VALUES (%s, 'u1', 'fact', %s, %s, 't', %s::vector, 5, 1, 'active', %s, %s, %s, NULL)"
    ).format(sql.Identifier(namespace.facts_table))
    vector = "[" + ",".join(["1"] + ["0"] * (DIM - 1)) + "]"
    with store._transaction() as cur:
        for n, value in enumerate(SEAL_CASES):
            cur.execute(insert, (f"f{n:02d}", f"k{n:02d}", Jsonb(value), vector, T0, T0, T0))
    store.setup()  # applies migration 3
    assert store.schema_versions() == [1, 2, 3, 4, 5, 6, 7]
    column = sql.SQL("SELECT fact_id, value, sealed_at FROM {} ORDER BY fact_id").format(
        sql.Identifier(namespace.facts_table)
    )
    with store._transaction() as cur:
        rows = cur.execute(column).fetchall()
    assert [r[2] for r in rows] == [value_sealed_at(v) for v in SEAL_CASES]
    # The backfilled facts are found by their deadline; and every write keeps the column.
    due = {f.key for f in store.scan_due(now=T0, rule=DueRule(anonymise_after_s=0)).records}
    assert due == {
        f"k{n:02d}"
        for n, value in enumerate(SEAL_CASES)
        if (at := value_sealed_at(value)) is not None and at <= T0
    }
    put(store, "k01", category="fact", value={"v": "plain now"})
    put(store, "k00", category="fact", value=sealed(None))
    put(store, "new", category="fact", value={"c": sealed(T0 - 1)})
    store.apply_changes(FactChanges(anonymise={"f02": anonymised(SEAL_CASES[2])}))
    with store._transaction() as cur:
        rows = cur.execute(column).fetchall()
    assert [r[2] for r in rows] == [value_sealed_at(r[1]) for r in rows]
    assert {r[0]: r[2] for r in rows}["f00"] == -math.inf


def test_migration_4_admits_episodes_in_a_namespace_made_before_them(
    ltm_store_factory: LtmStoreFactory, monkeypatch: pytest.MonkeyPatch
):
    store = postgres(ltm_store_factory())
    with monkeypatch.context() as patch:  # every migration but 4 (the code writes later columns)
        later = [m for m in migrations.MIGRATIONS if m.version != 4]
        patch.setattr(migrations, "MIGRATIONS", later)
        store.setup()
    assert store.schema_versions() == [1, 2, 3, 5, 6, 7]
    with pytest.raises(psycopg.errors.CheckViolation):
        put(store, "episode:r1", category="episode")
    put(store, "kept", category="fact")
    store.setup()  # applies migration 4
    assert store.schema_versions() == [1, 2, 3, 4, 5, 6, 7]
    assert put(store, "episode:r1", category="episode").category is Category.EPISODE
    with store._transaction() as cur, pytest.raises(psycopg.errors.CheckViolation):
        cur.execute(
            sql.SQL("UPDATE {} SET category = 'nonsense' WHERE key = 'kept'").format(
                sql.Identifier(store.namespace.facts_table)
            )
        )


def test_unreachable_server_is_an_error_not_a_skip(clock: VirtualClock, embedder: Embedder):
    url = "postgresql://postgres@/postgres?host=/nonexistent-memh-socket-dir"
    store = PostgresLongTermStore(
        url, clock=clock, namespace=Namespace("t_unreachable"), embedder=embedder
    )
    with pytest.raises(BackendUnavailable):
        store.setup()
    with pytest.raises(MemoryStoreError):
        store.count()


def _made_before(
    factory: LtmStoreFactory, monkeypatch: pytest.MonkeyPatch, version: int
) -> PostgresLongTermStore:
    """A PostgreSQL store whose namespace has only migrations 1..`version`."""
    store = postgres(factory())
    with monkeypatch.context() as patch:
        patch.setattr(migrations, "MIGRATIONS", migrations.MIGRATIONS[:version])
        store.setup()
    return store


def _insert_facts(
    store: PostgresLongTermStore, namespace: Namespace, texts: list[str], *, lexemes: bool
) -> None:
    """Rows as an older store wrote them (keys k0, k1, ...; with `lexemes`, the words
    as migration 6 backfilled them: the `simple` configuration)."""
    insert = sql.SQL(
        "INSERT INTO {} (fact_id, user_id, category, key, value, text, embedding, importance,"
        " version, status, created_at, updated_at, last_accessed_at, expires_at{})"
        " VALUES (%s, 'u1', 'fact', %s, '{{}}', %s, %s::vector, 5, 1, 'active', %s, %s, %s,"
        " NULL{})"
    ).format(
        sql.Identifier(namespace.facts_table),
        sql.SQL(", lexemes" if lexemes else ""),
        sql.SQL(", to_tsvector('simple', lower(%s))" if lexemes else ""),
    )
    vector = "[" + ",".join(["1"] + ["0"] * (DIM - 1)) + "]"
    with store._transaction() as cur:
        for n, text in enumerate(texts):
            row = (f"f{n}", f"k{n}", text, vector, T0, T0, T0)
            cur.execute(insert, (*row, text) if lexemes else row)


def test_migration_6_backfills_the_lexemes_of_older_rows(
    ltm_store_factory: LtmStoreFactory, monkeypatch: pytest.MonkeyPatch, namespace: Namespace
):
    store = _made_before(ltm_store_factory, monkeypatch, 4)  # before lexical search
    _insert_facts(store, namespace, ["Tea in BOSTON", "coffee at home"], lexemes=False)
    store.setup()  # applies migrations 5 to 7
    assert store.schema_versions() == [1, 2, 3, 4, 5, 6, 7]
    hits = store.query(user_id="u1", text="boston", embedding=np.ones(DIM), k=1, lexical=True)
    assert [h.record.key for h in hits] == ["k0"]


def test_migration_7_rewrites_older_lexemes_with_the_stores_own_terms(
    ltm_store_factory: LtmStoreFactory, monkeypatch: pytest.MonkeyPatch, namespace: Namespace
):
    store = _made_before(ltm_store_factory, monkeypatch, 6)  # before English stems
    texts = ["She was painting sunsets", "我住在北京市海淀区", "coffee at home"]
    _insert_facts(store, namespace, texts, lexemes=True)
    store.setup()  # applies migration 7
    assert store.schema_versions() == [1, 2, 3, 4, 5, 6, 7]
    for query, key in (("paints", "k0"), ("北京", "k1"), ("coffee", "k2")):
        hits = store.query(user_id="u1", text=query, embedding=np.ones(DIM), k=1, lexical=True)
        assert [h.record.key for h in hits] == [key], query
    with store._transaction() as cur:
        held = cur.execute(
            sql.SQL("SELECT key, lexemes::text FROM {} ORDER BY key").format(
                sql.Identifier(namespace.facts_table)
            )
        ).fetchall()
    assert held[0] == ("k0", "'paint' 'sunset'")


def test_the_bench_seed_fills_the_words_of_what_it_loads(
    ltm_store_factory: LtmStoreFactory, ltm_pg_url: str | None, namespace: Namespace
):
    # `bench/seed.py` loads by binary COPY, which cannot write a tsvector; the rows it
    # loads must still be found by their words, and the column stays NOT NULL.
    from bench.seed import ltm_user, seed_ltm

    store = postgres(ltm_store_factory())
    store.setup()
    assert ltm_pg_url is not None
    seed_ltm(ltm_pg_url, namespace, rows=40, per_user=20, now=T0)
    user = ltm_user(0)
    facts = store.facts(filter=LtmFilter(user_id=user))
    word = facts[0].text.split()[0]
    hits = store.query(user_id=user, text=word, embedding=np.ones(DIM), k=20, lexical=True)
    holding = {f.fact_id for f in facts if word in f.text.lower().split()}
    assert holding and holding <= {h.record.fact_id for h in hits}
    with store._transaction() as cur:
        nullable = cur.execute(
            "SELECT is_nullable FROM information_schema.columns"
            " WHERE table_name = %s AND column_name = 'lexemes'",
            (namespace.facts_table,),
        ).fetchone()
    assert nullable == ("NO",)

"""Write the lexemes of facts already in PostgreSQL from their text, as the store does.

The store writes a fact's lexemes with the fact (`array_to_tsvector` of
`reference.lexical.lexical_terms`). Rows written otherwise get theirs here: rows from
before a change of the terms (migration 7, English stems) and rows bulk-loaded by binary
COPY, which cannot write a tsvector (`bench/seed.py`). The terms are computed in Python,
so they are exactly the ones a query searches: the texts are read in batches through a
server-side cursor, their terms copied into a temporary table, and the facts updated
from it in one statement, all in the caller's transaction.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql

from reference.keys import Namespace
from reference.lexical import lexical_terms

#: Texts read and terms copied per round trip.
BATCH = 5_000
_TEMP = sql.Identifier("memh_lexeme_fill")


def write_lexemes(
    conn: psycopg.Connection[Any], namespace: Namespace, *, only_missing: bool = False
) -> int:
    """Set the lexemes of the namespace's facts (with `only_missing`, of those whose
    lexemes are NULL) to the terms of their text; returns how many rows were written.

    Runs inside a transaction (the caller's, or one of its own): all or nothing."""
    facts = sql.Identifier(namespace.facts_table)
    which = sql.SQL("lexemes IS NULL" if only_missing else "true")
    with conn.transaction():
        conn.execute(
            sql.SQL(
                "CREATE TEMP TABLE {} (fact_id text PRIMARY KEY, terms text[] NOT NULL)"
                " ON COMMIT DROP"
            ).format(_TEMP)
        )
        copy_in = sql.SQL("COPY {} (fact_id, terms) FROM STDIN").format(_TEMP)
        with conn.cursor(name="memh_lexeme_texts") as texts:
            texts.execute(sql.SQL("SELECT fact_id, text FROM {} WHERE {}").format(facts, which))
            while batch := texts.fetchmany(BATCH):
                with conn.cursor() as cur, cur.copy(copy_in) as copy:
                    for fact_id, text in batch:
                        copy.write_row((fact_id, lexical_terms(text)))
        written = conn.execute(
            sql.SQL(
                "UPDATE {facts} AS f SET lexemes = array_to_tsvector(t.terms)"
                " FROM {temp} AS t WHERE f.fact_id = t.fact_id"
            ).format(facts=facts, temp=_TEMP)
        ).rowcount
        conn.execute(sql.SQL("DROP TABLE {}").format(_TEMP))
    return written

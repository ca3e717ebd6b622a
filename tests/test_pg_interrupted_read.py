"""A read interrupted mid-statement hands its connection back closed, raising nothing.

`PostgresLongTermStore` runs a single read in autocommit and turns autocommit off again
afterwards. A read interrupted while its statement runs (a greenlet killed at the end of
a load test, a timeout) leaves the connection ACTIVE, where psycopg refuses to change
autocommit: that ProgrammingError replaced the interruption, and the killed Locust user
took it for a failed task and kept running, so the load never stopped.
"""

from __future__ import annotations

import psycopg
from psycopg.pq import TransactionStatus

from reference.ltm.embedded_pg import EmbeddedPostgres
from reference.ltm.pg_pool import _end_autocommit


def test_an_idle_read_connection_leaves_autocommit(embedded_pg: EmbeddedPostgres):
    with psycopg.connect(embedded_pg.url, autocommit=True) as conn:
        conn.execute("SELECT 1")
        _end_autocommit(conn)
        assert not conn.closed
        assert conn.autocommit is False


def test_a_connection_left_mid_statement_is_closed_not_raised(embedded_pg: EmbeddedPostgres):
    conn = psycopg.connect(embedded_pg.url, autocommit=True)
    conn.pgconn.send_query(b"SELECT pg_sleep(5)")  # as if interrupted while it runs
    assert conn.info.transaction_status is TransactionStatus.ACTIVE
    _end_autocommit(conn)  # no ProgrammingError
    assert conn.closed

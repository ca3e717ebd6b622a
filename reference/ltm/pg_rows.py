"""Rows of the facts table <-> `Fact`: the column list both PostgreSQL modules select."""

from __future__ import annotations

from typing import Any

from psycopg import sql

from reference.models import Category, Fact, Status

FACT_COLUMNS = [
    *("fact_id", "user_id", "category", "key", "value", "text", "version", "created_at"),
    *("updated_at", "last_accessed_at", "access_count", "importance", "expires_at", "status"),
]


def columns(prefix: str = "") -> sql.Composable:
    """The fact columns, in `FACT_COLUMNS` order, optionally qualified (`prefix="f."`)."""
    return sql.SQL(", ").join(sql.SQL(prefix) + sql.Identifier(c) for c in FACT_COLUMNS)


def fact(row: tuple[Any, ...]) -> Fact:
    """The `Fact` of a row selected with `columns()`."""
    return Fact(
        fact_id=row[0],
        user_id=row[1],
        category=Category(row[2]),
        key=row[3],
        value=row[4],
        text=row[5],
        version=int(row[6]),
        created_at=float(row[7]),
        updated_at=float(row[8]),
        last_accessed_at=float(row[9]),
        access_count=int(row[10]),
        importance=float(row[11]),
        expires_at=None if row[12] is None else float(row[12]),
        status=Status(row[13]),
    )

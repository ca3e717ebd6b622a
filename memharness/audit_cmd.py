"""`memharness audit`: every change to users' long-term facts, with its cause.

Reads the LTM audit log of a PostgreSQL namespace that a reference system wrote to: the
server `MEMH_PG_URL` (or `--pg-url`) names, else the embedded pgserver under
`MEMH_DATA_DIR` (or `--data-dir`), tables of the prefix `MEMH_PREFIX` (or `--prefix`),
the same settings `memharness maintain` and every reference process use. One row per
change: when, whose fact (id, type, key), what (action, actor, version), why (the rule,
event, forget command or sweep that caused it) and the values before and after, shown
as `[redacted]` where the user had them erased.

Reading never writes: the store opens without migrating (`open_for_reading`) and every
connection is read-only.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from memharness.cli_settings import settings_from_options
from memharness.tables import Column, render
from reference.clock import SystemClock
from reference.crypto import SEALED
from reference.embedding import HashingEmbedder
from reference.errors import MemoryStoreError
from reference.keys import Namespace
from reference.ltm.filters import REDACTED
from reference.ltm.postgres_store import PostgresLongTermStore
from reference.models import AuditEntry
from reference.settings import Settings

#: What an erased value reads in the report, and a sealed original inside a value.
REDACTED_TEXT = "[redacted]"
SEALED_TEXT = "[sealed]"
#: The fields of a report row, in the order the CSV and JSON formats give them.
FIELDS = (
    "audit_id",
    "at",
    "at_utc",
    "user_id",
    "fact_id",
    "type",
    "key",
    "action",
    "actor",
    "version",
    "cause",
    "old_value",
    "new_value",
)
_TABLE = (
    Column("at_utc", "when (UTC)", "text"),
    Column("user_id", "user", "text"),
    Column("fact_id", "fact id", "text"),
    Column("type", "type", "text"),
    Column("key", "key", "text"),
    Column("action", "action", "text"),
    Column("cause", "cause", "text"),
    Column("value", "value (new, or the one removed)", "text"),
)
#: Characters a table cell shows of a fact id, a cause, a value (the CSV and JSON
#: formats give everything).
_CUT = {"fact_id": 8, "cause": 48, "value": 32}


def parse_moment(option: str, text: str) -> float:
    """Epoch seconds of `--since`/`--until`: a number of epoch seconds (as the store
    keeps them, virtual or wall), or an ISO 8601 date or time (UTC unless it says)."""
    try:
        seconds = float(text)
    except ValueError:
        try:
            moment = datetime.fromisoformat(text.strip())
        except ValueError:
            raise click.BadParameter(
                f"{text!r} is neither epoch seconds nor an ISO 8601 time "
                "(2026-01-01, 2026-01-01T09:00:00, 2026-01-01T09:00:00+08:00)",
                param_hint=option,
            ) from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        return moment.timestamp()
    if not math.isfinite(seconds):
        raise click.BadParameter(f"{text!r} is not a finite time", param_hint=option)
    return seconds


def shown_value(value: dict[str, Any] | None) -> Any:
    """An audit value as the report gives it: None, `[redacted]` where erased, else the
    value with any sealed original (ciphertext) shown as `[sealed]`."""
    if value is None:
        return None
    if value == REDACTED:
        return REDACTED_TEXT
    return _unsealed(value)


def _unsealed(item: Any) -> Any:
    if isinstance(item, dict):
        return {k: SEALED_TEXT if k == SEALED else _unsealed(v) for k, v in item.items()}
    if isinstance(item, list):
        return [_unsealed(v) for v in item]
    return item


def report_rows(entries: Sequence[AuditEntry]) -> list[dict[str, Any]]:
    """One row per audit entry (`FIELDS`), oldest first."""
    rows = []
    for entry in entries:
        when = datetime.fromtimestamp(entry.at, UTC).isoformat(timespec="seconds")
        rows.append(
            {
                "audit_id": entry.audit_id,
                "at": entry.at,
                "at_utc": when.replace("+00:00", "Z"),
                "user_id": entry.user_id,
                "fact_id": entry.fact_id,
                "type": entry.category.value,
                "key": entry.key,
                "action": entry.action,
                "actor": entry.actor,
                "version": entry.version,
                "cause": entry.cause,
                "old_value": shown_value(entry.old_value),
                "new_value": shown_value(entry.new_value),
            }
        )
    return rows


def format_report(rows: list[dict[str, Any]], fmt: str) -> str:
    """The rows as a table, CSV or JSON (a list of objects)."""
    if fmt == "json":
        return json.dumps(rows, ensure_ascii=False, indent=2)
    if fmt == "csv":
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=FIELDS, lineterminator="\n")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: _text(row[k]) for k in FIELDS})
        return out.getvalue().rstrip("\n")
    if not rows:
        return "  no audit entries match"
    cells = []
    for row in rows:
        value = row["new_value"] if row["new_value"] is not None else row["old_value"]
        shown = {**row, "value": value}
        cells.append({c.field: _cut(_text(shown[c.field]), _CUT.get(c.field)) for c in _TABLE})
    return render(_TABLE, cells)


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    return str(value)


def _cut(text: str, width: int | None) -> str:
    return text if width is None or len(text) <= width else text[: width - 1] + "…"


def read_audit(
    settings: Settings, *, user_id: str | None, since: float | None, until: float | None
) -> list[AuditEntry]:
    """The matching audit entries of the settings' PostgreSQL namespace, read-only."""
    if settings.backend == "memory":
        raise MemoryStoreError(
            "the in-memory backend keeps nothing between processes: audit a PostgreSQL "
            "namespace (MEMH_PG_URL, or the embedded server under MEMH_DATA_DIR)"
        )
    if settings.pg_url is not None:
        url = settings.pg_url.get_secret_value()
    else:
        from reference.ltm.embedded_pg import start_embedded_postgres

        pg_dir = settings.data_dir / "pg"
        if not pg_dir.is_dir():
            raise MemoryStoreError(f"no embedded PostgreSQL under {pg_dir} (MEMH_DATA_DIR)")
        url = start_embedded_postgres(pg_dir).url
    store = PostgresLongTermStore(
        url,
        clock=SystemClock(),
        namespace=Namespace(settings.prefix),
        embedder=HashingEmbedder(),  # never used: an audit embeds nothing
        pool_size=1,
        timeouts=settings.timeouts,
        retry=settings.retry,
    )
    try:
        store.open_for_reading()
        return store.audit_entries(user_id=user_id, since=since, until=until)
    finally:
        store.dispose()


@click.command()
@click.option("--user", "user_id", default=None, help="only this user's facts (default: all)")
@click.option("--since", default=None, help="from this time: epoch seconds or ISO 8601 (UTC)")
@click.option("--until", default=None, help="up to this time (inclusive), as --since")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "csv", "json"]),
    default="table",
    show_default=True,
)
@click.option("--prefix", default=None, help="the namespace's prefix (default: MEMH_PREFIX)")
@click.option("--pg-url", default=None, help="a PostgreSQL URL (default: MEMH_PG_URL)")
@click.option(
    "--data-dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="the embedded servers' directory when no URL is set (default: MEMH_DATA_DIR)",
)
def audit(
    user_id: str | None,
    since: str | None,
    until: str | None,
    fmt: str,
    prefix: str | None,
    pg_url: str | None,
    data_dir: Path | None,
) -> None:
    """Print every change to users' long-term facts: what, when, why, and the values
    (redacted where erased). Reads the LTM a reference system wrote to; never writes."""
    low = None if since is None else parse_moment("--since", since)
    high = None if until is None else parse_moment("--until", until)
    if low is not None and high is not None and low > high:
        raise click.BadParameter(f"{since!r} is after --until {until!r}", param_hint="--since")
    settings = settings_from_options(prefix=prefix, pg_url=pg_url, data_dir=data_dir)
    try:
        entries = read_audit(settings, user_id=user_id, since=low, until=high)
    except MemoryStoreError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(format_report(report_rows(entries), fmt))


__all__ = ["FIELDS", "audit", "format_report", "parse_moment", "read_audit", "report_rows"]

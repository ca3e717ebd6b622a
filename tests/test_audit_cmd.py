"""`memharness audit` end to end: a reference system writes to the embedded PostgreSQL
(turns, a forget command, a business event, a sweep on the virtual clock), then the
command reads the audit back in each format, with causes, erased values redacted, and
nothing written by the reading."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from click.testing import CliRunner
from psycopg import sql
from pydantic import SecretStr

from memharness.audit_cmd import FIELDS, parse_moment
from memharness.cli import main
from reference.clock import VirtualClock, format_ts
from reference.crypto import generate_key
from reference.factory import build_memory_system
from reference.keys import Namespace
from reference.ltm.embedded_pg import start_embedded_postgres
from reference.ltm.filters import LtmFilter
from reference.models import Event, Status
from reference.policy.loading import load_strategy
from reference.policy.rules import DAY_S
from reference.settings import Settings
from reference.text_interfaces import Embedder
from tests.conftest import T0
from tests.test_engine import drop_embedded_namespace, settings

ALICE = "alice"
PHONE = "13812345678"
EVENT_ID = "1767258120000-0"
EVENT_CAUSE = f"event profile_updated at {format_ts(T0 + 120)} (rule 0), event id {EVENT_ID}"


@pytest.fixture
def written(
    clock: VirtualClock, namespace: Namespace, data_dir: Path, embedder: Embedder
) -> Iterator[Namespace]:
    """A hybrid reference system's LTM after turns, a forget command, an event and a
    sweep 31 virtual days later; the system is gone, its tables stay."""
    strategy = load_strategy("hybrid").with_params({"promotion": "rules", "consolidation": None})
    system = build_memory_system(
        settings("embedded", namespace, data_dir),
        clock=clock,
        embedder=embedder,
        namespace=namespace,
        strategy=strategy,
    )
    try:
        for text in (
            f"My phone is {PHONE}",
            "My address is 12 Oak Street, Springfield.",
            "I always want deliveries by SF Express.",
        ):
            system.turn(user_id=ALICE, session_id="s1", text=text)
        clock.advance(60)
        system.turn(user_id=ALICE, session_id="s1", text=f"forget my phone {PHONE}")
        clock.advance(60)
        moved = Event("profile_updated", ALICE, clock.now(), {"fields": ["address"]})
        assert system.engine is not None
        system.engine.handle_event(moved, event_id=EVENT_ID)
        archived = system.ltm.facts(filter=LtmFilter(user_id=ALICE, include_dead=True))
        assert [(f.key, f.status, f.archive_reason) for f in archived if f.key != "shipping"] == [
            ("address", Status.ARCHIVED, EVENT_CAUSE)
        ]
        # 31 days on: the preference's TTL (30 d) is over, so is the archive's grace (30 d).
        clock.advance(31 * DAY_S)
        system.engine.sweep()
    finally:
        system.dispose()
    yield namespace
    drop_embedded_namespace(data_dir, namespace)


def audit(data_dir: Path, namespace: Namespace, *args: str) -> str:
    runner = CliRunner()
    options = ["audit", "--data-dir", str(data_dir), "--prefix", namespace.prefix, *args]
    result = runner.invoke(main, options, env={"MEMH_PG_URL": None, "MEMH_BACKEND": None})
    assert result.exit_code == 0, result.output
    return result.output


def test_audit_of_a_reference_run_in_every_format(written: Namespace, data_dir: Path) -> None:
    rows = json.loads(audit(data_dir, written, "--user", ALICE, "--format", "json"))
    got = [(r["key"], r["action"], r["cause"]) for r in rows]
    promoted = "promotion: profile stated in a turn"
    assert got[:3] == [
        ("phone", "insert", promoted),
        ("address", "insert", promoted),
        ("shipping", "insert", "promotion: preference stated in a turn"),
    ]
    assert ("phone", "erase", "forget command: topic phone") in got
    assert ("address", "archive", EVENT_CAUSE) in got
    assert (
        "address",
        "erase",
        "sweep: archived since " + format_ts(T0 + 120) + ", grace period over",
    ) in got
    expired = [c for k, a, c in got if k == "shipping" and a == "delete"]
    assert len(expired) == 1 and expired[0].startswith("sweep: expired at ")
    assert "by ttl." in expired[0]
    # Forgotten is gone everywhere: the phone's values are redacted, and neither they nor
    # the command's words are in any cause.
    phone = [r for r in rows if r["key"] == "phone"]
    assert {r["new_value"] for r in phone if r["action"] == "insert"} == {"[redacted]"}
    assert all(set(r) == set(FIELDS) for r in rows)
    assert [r["audit_id"] for r in rows] == sorted(r["audit_id"] for r in rows)
    shipped = next(r for r in rows if r["key"] == "shipping" and r["action"] == "insert")
    assert shipped["new_value"]["value"].endswith("by SF Express")
    assert shipped["at"] == T0 and shipped["at_utc"] == format_ts(T0).replace("+00:00", "Z")

    table = audit(data_dir, written, "--user", ALICE)
    assert "cause" in table.splitlines()[0] and "forget command: topic phone" in table
    assert "[redacted]" in table

    parsed = list(csv.DictReader(io.StringIO(audit(data_dir, written, "--format", "csv"))))
    assert [(r["key"], r["action"], r["cause"]) for r in parsed] == got  # one user only
    for output in (table, json.dumps(rows), audit(data_dir, written, "--format", "csv")):
        assert PHONE not in output


def test_a_time_range_and_a_user_select_rows(written: Namespace, data_dir: Path) -> None:
    every = json.loads(audit(data_dir, written, "--format", "json"))
    early = json.loads(audit(data_dir, written, "--until", str(T0 + 60), "--format", "json"))
    late = json.loads(audit(data_dir, written, "--since", format_ts(T0 + 90), "--format", "json"))
    assert early == [r for r in every if r["at"] <= T0 + 60]
    assert late == [r for r in every if r["at"] >= T0 + 90]
    assert early and late and len(early) + len(late) == len(every)
    assert json.loads(audit(data_dir, written, "--user", "bob", "--format", "json")) == []


def test_reading_writes_nothing(written: Namespace, data_dir: Path) -> None:
    url = start_embedded_postgres(data_dir / "pg").url

    def snapshot() -> list[tuple[object, ...]]:
        with psycopg.connect(url) as conn:
            query = sql.SQL("SELECT * FROM {} ORDER BY audit_id")
            return conn.execute(query.format(sql.Identifier(written.audit_table))).fetchall()

    before = snapshot()
    audit(data_dir, written)
    assert snapshot() == before
    # A prefix nobody wrote to: an error naming it, and no tables made.
    runner = CliRunner()
    options = ["audit", "--data-dir", str(data_dir), "--prefix", "nobody_here"]
    result = runner.invoke(main, options, env={"MEMH_PG_URL": None})
    assert result.exit_code == 1 and "no long-term memory under the prefix 'nobody_here'" in (
        result.output
    )
    with psycopg.connect(url) as conn:
        tables = conn.execute("SELECT tablename FROM pg_tables WHERE tablename LIKE 'nobody%'")
        assert tables.fetchall() == []


@pytest.mark.parametrize("text", ["yesterday", "nan", "2026-13-01"])
def test_a_bad_time_is_an_error_naming_the_option(text: str) -> None:
    import click

    with pytest.raises(click.BadParameter, match=repr(text)) as raised:
        parse_moment("--since", text)
    assert raised.value.param_hint == "--since"


@pytest.mark.parametrize(
    ("said", "cause"),
    [
        (f"forget my phone {PHONE}", "forget command: topic phone"),
        (f"忘记我的手机号{PHONE}", "forget command: topic phone"),
        ("please forget my address 12 Baker Street", "forget command: topic address"),
        ("forget about john.smith@example.com", "forget command: topic (no known key)"),
        ("forget everything about me", "forget command: everything"),
    ],
)
def test_a_forget_commands_cause_names_its_scope_never_its_words(
    said: str, cause: str, clock: VirtualClock, embedder: Embedder
) -> None:
    system = build_memory_system(
        Settings(backend="memory", encryption_key=SecretStr(generate_key())),
        clock=clock,
        embedder=embedder,
        strategy=load_strategy("hybrid").with_params({"promotion": "rules", "consolidation": None}),
    )
    for text in (f"My phone is {PHONE}", "My address is 12 Baker Street, London."):
        system.turn(user_id=ALICE, session_id="s1", text=text)
    system.ltm.upsert(
        user_id=ALICE,
        category="profile",
        key="email",
        value={"value": "john.smith@example.com"},
        text="my email is john.smith@example.com",
    )
    clock.advance(60)
    system.turn(user_id=ALICE, session_id="s1", text=said)
    if cause == "forget command: everything":  # hybrid asks first: the user confirms
        system.turn(user_id=ALICE, session_id="s1", text="yes")
    erased = [e for e in system.ltm.audit_entries(user_id=ALICE) if e.action == "erase"]
    assert erased and {e.cause for e in erased} == {cause}
    system.dispose()

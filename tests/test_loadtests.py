"""The Locust load tests: HDR merging, open-loop accounting, SLA verdicts, a real run.

Everything but the real runs is pure: `loadtests.*` helpers never import Locust, whose
import monkey-patches the process with gevent. The real runs start Locust as a
subprocess with the hashing embedder, on the in-memory backend but for one.
"""

from __future__ import annotations

import csv
import itertools
import json
import math
import os
import random
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from loadtests.conversations import BUILTIN, load_conversations, render
from loadtests.hdr import OpHistograms, new_histogram
from loadtests.options import LoadOptions
from loadtests.pacing import ArrivalSchedule, run_paced
from loadtests.shape import parse_duration, parse_steps, step_at
from memharness.load_cmd import load
from memharness.load_locust import build_locust_command, default_locustfile
from memharness.verdict.histograms import TURN_INTENDED, check_slas, failed, quantile_ci
from memharness.verdict.limits import DEFAULT_SLAS, Sla, parse_slas

REPO = Path(__file__).resolve().parent.parent


# --------------------------------------------------------------------------- HDR
def test_hdr_keeps_sub_millisecond_resolution() -> None:
    hists = OpHistograms()
    for ms in (0.120, 0.250, 0.400, 0.900):
        hists.record_ms("session", ms)
    summary = hists.summary("session")
    assert summary.count == 4
    assert summary.p50_ms == pytest.approx(0.250, rel=1e-3)
    assert summary.max_ms == pytest.approx(0.900, rel=1e-3)
    assert summary.min_ms == pytest.approx(0.120, rel=1e-3)


def test_hdr_merge_across_workers_equals_one_histogram() -> None:
    rng = random.Random(5)
    samples = {op: [rng.lognormvariate(0, 1) for _ in range(3000)] for op in ("stm", "turn")}
    workers = [OpHistograms() for _ in range(3)]
    single = OpHistograms()
    for op, values in samples.items():
        for index, ms in enumerate(values):
            workers[index % 3].record_ms(op, ms)
            single.record_ms(op, ms)

    master = OpHistograms()
    for worker in workers:
        master.merge_encoded(worker.take_encoded())  # what report_to_master carries
        assert worker.total_count() == 0  # a worker sends deltas, then starts afresh

    assert master.total_count() == single.total_count() == 6000
    for op in samples:
        merged, direct = master.summary(op), single.summary(op)
        assert merged.count == direct.count
        for field in ("p50_ms", "p95_ms", "p99_ms", "max_ms", "min_ms"):
            assert getattr(merged, field) == getattr(direct, field)


def test_hdr_encoded_deltas_add_up_over_reports() -> None:
    worker, master = OpHistograms(), OpHistograms()
    for report in range(4):
        for _ in range(10):
            worker.record_ms("ltm", 2.0 + report)
        master.merge_encoded(worker.take_encoded())
    assert master.summary("ltm").count == 40
    assert master.summary("ltm").max_ms == pytest.approx(5.0, rel=1e-3)
    assert worker.take_encoded() == {}  # nothing new: nothing sent


def test_hdr_clamps_out_of_range_values_but_counts_them() -> None:
    hists = OpHistograms()
    hists.record_ms("turn", 0.0)
    hists.record_ms("turn", 10 * 3_600_000.0)
    hists.record_ms("turn", math.inf)
    assert hists.summary("turn").count == 3


def test_p95_confidence_interval_brackets_the_true_quantile() -> None:
    hist = new_histogram()
    for value in range(1, 10_001):  # uniform 1..10000 us: true p95 = 9500
        hist.record_value(value)
    low, high = quantile_ci(hist, 0.95) or (0.0, 0.0)
    assert low < 9500 < high
    assert high - low < 200
    small = new_histogram()
    for value in range(1, 11):
        small.record_value(value)
    assert quantile_ci(small, 0.95) is None  # 10 samples cannot bound a p95


# --------------------------------------------------------------------------- open loop
class FakeClock:
    """A monotonic clock that only moves when sleeping or working."""

    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_open_loop_counts_the_wait_behind_a_slow_operation() -> None:
    """Coordinated omission: arrivals every 10 ms, an operation that takes 25 ms.

    The service time stays 25 ms; the response time from the intended start grows by
    15 ms a turn, as it does for callers arriving on schedule at a saturated server.
    """
    clock = FakeClock()
    schedule = ArrivalSchedule(100.0)

    def slow() -> str:
        clock.now += 0.025
        return "done"

    paced = [run_paced(schedule, slow, clock=clock, sleep=clock.sleep)[1] for _ in range(20)]
    services = [p.service_ms for p in paced]
    responses = [p.response_ms for p in paced]
    assert services == pytest.approx([25.0] * 20)
    assert responses == pytest.approx([25.0 + 15.0 * k for k in range(20)])
    assert paced[-1].lag_ms == pytest.approx(15.0 * 19)
    assert clock.slept == []  # always behind: never sleeps


def test_open_loop_on_time_operations_sleep_to_the_schedule() -> None:
    clock = FakeClock()
    schedule = ArrivalSchedule(50.0)  # every 20 ms

    def fast() -> None:
        clock.now += 0.005

    paced = [run_paced(schedule, fast, clock=clock, sleep=clock.sleep)[1] for _ in range(10)]
    assert [p.intended - paced[0].intended for p in paced] == pytest.approx(
        [0.02 * k for k in range(10)]
    )
    assert all(p.response_ms == pytest.approx(5.0) for p in paced)
    assert clock.slept == pytest.approx([0.015] * 9)


def test_poisson_arrivals_are_seeded_and_average_the_rate() -> None:
    def gaps(seed: int) -> list[float]:
        schedule = ArrivalSchedule(200.0, arrivals="poisson", seed=seed)
        times = [schedule.claim(0.0) for _ in range(4001)]
        return [b - a for a, b in itertools.pairwise(times)]

    first = gaps(1)
    assert first == gaps(1)
    assert first != gaps(2)
    assert sum(first) / len(first) == pytest.approx(1 / 200.0, rel=0.05)


def test_schedule_rejects_bad_rates() -> None:
    with pytest.raises(ValueError, match="rate"):
        ArrivalSchedule(0.0)
    with pytest.raises(ValueError, match="arrivals"):
        ArrivalSchedule(1.0, arrivals="bursty")  # type: ignore[arg-type]


# --------------------------------------------------------------------------- SLA
def _hists(**values_ms: list[float]) -> OpHistograms:
    hists = OpHistograms()
    for op, values in values_ms.items():
        for ms in values:
            hists.record_ms(op, ms)
    return hists


def test_sla_verdict_names_the_broken_sla() -> None:
    hists = _hists(
        session=[0.3] * 900 + [9.0] * 100,  # p95 = 9 ms: session SLA (5 ms) broken
        stm=[10.0] * 1000,
        ltm=[20.0] * 1000,
        turn=[40.0] * 1000,
    )
    verdicts = check_slas(hists, DEFAULT_SLAS)
    broken = failed(verdicts)
    assert [v.sla.op for v in broken] == ["session"]
    assert broken[0].status == "broken"
    assert "session p95 < 5 ms" in broken[0].message
    assert "BROKEN" in broken[0].message
    assert "9.0" in broken[0].message
    assert {v.sla.op: v.status for v in verdicts} == {
        "session": "broken",
        "stm": "ok",
        "ltm": "ok",
        "turn": "ok",
    }


def test_sla_marginal_fails_only_the_point_gate() -> None:
    # 200 calls: p95 (the 190th) is 5.5 ms, over the 5 ms limit, and the interval's ranks
    # (183rd and 197th) read 4.8 and 6.2 ms: the interval reaches under the limit.
    hists = _hists(session=[1.0] * 180 + [4.6 + 0.1 * i for i in range(20)])
    (verdict,) = check_slas(hists, [Sla("session", 5.0)])
    assert verdict.status == "marginal"
    assert verdict.value_ms == pytest.approx(5.5, abs=0.01)
    assert verdict.ci_ms is not None and verdict.ci_ms[0] < 5.0 < verdict.ci_ms[1]
    assert failed([verdict], gate="ci") == []
    assert failed([verdict], gate="point") == [verdict]


def test_sla_without_samples_fails() -> None:
    verdicts = check_slas(_hists(session=[0.1] * 100), [Sla("ltm", 200.0)])
    assert [v.status for v in failed(verdicts)] == ["no data"]
    assert "ltm" in verdicts[0].message and "no samples" in verdicts[0].message


def test_open_loop_judges_the_turn_from_its_intended_start() -> None:
    hists = _hists(turn=[20.0] * 500, **{TURN_INTENDED: [20.0] * 400 + [900.0] * 100})
    closed = check_slas(hists, [Sla("turn", 300.0)])
    opened = check_slas(hists, [Sla("turn", 300.0)], measure_as={"turn": TURN_INTENDED})
    assert failed(closed) == []
    (broken,) = failed(opened)
    assert broken.measured_op == TURN_INTENDED
    assert "turn p95 < 300 ms (measured as turn@intended) BROKEN" in broken.message


def test_parse_slas() -> None:
    assert parse_slas("session=5, turn=300@p99") == (
        Sla("session", 5.0),
        Sla("turn", 300.0, 99.0),
    )
    for bad in ("session", "stm=fast", "=5", "ltm=-1", "turn=300@p100"):
        with pytest.raises(ValueError, match="SLA"):
            parse_slas(bad)


def test_options_turn_measure_and_validation() -> None:
    assert LoadOptions().turn_measure == "turn"
    assert LoadOptions(serial=True).turn_measure == "turn+queue"
    assert LoadOptions(open_loop=True, rate=5.0).turn_measure == TURN_INTENDED

    class Parsed:
        open_loop = True
        rate = 0.0

    with pytest.raises(ValueError, match="--open-loop needs --rate"):
        LoadOptions.from_parsed(Parsed())


# --------------------------------------------------------------------------- shape, scripts
def test_steps_parse_and_schedule() -> None:
    steps = parse_steps("2x30s,10x1m/5,20x90")
    assert [(s.users, s.duration_s, s.spawn_rate) for s in steps] == [
        (2, 30.0, 2.0),
        (10, 60.0, 5.0),
        (20, 90.0, 20.0),
    ]
    assert step_at(steps, 0).users == 2  # type: ignore[union-attr]
    assert step_at(steps, 45).users == 10  # type: ignore[union-attr]
    assert step_at(steps, 179.9).users == 20  # type: ignore[union-attr]
    assert step_at(steps, 180.0) is None
    assert parse_duration("1.5m") == 90.0
    for bad in ("", "10", "x30s", "10x", "10x0s"):
        with pytest.raises(ValueError):
            parse_steps(bad)


def test_conversations_render_bilingual_and_varied() -> None:
    conversations = load_conversations()
    assert {c.lang for c in conversations} >= {"en", "zh"}
    rng = random.Random(0)
    plays = [render(c, rng) for c in BUILTIN for _ in range(5)]
    for play in plays:
        assert all(text.strip() and "{" not in text for text in play)
    texts = [text for play in plays for text in play]
    assert len(set(texts)) > len(texts) // 2  # most utterances differ: few cache hits


# --------------------------------------------------------------------------- real runs
def test_locust_command_uses_the_shape_instead_of_users(tmp_path: Path) -> None:
    common = {
        "locustfile": default_locustfile(),
        "run_dir": tmp_path / "r1",
        "run_id": "r1",
        "users": 3,
        "spawn_rate": 3.0,
        "duration": "5s",
        "rate": 20.0,
        "open_loop": True,
        "arrivals": "poisson",
        "serial": False,
        "sla": None,
    }
    plain = build_locust_command(steps=None, **common)  # type: ignore[arg-type]
    stepped = build_locust_command(steps="2x5s", **common)  # type: ignore[arg-type]
    assert default_locustfile().is_file()
    assert "-u" in plain and "-t" in plain and "--open-loop" in plain
    assert "-u" not in stepped and "-t" not in stepped


def test_the_load_command_and_its_locustfile_import_outside_the_checkout(tmp_path: Path) -> None:
    """`loadtests` is an installed package: from another directory, with no PYTHONPATH,
    `memharness load` checks its options with it and Locust loads the locustfile's user
    and shapes from it."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    bad = subprocess.run(
        [sys.executable, "-m", "memharness.cli", "load", "--sla", "turn=fast"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert bad.returncode == 2 and "--sla 'turn=fast'" in bad.stderr, bad.stderr
    code = (
        "from locust.util.load_locustfile import load_locustfile\n"
        "from memharness.load_locust import default_locustfile\n"
        "users, shapes = load_locustfile(str(default_locustfile()))\n"
        "print(sorted(users))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['ConversationUser']"


def _run_load(tmp_path: Path, run_id: str, *args: str) -> tuple[int, Path, str]:
    result = CliRunner().invoke(
        load,
        [
            "--backend",
            "memory",
            "--embedder",
            "hashing",
            "--out",
            str(tmp_path),
            "--run-id",
            run_id,
            *args,
        ],
        catch_exceptions=False,
    )
    return result.exit_code, tmp_path / run_id, result.output


def test_memharness_load_writes_reports_and_exits_zero(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MEMH_VERBOSE", raising=False)  # no `memharness -v`
    code, run_dir, output = _run_load(
        tmp_path, "ok", "--users", "2", "--duration", "3s", "--", "--think-time", "0.05,0.2"
    )
    assert code == 0, output
    # What Locust's process printed: a line as each phase starts and ends (piped: no
    # live line), the HDR table once; Locust's own INFO lines and table only with -v.
    printed = capfd.readouterr()
    assert "\r" not in printed.err
    phases = [line for line in printed.err.splitlines() if line.startswith("load: ")]
    assert phases[0] == "load: 2 users, closed-loop for 3 s ..."
    assert re.fullmatch(r"load: 2 users, closed-loop for 3 s: done in 3\.\d s", phases[1])
    assert "writing the reports: done in" in printed.err
    assert printed.out.count("HDR latency per operation") == 1
    assert "/INFO/locust" not in printed.err and "Aggregated" not in printed.out + printed.err
    for name in ("load_stats.csv", "load.html", "load_hdr.json", "load_hdr.csv"):
        assert (run_dir / name).is_file(), name
    report = json.loads((run_dir / "load_hdr.json").read_text())
    assert report["passed"] is True
    assert report["mode"] == "closed-loop"
    # -t counts from the test's start, not from when gevent's loop last looked at the clock
    assert 2.9 <= report["run_s"] < 10
    ops = report["ops"]
    assert {"session", "stm", "ltm", "embed", "turn"} <= set(ops)
    assert ops["turn"]["count"] >= 10
    assert all(ops[op]["count"] == ops["turn"]["count"] for op in ("session", "stm", "ltm"))
    assert 0 < ops["session"]["p95_ms"] < 5  # sub-millisecond figures, not rounded to 0
    cache = report["embedding_cache"]
    assert cache["hits"] + cache["misses"] >= ops["turn"]["count"]  # one query embedding a turn
    with (run_dir / "load_hdr.csv").open() as handle:
        hdr_rows = {row["op"]: row for row in csv.DictReader(handle)}
    assert int(hdr_rows["turn"]["count"]) == ops["turn"]["count"]
    assert hdr_rows["session"]["sla_status"] == "ok"
    # Locust writes its CSV once a second, so the last second may be missing from it.
    with (run_dir / "load_stats.csv").open() as handle:
        rows = {row["Name"]: row for row in csv.DictReader(handle)}
    assert {"session", "stm", "ltm", "embed", "turn"} <= set(rows)
    assert 0 < int(rows["turn"]["Request Count"]) <= ops["turn"]["count"]


def test_memharness_load_open_loop_breach_exits_three_naming_it(tmp_path: Path) -> None:
    code, run_dir, output = _run_load(
        tmp_path,
        "breach",
        *("--users", "2", "--duration", "3s", "--open-loop", "--rate", "40"),
        *("--sla", "session=5,turn=0.001"),
    )
    assert code == 3, output
    report = json.loads((run_dir / "load_hdr.json").read_text())
    assert report["mode"] == "open-loop"
    assert report["ops"][TURN_INTENDED]["count"] >= 60
    assert (
        report["failed"]
        and "turn p95 < 0.001 ms (measured as turn@intended)" in (report["failed"][0])
    )
    assert [s["status"] for s in report["slas"]] == ["ok", "broken"]


def test_rate_steps_past_saturation_are_expected_not_a_failure(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """A capacity run offers rates past the knee on purpose: the step there breaks the SLA,
    the run says so in a plain note and exits 0; each step has its progress line."""
    code, run_dir, output = _run_load(
        tmp_path,
        "knee",
        *("--rates", "20,5000", "--step-duration", "1s", "--sla", "turn=300"),
    )
    printed = capfd.readouterr()
    assert code == 0, output + printed.err[-3000:]
    held = [s["sla_held"] for s in json.loads((run_dir / "steps.json").read_text())["steps"]]
    assert held == [True, False]
    assert "step at 5000 turns/s past saturation: expected, it finds the knee" in printed.out
    assert "ERROR" not in printed.err
    for title in ("rate step 1/2: 20 turns/s for 1 s", "rate step 2/2: 5000 turns/s for 1 s"):
        assert f"{title} ...\n" in printed.err
        assert re.search(rf"{title}: done in \d\.\d s: achieved [\d.]+ turns/s, p95 ", printed.err)


def test_distributed_master_and_worker_merge_hdr(tmp_path: Path) -> None:
    """One master and one worker on 127.0.0.1: the master's HDR holds the worker's turns."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env_args = {"cwd": REPO, "env": _locust_env(), "stdout": subprocess.PIPE}
    base = [sys.executable, "-m", "locust", "-f", str(default_locustfile())]
    master = subprocess.Popen(
        [
            *base,
            *("--master", "--master-bind-host", "127.0.0.1", "--master-bind-port", str(port)),
            *("--headless", "--expect-workers", "1", "-u", "2", "-r", "2", "-t", "3s"),
            *("--open-loop", "--rate", "30", "--out-dir", str(tmp_path), "--run-id", "dist"),
        ],
        stderr=subprocess.STDOUT,
        **env_args,  # type: ignore[call-overload]
    )
    worker = subprocess.Popen(
        [*base, "--worker", "--master-host", "127.0.0.1", "--master-port", str(port)],
        stderr=subprocess.DEVNULL,
        **env_args,  # type: ignore[call-overload]
    )
    try:
        out, _ = master.communicate(timeout=60)
        worker.wait(timeout=30)
    finally:
        for process in (master, worker):
            if process.poll() is None:
                process.kill()
    assert master.returncode == 0, out.decode(errors="replace")[-3000:]
    report = json.loads((tmp_path / "dist" / "load_hdr.json").read_text())
    assert report["runner"] == "MasterRunner"
    assert len(report["workers"]) == 1
    assert report["workers_without_final_report"] == []
    assert report["ops"]["turn"]["count"] == report["ops"][TURN_INTENDED]["count"] >= 60
    cache = report["embedding_cache"]  # counted on the worker, summed on the master
    assert cache["hits"] + cache["misses"] >= report["ops"]["turn"]["count"]


def test_embedded_servers_stop_before_locust_closes_its_csv_files(tmp_path: Path) -> None:
    """On the embedded servers, Locust's process stops them while Locust still runs, not
    at the interpreter's exit: by then Locust has closed its CSV files but not stopped the
    greenlet that writes them, and a server's stop (pg_ctl as a subprocess, under gevent)
    woke it to write into the closed files (ValueError: I/O operation on closed file)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMH_", "RAY_"))}
    env.update(MEMH_DATA_DIR=str(tmp_path / "data"), MEMH_EMBEDDER="hashing", PYTHONPATH=str(REPO))
    done = subprocess.run(
        [sys.executable, "-m", "memharness.cli", "-v", "load", "--users", "2", "--duration",
         "2s", "--sla", "turn=60000", "--out", str(tmp_path), "--run-id", "embedded", "--",
         "--think-time", "0.1,0.3"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    printed = done.stdout + done.stderr
    assert done.returncode == 0, printed[-3000:]
    assert "I/O operation on closed file" not in printed and "Traceback" not in printed
    # -v: pgserver's INFO lines, and Locust's, show when the server stopped.
    stopped = done.stderr.index("pg_ctl', '-D', ") and done.stderr.index("'-w', 'stop']")
    assert stopped < done.stderr.index("Shutting down (exit code 0)"), done.stderr[-3000:]


def _locust_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(MEMH_BACKEND="memory", MEMH_EMBEDDER="hashing", PYTHONPATH=str(REPO))
    env.pop("MEMH_LOAD_STEPS", None)
    return env

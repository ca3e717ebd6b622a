"""`memharness load --target URL` against a real `memharness serve` on localhost.

The service runs as its own process (uvicorn, the in-memory backends, the hashing
embedder), with a keys file made by the service's own `KeyStore`; the load runs as
`memharness load` does (Locust in a subprocess with HttpUsers). Checked: the scenario's
turns, probes and events reach the service and come back with its Server-Timing; the
report splits each round trip into service and network time; the SLAs judge the round
trip; the run's users are erased through the service; and a service that cannot be
reached, or refuses the key, stops the command before any run starts.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests
from click.testing import CliRunner

from loadtests.target import check_target_url, service_ms
from memharness.load_cmd import load
from memharness.serve.auth import KeyStore
from reference.crypto import generate_key

REPO = Path(__file__).resolve().parent.parent
#: How long the service may take to answer its first health check (model-free: seconds).
START_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Service:
    url: str
    key: str


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMH_", "RAY_"))}
    env.update(
        MEMH_BACKEND="memory",
        MEMH_EMBEDDER="hashing",
        MEMH_DATA_DIR=str(tmp / "data"),
        MEMH_ENCRYPTION_KEY=generate_key(),
        PYTHONPATH=str(REPO),
    )
    return env


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """`memharness serve` on a free localhost port, with one tenant's key."""
    tmp = tmp_path_factory.mktemp("served")
    keys = tmp / "keys.json"
    key = KeyStore(keys).add("acme")
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "memharness.cli", "serve", "--port", str(port),
         "--keys", str(keys), "--backend", "memory", "--embedder", "hashing"],
        cwd=REPO, env=_env(tmp), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + START_TIMEOUT_S
    try:
        while True:  # readiness, not expiry: the first answer ends the wait
            try:
                if requests.get(f"{url}/v1/health", headers={"Authorization": f"Bearer {key}"},
                                timeout=2).status_code == 200:  # fmt: skip
                    break
            except requests.ConnectionError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                _, err = process.communicate()
                pytest.fail(f"memharness serve did not start: {err[-2000:]}")
            time.sleep(0.1)
        yield Service(url, key)
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_load_target_drives_the_service_and_splits_service_from_network(
    service: Service, tmp_path: Path
) -> None:
    """A scenario's turns, probes and events over HTTP: every call timed three ways,
    the SLAs on the round trip (a recall SLA no service can meet breaks: exit 3), the
    run's users erased through the service."""
    env = _env(tmp_path)
    env["MEMH_API_KEY"] = service.key  # the key from the environment, as documented
    done = subprocess.run(
        [sys.executable, "-m", "memharness.cli", "load", "--target", service.url,
         "--users", "2", "--duration", "2s", "--domain", "ecommerce", "--scenario-users", "4",
         "--sla", "turn=60000,recall=0.001", "--out", str(tmp_path), "--run-id", "served",
         "--", "--think-time", "0.02,0.05"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    printed = done.stdout + done.stderr
    assert done.returncode == 3, printed[-4000:]  # the recall SLA, on the round trip
    assert "Traceback" not in printed and service.key not in printed
    report = json.loads((tmp_path / "served" / "load_hdr.json").read_text(encoding="utf-8"))
    assert report["target"] == service.url and report["backends"] == {"target": service.url}
    assert report["error_total"] == 0, report["errors"]
    ops, split = report["ops"], report["service_split"]
    for op in ("turn", "recall"):
        trip, served, wire = (ops[op], ops[f"{op}.service"], ops[f"{op}.network"])
        assert trip["count"] > 0 and trip["count"] == served["count"] == wire["count"]
        # network = round trip - service, call by call: the means add up (HDR rounding).
        assert trip["mean_ms"] == pytest.approx(served["mean_ms"] + wire["mean_ms"], rel=0.01)
        assert 0 < served["p50_ms"] < trip["p99_ms"]
        for part in ("round_trip", "service", "network"):
            assert split[op][part]["count"] == trip["count"]
            assert split[op][part]["p95_ms"] == pytest.approx(
                ops[op if part == "round_trip" else f"{op}.{part}"]["p95_ms"], abs=1e-3
            )
    assert ops["event"]["count"] > 0 and ops["embed"]["count"] == ops["turn"]["count"]
    verdicts = {v["sla"]: v for v in report["slas"]}
    assert [v["status"] for v in report["slas"]] == ["ok", "broken"], verdicts
    assert report["failed"] and "recall" in report["failed"][0]
    assert "SLA recall p95 < 0.001 ms: BROKEN on the round trip" in done.stdout
    assert "the service's own p95" in done.stdout
    erased = report["consistency"]["erasure"]
    assert erased["ok"] and erased["checked"]["users erased"] >= 2, erased
    assert erased["checked"]["recalls after erasure"] == erased["checked"]["users erased"]


def test_nothing_listening_is_a_clear_error_before_the_run(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{_free_port()}"
    result = CliRunner().invoke(
        load, ["--target", url, "--api-key", "k", "--out", str(tmp_path)], env={}
    )
    assert result.exit_code == 2 and f"nothing listens at {url}" in result.output
    assert not list(tmp_path.iterdir())  # nothing started, nothing written


def test_a_refused_key_is_a_clear_error_before_the_run(service: Service, tmp_path: Path) -> None:
    forged = service.key[:-4] + ("AAAA" if not service.key.endswith("AAAA") else "BBBB")
    result = CliRunner().invoke(
        load, ["--target", service.url, "--out", str(tmp_path)], env={"MEMH_API_KEY": forged}
    )
    assert result.exit_code == 2 and "the key was refused" in result.output, result.output
    no_key = CliRunner().invoke(load, ["--target", service.url], env={"MEMH_API_KEY": ""})
    assert no_key.exit_code == 2 and "--api-key KEY or MEMH_API_KEY" in no_key.output


@pytest.mark.parametrize(
    "option", [["--strategy", "hybrid"], ["--time-scale", "10"], ["--backend", "memory"],
               ["--overload"]],
)  # fmt: skip
def test_options_of_the_in_process_memory_are_refused(option: list[str]) -> None:
    result = CliRunner().invoke(load, ["--target", "http://127.0.0.1:9", "--api-key", "k", *option])
    assert result.exit_code == 2 and option[0] in result.output
    assert "its own strategy, backends and clock" in result.output


def test_server_timing_and_urls_are_read_as_the_contract_says() -> None:
    assert service_ms({"Server-Timing": "app;dur=12.5"}) == 12.5
    assert service_ms({"server-timing": 'db;dur=3, app;desc="memory";dur=7'}) == 7.0
    assert service_ms({"Server-Timing": "db;dur=3"}) is None
    assert service_ms({}) is None
    assert check_target_url("http://127.0.0.1:8080/") == "http://127.0.0.1:8080"
    for bad in ("127.0.0.1:8080", "ftp://host", "http://host:port", "http://h/?q=1"):
        with pytest.raises(ValueError):
            check_target_url(bad)


def test_a_key_without_a_target_is_refused() -> None:
    result = CliRunner().invoke(load, ["--api-key", "k", "--duration", "1s"])
    assert result.exit_code == 2 and "--api-key goes with --target URL" in result.output


def test_the_split_says_when_the_service_reports_no_server_timing() -> None:
    from loadtests.hdr import OpHistograms
    from loadtests.service_split import format_split, split_document
    from memharness.verdict.histograms import check_slas
    from memharness.verdict.limits import Sla

    hists = OpHistograms()
    for ms in (10.0, 20.0, 30.0):
        hists.record_ms("turn", ms)
        hists.record_ms("recall", ms / 2)
        hists.record_ms("recall.service", ms / 4)
        hists.record_ms("recall.network", ms / 4)
    split = split_document(hists)
    assert split["turn"]["service"] is None and split["turn"]["network"] is None
    assert split["recall"]["service"]["count"] == 3 and "event" not in split
    verdicts = check_slas(hists, (Sla("turn", 25.0), Sla("recall", 100.0)))
    text = "\n".join(format_split(split, verdicts, "http://svc"))
    assert "turn      service" in text and "(no Server-Timing from the service)" in text
    assert "SLA turn p95 < 25 ms: BROKEN on the round trip" in text
    assert "the service reported no Server-Timing" in text
    assert (
        "SLA recall p95 < 100 ms: met on the round trip (recall p95 15.0 ms); the "
        "service's own p95 7.5 ms, the network's 7.5 ms" in text
    )

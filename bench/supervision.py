"""kill -9 of each embedded server of `memharness serve` during a load.

    .venv/bin/python -m bench.supervision --seconds 60 --kill-at 20 --workers 4

For each server (`--server`, repeatable; default Redis, PostgreSQL and Chroma): a fresh
`memharness serve` on the embedded backends (hybrid, hashing embedder, a maintenance
child beside it: the default), `--workers` threads sending turns for `--seconds`; each
user says four statements with a word of its own, and every other user is then erased
(DELETE). At `--kill-at` s every process of the server is SIGKILLed (its main process
stopped first, so it forks nothing meanwhile). A thread reads /v1/health every 0.1 s.
Once the load ends and the service's pending work is done, every user is read back.

Reported per server:
- **back**: from the kill to the answer of the first health request sent after it
  that is answered 200, and of the first such turn;
- **health while down**: how many answers were 503, the layers they named down (any
  other than the killed one, or a path in the body, is an error);
- **acknowledged writes lost**: turns answered 200 whose STM record, or whose user's
  last promoted LTM fact, a recall of the (not erased) user no longer returns;
- **half-applied**: turns answered 503 whose record a recall returns; erased users of
  whom a recall returns anything (a DELETE answered 503 included: completed by the
  service's pending work);
- requests by outcome (200, 503, other, no answer).

Redis is a cache here (no persistence): sessions are lost with it by design; a turn's
acknowledged writes are its STM record and LTM fact.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psutil

from memharness.serve.auth import KeyStore
from reference.crypto import generate_key

SERVERS = {"redis": "session", "pg": "ltm", "chroma": "stm"}
TEMPLATES = (
    "I always prefer {w} Express for my deliveries.",
    "My company is {w} Industries.",
    "I am allergic to {w} nuts.",
    "My favourite colour is {w} blue.",
)
REPO = Path(__file__).resolve().parent.parent


# ---------------------------------------------------------------- the servers' processes
def server_pids(data: Path, server: str) -> list[int]:
    """The processes of one embedded server of a service on `data`, its main one first."""
    if server == "redis":
        registry = json.loads((data / "redis" / "redis.db.settings").read_text())
        main = int(Path(registry["pidfile"]).read_text().split()[0])
    elif server == "pg":
        main = int((data / "pg" / "postmaster.pid").read_text().split()[0])
    else:
        path = str(data / "chroma-server")
        main = next(
            p.pid
            for p in psutil.process_iter(["cmdline"])
            if p.info["cmdline"] and "run" in p.info["cmdline"] and path in p.info["cmdline"]
        )
    process = psutil.Process(main)
    return [main, *(child.pid for child in process.children(recursive=True))]


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def kill_server(data: Path, server: str, *, within_s: float = 30.0) -> list[int]:
    """SIGKILL every process of the server (the main one stopped first); returns their
    pids once they are gone."""
    os.kill(server_pids(data, server)[0], signal.SIGSTOP)
    pids = server_pids(data, server)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + within_s
    while not all(_gone(pid) for pid in pids):
        if time.monotonic() > deadline:
            raise RuntimeError(f"{server}: {pids} outlived SIGKILL")
        time.sleep(0.01)  # waiting for processes to exit, bounded
    return pids


# ---------------------------------------------------------------------------- the service
@dataclass
class Service:
    url: str
    headers: dict[str, str]
    data: Path
    process: subprocess.Popen[str]


@contextlib.contextmanager
def serve(root: Path) -> Any:
    data = root / "data"
    key = KeyStore(root / "keys.json").add("bench")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMH_")}
    env.update(MEMH_ENCRYPTION_KEY=generate_key(), PYTHONPATH=str(REPO))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [
        sys.executable,
        "-m",
        "memharness.cli",
        "serve",
        "--port",
        str(port),
        "--backend",
        "embedded",
        "--embedder",
        "hashing",
        "--data-dir",
        str(data),
        "--keys",
        str(root / "keys.json"),
    ]
    errors = open(root / "serve.err", "w")  # noqa: SIM115 - closed below
    process = subprocess.Popen(
        command, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=errors, text=True
    )
    service = Service(f"http://127.0.0.1:{port}", {"Authorization": f"Bearer {key}"}, data, process)
    try:
        deadline = time.monotonic() + 300
        while health(service)[0] != 200:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"serve did not start: {(root / 'serve.err').read_text()}")
            time.sleep(0.2)
        yield service
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(120)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        errors.close()


def health(service: Service) -> tuple[int, Any]:
    try:
        answer = httpx.get(f"{service.url}/v1/health", headers=service.headers, timeout=30)
        return answer.status_code, answer.text
    except httpx.TransportError as exc:
        return 0, type(exc).__name__


# ------------------------------------------------------------------------------- the load
@dataclass
class Outcomes:
    turns: list[dict[str, Any]] = field(default_factory=list)
    deletes: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


def _post(service: Service, route: str, body: dict[str, Any]) -> tuple[int, Any]:
    try:
        answer = httpx.post(f"{service.url}{route}", headers=service.headers, json=body, timeout=60)
        return answer.status_code, answer.json()
    except (httpx.TransportError, ValueError) as exc:
        return 0, type(exc).__name__


def worker(service: Service, index: int, until: float, out: Outcomes) -> None:
    for n in itertools.count():
        if time.monotonic() >= until:
            return
        user = f"w{index}u{n}"
        for t, template in enumerate(TEMPLATES):
            word = f"Zq{index}x{n}y{t}"
            body = {"user_id": user, "session_id": "s1", "text": template.format(w=word)}
            sent = time.monotonic()
            status, answer = _post(service, "/v1/turn", body)
            stored = answer.get("stored", {}) if isinstance(answer, dict) else {}
            with out.lock:
                out.turns.append(
                    {
                        "sent": sent,
                        "at": time.monotonic(),
                        "user": user,
                        "status": status,
                        "text": body["text"],
                        "word": word,
                        "stm": stored.get("stm"),
                        "ltm": stored.get("ltm"),
                        "erased": n % 2 == 1,
                    }
                )
        if n % 2 == 1:
            try:
                answer = httpx.delete(
                    f"{service.url}/v1/users/{user}", headers=service.headers, timeout=120
                )
                status = answer.status_code
            except httpx.TransportError:
                status = 0
            with out.lock:
                out.deletes.append({"at": time.monotonic(), "user": user, "status": status})


def watch_health(service: Service, until: float, seen: list[tuple[float, float, int, str]]) -> None:
    """(sent, answered, status, body) of a health request every 0.1 s."""
    while time.monotonic() < until:
        sent = time.monotonic()
        status, body = health(service)
        seen.append((sent, time.monotonic(), status, str(body)))
        time.sleep(0.1)


def recall(service: Service, user: str, query: str) -> dict[str, str]:
    """The ids and texts of what a recall of the user returns."""
    body = {"user_id": user, "session_id": "s1", "query": query, "k": 20}
    status, answer = _post(service, "/v1/recall", body)
    if status != 200:
        raise RuntimeError(f"recall of {user}: {status} {answer}")
    return {hit["id"]: hit["text"] for hit in answer["hits"]}


def read_back(out: Outcomes, service: Service) -> tuple[list[str], list[str]]:
    """(acknowledged writes lost, half-applied requests), every user read back."""
    lost, half = [], []
    by_user: dict[str, list[dict[str, Any]]] = {}
    for turn in out.turns:
        by_user.setdefault(turn["user"], []).append(turn)
    erased = {d["user"] for d in out.deletes}
    for user, turns in by_user.items():
        found: dict[str, str] = {}
        for turn in turns:
            found |= recall(service, user, turn["text"])
        if user in erased:
            if found:
                half.append(f"{user}: erased, {len(found)} records returned")
            continue
        for turn in turns:
            if turn["status"] == 200 and turn["stm"] and turn["stm"] not in found:
                lost.append(f"{user}: the STM record of '{turn['text']}'")
            if turn["status"] == 503 and any(turn["word"] in text for text in found.values()):
                half.append(f"{user}: a record of the turn answered 503 '{turn['text']}'")
        promoted = [t["ltm"] for t in turns if t["status"] == 200 and t["ltm"]]
        if promoted and promoted[-1] not in found:
            lost.append(f"{user}: the LTM fact {promoted[-1]}")
    return lost, half


def run_one(server: str, *, seconds: float, kill_at: float, workers: int) -> dict[str, Any]:
    layer = SERVERS[server]
    with tempfile.TemporaryDirectory(prefix="memh-sup-") as tmp, serve(Path(tmp)) as service:
        out = Outcomes()
        seen: list[tuple[float, float, int, str]] = []
        started = time.monotonic()
        until = started + seconds
        threads = [
            threading.Thread(target=worker, args=(service, i, until, out)) for i in range(workers)
        ]
        threads.append(threading.Thread(target=watch_health, args=(service, until + 20, seen)))
        for thread in threads:
            thread.start()
        time.sleep(max(0.0, started + kill_at - time.monotonic()))  # the load runs meanwhile
        killed_at = time.monotonic()
        kill_server(service.data, server)
        for thread in threads:
            thread.join()
        pending = service.data / "pending"
        deadline = time.monotonic() + 120
        while pending.is_dir() and list(pending.glob("*.json")):
            if time.monotonic() > deadline:
                break
            time.sleep(0.2)
        left_pending = len(list(pending.glob("*.json"))) if pending.is_dir() else 0
        after = [(answered, s, b) for sent, answered, s, b in seen if sent >= killed_at]
        back = next((t for t, s, _ in after if s == 200), None)
        down = [b for t, s, b in after if s == 503 and (back is None or t <= back)]
        named: Counter[str] = Counter()
        for body in down:
            with contextlib.suppress(ValueError, KeyError, TypeError):
                for name, state in json.loads(body)["layers"].items():
                    if state == "down":
                        named[name] += 1
        first_turn = min(
            (t["at"] for t in out.turns if t["sent"] > killed_at and t["status"] == 200),
            default=None,
        )
        lost, half = read_back(out, service)
        statuses = Counter(str(t["status"]) for t in out.turns)
        deletes = Counter(str(d["status"]) for d in out.deletes)
        return {
            "server": server,
            "layer": layer,
            "back_s": None if back is None else round(back - killed_at, 2),
            "first_turn_ok_s": None if first_turn is None else round(first_turn - killed_at, 2),
            "health_503": len(down),
            "health_named_down": dict(named),
            "health_path_leak": any("/tmp" in b or "socket" in b for _, _, b in after),
            "turns": dict(statuses),
            "deletes": dict(deletes),
            "users": len({t["user"] for t in out.turns}),
            "left_pending": left_pending,
            "acknowledged_lost": lost,
            "half_applied": half,
            "supervision_log": [
                line
                for line in (service.data.parent / "serve.err").read_text().splitlines()
                if line.startswith("serve: ") and f"{layer} (" in line
            ][:20],
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server", action="append", choices=sorted(SERVERS))
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--kill-at", type=float, default=20.0)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--out", type=Path, default=None, help="write the results as JSON")
    args = parser.parse_args()
    results = []
    for server in args.server or list(SERVERS):
        result = run_one(server, seconds=args.seconds, kill_at=args.kill_at, workers=args.workers)
        results.append(result)
        print(json.dumps(result), flush=True)
    print()
    print(
        "| server (layer) | back (health) | first turn ok | health 503s, naming "
        "| turns 200/503/other | DELETE 200/503 | lost | half-applied |"
    )
    print("|---|---:|---:|---|---|---|---:|---:|")
    for r in results:
        t, d = r["turns"], r["deletes"]
        other = sum(v for k, v in t.items() if k not in ("200", "503"))
        print(
            f"| {r['server']} ({r['layer']}) | {r['back_s']} s | {r['first_turn_ok_s']} s | "
            f"{r['health_503']}, {r['health_named_down']} | {t.get('200', 0)}/{t.get('503', 0)}"
            f"/{other} | {d.get('200', 0)}/{d.get('503', 0)} | {len(r['acknowledged_lost'])} | "
            f"{len(r['half_applied'])} |"
        )
    if args.out is not None:
        args.out.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()

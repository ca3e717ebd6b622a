"""CPU seconds and RSS of the processes a load run loads: psutil when installed, else /proc.

A step-load run charges each step with the CPU every process spent during it, so the
capacity plan can turn "CPU seconds per turn" into cores (operational laws: U = X·D).
The processes are found through the servers themselves, not by name, so a machine
running other Redis or PostgreSQL servers (other tests, other engineers) is no trouble:

- `load`: this process (the turn logic, Chroma's embedded client, the embedder in-process);
- `redis`: the pid `INFO server` reports, when that pid is on this machine;
- `postgres`: the postmaster whose backend serves `SELECT pg_backend_pid()`, with all its
  children (backends, checkpointer, WAL writer, autovacuum);
- `chroma`: the process listening on the port of `MEMH_CHROMA_URL`, when it is local.

A process tree's CPU includes its reaped children (`children_user`/`children_system`),
so a backend that exits mid-step is still counted.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from memharness.load_contract import MAINTENANCE_PID_ENV, SERVICE_PID_ENV

__all__ = [
    "ProcessSample",
    "discover_processes",
    "generator_apart_roles",
    "pg_url",
    "sample_processes",
    "summarize_series",
]

try:  # psutil comes with Locust; the /proc fallback keeps this module usable without it
    import psutil
except ImportError:  # pragma: no cover - exercised only where psutil is missing
    psutil = None

_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


@dataclass(frozen=True, slots=True)
class ProcessSample:
    """One role's processes at one moment: CPU seconds so far and resident memory."""

    role: str
    pids: tuple[int, ...]
    cpu_s: float
    rss_bytes: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "pids": list(self.pids),
            "cpu_s": round(self.cpu_s, 4),
            "rss_mb": round(self.rss_bytes / 2**20, 2),
        }


def _tree(pid: int) -> list[int]:
    """`pid` and its descendants."""
    if psutil is not None:
        try:
            proc = psutil.Process(pid)
            return [pid, *(child.pid for child in proc.children(recursive=True))]
        except psutil.Error:
            return []
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            stat = _proc_stat(int(entry))
            if stat is not None:
                children.setdefault(int(stat[1]), []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo.extend(children.get(current, []))
    return found


def _proc_stat(pid: int) -> list[str] | None:
    """Fields of /proc/PID/stat after the command name (state is [0], ppid [1])."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            text = handle.read()
    except OSError:
        return None
    return text[text.rfind(")") + 2 :].split()


def _cpu_rss(pid: int) -> tuple[float, int] | None:
    """CPU seconds (own and reaped children's) and RSS bytes of one process."""
    if psutil is not None:
        try:
            proc = psutil.Process(pid)
            times = proc.cpu_times()
            rss = proc.memory_info().rss
        except psutil.Error:
            return None
        return times.user + times.system + times.children_user + times.children_system, rss
    stat = _proc_stat(pid)
    if stat is None:
        return None
    # utime, stime, cutime, cstime are fields 14-17 of stat (11-14 after the name)
    ticks = sum(int(stat[i]) for i in (11, 12, 13, 14))
    return ticks / _TICKS, int(stat[21]) * _PAGE


def sample_processes(roles: Mapping[str, int]) -> dict[str, ProcessSample]:
    """Each role's process tree (root pid) now: summed CPU seconds and RSS."""
    samples = {}
    for role, root in roles.items():
        pids, cpu, rss = [], 0.0, 0
        for pid in _tree(root):
            figures = _cpu_rss(pid)
            if figures is not None:
                pids.append(pid)
                cpu += figures[0]
                rss += figures[1]
        samples[role] = ProcessSample(role, tuple(pids), cpu, rss)
    return samples


def _local(pid: int | None) -> int | None:
    return pid if pid and os.path.exists(f"/proc/{pid}") else None


def _redis_pid(url: str) -> int | None:
    import redis

    client = redis.Redis.from_url(url, socket_timeout=2)
    try:
        return _local(int(client.info("server")["process_id"]))
    finally:
        client.close()


def _postgres_pid(url: str) -> int | None:
    import psycopg

    with psycopg.connect(url, connect_timeout=3, autocommit=True) as conn:
        row = conn.execute("SELECT pg_backend_pid()").fetchone()
        # Read while the connection is open: its backend process exits when it closes.
        backend = _local(int(row[0])) if row else None
        stat = _proc_stat(backend) if backend is not None else None
    return _local(int(stat[1])) if stat else None  # the postmaster: the backend's parent


def _listening_pid(url: str) -> int | None:
    parsed = urlparse(url)
    if psutil is None or parsed.hostname not in ("127.0.0.1", "localhost", "::1"):
        return None
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    try:
        for conn in psutil.net_connections(kind="tcp"):
            if conn.status == "LISTEN" and conn.laddr and conn.laddr.port == port:
                return _local(conn.pid)
    except psutil.Error:
        return None
    return None


def discover_processes(settings: Any) -> tuple[dict[str, int], dict[str, str]]:
    """The root pid of each role this run's memory runs in, and notes on the others.

    `settings` is a `reference.settings.Settings`. Embedded servers are looked up through
    the handles this process already holds (started by the memory system), so nothing new
    starts here. A role whose server is remote or cannot be asked gets a note instead.
    """
    roles = {"load": os.getpid()}
    maintenance = os.environ.get(MAINTENANCE_PID_ENV, "")
    if maintenance.isdigit():  # `memharness load --strategy` started it beside this process
        roles["maintenance"] = int(maintenance)
    notes: dict[str, str] = {
        "embedder": "in the load process (its CPU is part of 'load'; the turn's 'embed' "
        "timing splits it out)"
    }
    if settings.backend == "memory":
        notes.update({layer: "in-memory, in the load process" for layer in ("redis", "postgres")})
        return roles, notes
    finders: Iterable[tuple[str, Any]] = (
        ("redis", lambda: _redis_pid(_redis_url(settings))),
        ("postgres", lambda: _postgres_pid(pg_url(settings))),
    )
    for role, find in finders:
        try:
            pid = find()
        except Exception as exc:  # a server we cannot ask is a note, not a failed run
            notes[role] = f"not measured: {type(exc).__name__}: {exc}"
            continue
        if pid is None:
            notes[role] = "not measured: the server is not on this machine"
        else:
            roles[role] = pid
    if settings.chroma_url:
        pid = _listening_pid(settings.chroma_url)
        if pid is None:
            notes["chroma"] = "not measured: the server is not on this machine"
        else:
            roles["chroma"] = pid
    else:
        notes["chroma"] = "embedded client, in the load process"
    return roles, notes


def generator_apart_roles() -> tuple[dict[str, int], dict[str, str]]:
    """A `--target` run's roles: this process is the load generator only (`generator`,
    never part of the system under test); with `SERVICE_PID_ENV` (`memharness load
    --apart`), the service's process tree (`service`: `memharness serve` and its
    maintenance child) and the servers it shares, found through the URLs in the
    environment (MEMH_REDIS_URL, MEMH_PG_URL, MEMH_CHROMA_URL)."""
    roles = {"generator": os.getpid()}
    service = _local(int(os.environ.get(SERVICE_PID_ENV) or 0) or None)
    if service is None:
        return roles, {"service": "not measured: not started by `memharness load --apart`"}
    roles["service"] = service
    notes: dict[str, str] = {"generator": "its own process, not counted in D"}
    finders = (
        ("redis", "MEMH_REDIS_URL", _redis_pid),
        ("postgres", "MEMH_PG_URL", _postgres_pid),
        ("chroma", "MEMH_CHROMA_URL", _listening_pid),
    )
    for role, variable, find in finders:
        url = os.environ.get(variable, "").strip()
        if not url:
            continue
        try:
            pid = find(url)
        except Exception as exc:  # a server we cannot ask is a note, not a failed run
            notes[role] = f"not measured: {type(exc).__name__}: {exc}"
            continue
        if pid is None or pid in _tree(service):
            notes[role] = "not measured apart (remote, or inside the service's tree)"
        else:
            roles[role] = pid
    return roles, notes


def _redis_url(settings: Any) -> str:
    if settings.redis_url:
        return str(settings.redis_url)
    from reference.session.embedded_redis import start_embedded_redis

    return start_embedded_redis(settings.data_dir / "redis").url


def pg_url(settings: Any) -> str:
    """The PostgreSQL URL of `settings`: MEMH_PG_URL, else the embedded server's."""
    if settings.pg_url:
        return str(
            settings.pg_url.get_secret_value()
            if hasattr(settings.pg_url, "get_secret_value")
            else settings.pg_url
        )
    from reference.ltm.embedded_pg import start_embedded_postgres

    return str(start_embedded_postgres(settings.data_dir / "pg").url)


def summarize_series(
    series: Sequence[tuple[float, Mapping[str, ProcessSample]]],
) -> dict[str, dict[str, Any]]:
    """Per role, over samples taken through a run: RSS first, peak, last and at each
    sample (seconds since the start, MB), and the CPU seconds between first and last.

    Memory is *bounded* when the peak of the run's second half is not far over the peak
    of its first half; `rss_growth_second_half` is that ratio (1.0: no growth).
    """
    out: dict[str, dict[str, Any]] = {}
    roles = {role for _, samples in series for role in samples}
    for role in sorted(roles):
        points = [(at, s[role]) for at, s in series if role in s and s[role].pids]
        if not points:
            continue
        mb = [p.rss_bytes / 2**20 for _, p in points]
        half = len(points) // 2
        first_half, second_half = mb[: max(half, 1)], mb[max(half, 1) :] or mb[-1:]
        out[role] = {
            "samples": len(points),
            "rss_mb_first": round(mb[0], 2),
            "rss_mb_peak": round(max(mb), 2),
            "rss_mb_last": round(mb[-1], 2),
            "rss_growth_second_half": round(max(second_half) / max(first_half), 4),
            "cpu_s": round(points[-1][1].cpu_s - points[0][1].cpu_s, 3),
            "rss_mb_series": [
                [round(at, 1), round(v, 1)] for (at, _), v in zip(points, mb, strict=True)
            ],
        }
    return out

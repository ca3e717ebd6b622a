"""The maintenance process's own figures: JSON for reports, Prometheus text for scrapers.

`MaintenanceFigures` is updated by the process's threads (thread-safe) and read as
`to_json()` (the keys load runs and capacity plans read), `to_prometheus()` (the text
exposition format, version 0.0.4) or written atomically to a file (`write`). Timings
keep every sample of the run (a sweep cycle or an event is one float; a run of hours
holds a few MB at most) so percentiles are exact, not bucketed.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np

#: How many recent samples are kept per timing series (older ones are dropped).
MAX_SAMPLES = 1_000_000


def _quantiles(samples: Sequence[float], names: Sequence[str], qs: Sequence[float]) -> dict:
    if not samples:
        return {name: 0.0 for name in (*names, "max")}
    arr = np.asarray(samples, dtype=float)
    out = {name: float(np.percentile(arr, q)) for name, q in zip(names, qs, strict=True)}
    out["max"] = float(arr.max())
    return out


class MaintenanceFigures:
    """Counters and timings of one maintenance process (see the module docstring)."""

    def __init__(self, *, strategy: str, fingerprint: str, replica: str, time_scale: float) -> None:
        self.strategy = strategy
        self.fingerprint = fingerprint
        self.replica = replica
        self.time_scale = float(time_scale)
        self._lock = threading.Lock()
        self._wall0 = time.monotonic()
        self._cpu0 = time.process_time()
        self.cycles = 0
        self.examined = 0
        self.changed = 0
        self.sessions_consolidated = 0
        self.episodes = 0
        self.events_applied = 0
        self.errors = 0
        self.lease_acquired = 0
        self.lease_lost = 0
        self._held_since: float | None = None
        self._held_s = 0.0
        self._cycle_ms: list[float] = []
        self._lag_ms: list[float] = []

    # ------------------------------------------------------------------ updates
    def sweep_cycle(
        self, *, ms: float, examined: int, changed: int, sessions: int, episodes: int
    ) -> None:
        with self._lock:
            self.cycles += 1
            self.examined += examined
            self.changed += changed
            self.sessions_consolidated += sessions
            self.episodes += episodes
            _append(self._cycle_ms, ms)

    def event_applied(self, lag_ms: float) -> None:
        with self._lock:
            self.events_applied += 1
            _append(self._lag_ms, max(0.0, lag_ms))

    def error(self) -> None:
        with self._lock:
            self.errors += 1

    def lease_taken(self) -> None:
        with self._lock:
            self.lease_acquired += 1
            self._held_since = time.monotonic()

    def lease_ended(self, *, lost: bool) -> None:
        with self._lock:
            if self._held_since is not None:
                self._held_s += time.monotonic() - self._held_since
                self._held_since = None
            if lost:
                self.lease_lost += 1

    # ------------------------------------------------------------------ reads
    def to_json(self) -> dict[str, Any]:
        """The figures as the JSON others read (keys documented in docs/resilience.md)."""
        with self._lock:
            held = self._held_s
            if self._held_since is not None:
                held += time.monotonic() - self._held_since
            return {
                "kind": "maintenance",
                "strategy": self.strategy,
                "fingerprint": self.fingerprint,
                "replica": self.replica,
                "wall_s": time.monotonic() - self._wall0,
                "cpu_s": time.process_time() - self._cpu0,
                "cycles": self.cycles,
                "cycle_ms": _quantiles(self._cycle_ms, ("p50", "p95"), (50, 95)),
                "examined": self.examined,
                "changed": self.changed,
                "sessions_consolidated": self.sessions_consolidated,
                "episodes": self.episodes,
                "events_applied": self.events_applied,
                "event_lag_ms": _quantiles(self._lag_ms, ("p50", "p95", "p99"), (50, 95, 99)),
                "errors": self.errors,
                "lease": {
                    "held_s": held,
                    "acquired": self.lease_acquired,
                    "lost": self.lease_lost,
                },
                "time_scale": self.time_scale,
            }

    def to_prometheus(self) -> str:
        """The figures in Prometheus' text exposition format (metric `memh_maintenance_*`,
        labels `strategy` and `replica`)."""
        fig = self.to_json()
        labels = f'strategy="{_esc(fig["strategy"])}",replica="{_esc(fig["replica"])}"'
        lines: list[str] = []

        def metric(name: str, kind: str, help_: str, value: float, extra: str = "") -> None:
            full = f"memh_maintenance_{name}"
            if not any(line.startswith(f"# TYPE {full} ") for line in lines):
                lines.append(f"# HELP {full} {help_}")
                lines.append(f"# TYPE {full} {kind}")
            lines.append(f"{full}{{{labels}{extra}}} {float(value)!r}")

        metric("cpu_seconds_total", "counter", "CPU seconds used", fig["cpu_s"])
        metric("wall_seconds", "gauge", "seconds since start", fig["wall_s"])
        metric("cycles_total", "counter", "sweep cycles run", fig["cycles"])
        metric("examined_total", "counter", "records examined by sweeps", fig["examined"])
        metric("changed_total", "counter", "records changed by sweeps", fig["changed"])
        metric(
            "sessions_consolidated_total",
            "counter",
            "ended sessions consolidated",
            fig["sessions_consolidated"],
        )
        metric("episodes_total", "counter", "LTM episodes written", fig["episodes"])
        metric("events_applied_total", "counter", "events applied", fig["events_applied"])
        metric("errors_total", "counter", "errors (cycles or events that failed)", fig["errors"])
        metric("lease_held_seconds", "gauge", "seconds the lease was held", fig["lease"]["held_s"])
        metric("lease_acquired_total", "counter", "lease acquisitions", fig["lease"]["acquired"])
        metric("lease_lost_total", "counter", "leases lost while held", fig["lease"]["lost"])
        metric("time_scale", "gauge", "clock seconds per wall second", fig["time_scale"])
        for q in ("p50", "p95", "max"):
            metric(
                "cycle_ms",
                "gauge",
                "sweep cycle duration (ms) by quantile",
                fig["cycle_ms"][q],
                f',quantile="{q}"',
            )
        for q in ("p50", "p95", "p99", "max"):
            metric(
                "event_lag_ms",
                "gauge",
                "published-to-applied event lag (ms) by quantile",
                fig["event_lag_ms"][q],
                f',quantile="{q}"',
            )
        return "\n".join(lines) + "\n"

    def write(self, path: Path) -> None:
        """Write `to_json()` to `path` atomically (a temporary file renamed over it)."""
        write_json_atomic(path, self.to_json())


def write_json_atomic(path: Path, data: Any) -> None:
    """Write JSON to `path` so a reader sees the old file or the new one, never half."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(data, out, indent=2, sort_keys=True)
            out.write("\n")
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class MetricsServer:
    """`GET /metrics` on 127.0.0.1:`port` (0: a free port, see `.port`), served from a
    daemon thread with the figures' Prometheus text, then `more()`'s (the engine's
    monitoring counters, `reference.monitoring`)."""

    def __init__(
        self, figures: MaintenanceFigures, port: int = 0, more: Callable[[], str] | None = None
    ) -> None:
        owner = figures

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path.split("?")[0] not in ("/metrics", "/"):
                    self.send_error(404)
                    return
                body = (owner.to_prometheus() + (more() if more else "")).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                return  # scrapes are not worth a log line

        self._server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.port = int(self._server.server_address[1])
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="metrics", daemon=True
        )
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def _append(samples: list[float], value: float) -> None:
    if len(samples) >= MAX_SAMPLES:
        del samples[: MAX_SAMPLES // 10]
    samples.append(float(value))


def _esc(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")

"""The measured runs a plan reads, as pandas tables: step-load, bench and simulator runs.

Reports read result files only (STYLE.md): `steps.json` of `memharness load --rates`,
`bench.json` of `memharness bench`, `results.json` of `memharness run`. With no run named,
the newest of each kind under `reports/` is used (by the file's modification time).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

__all__ = [
    "KINDS",
    "BenchRun",
    "LoadRun",
    "RunError",
    "SimRun",
    "find_runs",
    "read_bench",
    "read_load",
    "read_sim",
    "resolve_run",
    "service_samples",
]

#: Kind of run -> the file that marks it.
KINDS = {"load": "steps.json", "bench": "bench.json", "sim": "results.json"}
_LAYERS = ("session", "stm", "ltm")


class RunError(ValueError):
    """A run that cannot be found or read."""


def find_runs(reports: Path, kind: str) -> list[Path]:
    """Run directories of `kind` under `reports`, newest first."""
    marker = KINDS[kind]
    found = [p.parent for p in reports.glob(f"*/{marker}")]
    if kind == "sim":
        found = [p for p in found if _is_sim(p / marker)]
    if kind == "bench":  # a run slowed on purpose (`--bench-slow`) describes no system
        found = [p for p in found if not _is_slowed(p / marker)]
    return sorted(found, key=lambda p: (p / marker).stat().st_mtime, reverse=True)


def _is_slowed(path: Path) -> bool:
    try:
        ops = json.loads(path.read_text(encoding="utf-8")).get("ops") or []
    except (OSError, ValueError):
        return False
    return any("injected_delay_ms" in (op.get("params") or {}) for op in ops)


def _is_sim(path: Path) -> bool:
    try:
        return "scenarios" in json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False


def resolve_run(given: Path | None, reports: Path, kind: str) -> Path | None:
    """`given` (a run directory or its marker file), else the newest run of `kind`."""
    if given is None:
        runs = find_runs(reports, kind)
        return runs[0] if runs else None
    directory = given.parent if given.is_file() else given
    if not (directory / KINDS[kind]).is_file():
        raise RunError(f"{given}: no {KINDS[kind]} there (not a {kind} run)")
    return directory


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise RunError(f"{path}: cannot be read: {exc}") from None
    if not isinstance(data, dict):
        raise RunError(f"{path}: not a JSON object")
    return data


@dataclass
class LoadRun:
    """A step-load run: meta, one row per step, and the raw step entries (histograms)."""

    path: Path
    meta: dict[str, Any]
    steps: pd.DataFrame
    raw: list[dict[str, Any]] = field(default_factory=list)
    #: Latency samples per (op, step), decoded from the histograms once.
    decoded: dict[tuple[str, int], np.ndarray] = field(default_factory=dict, repr=False)

    @property
    def run_id(self) -> str:
        return str(self.meta.get("run_id") or self.path.name)

    @property
    def cores(self) -> float | None:
        """The cores the run's system shared (steps.json: cores), None if not recorded."""
        cores = self.meta.get("cores")
        return float(cores) if isinstance(cores, int | float) and cores > 0 else None


def read_load(directory: Path) -> LoadRun:
    """`steps.json` as a table: offered, achieved, concurrency, per-op percentiles, and
    CPU seconds and RSS per process role."""
    data = _read(directory / "steps.json")
    entries = data.get("steps")
    if not isinstance(entries, list) or not entries:
        raise RunError(f"{directory / 'steps.json'}: no steps")
    rows = []
    for entry in entries:
        generator = entry.get("generator") or {}
        row: dict[str, Any] = {
            "step": entry["step"],
            "offered": entry["offered_rate"],
            "achieved": entry["achieved_rate"],
            "duration_s": entry["duration_s"],
            "completed": entry["completed_in_window"],
            "concurrency": entry.get("concurrency", np.nan),
            "dropped_share": entry.get("dropped_share"),
            "generator_late_share": generator.get("late_share"),
            "generator_lag_p99_ms": (generator.get("own_lag_ms") or {}).get("p99"),
            "generator_lag_max_ms": (generator.get("own_lag_ms") or {}).get("max"),
            "drift_ratio": (entry.get("drift") or {}).get("ratio"),
            "drifts": bool((entry.get("drift") or {}).get("drifts")),
        }
        for op, figures in (entry.get("ops") or {}).items():
            for stat in ("count", "mean_ms", "p50_ms", "p95_ms", "p99_ms"):
                row[f"{op}.{stat}"] = figures.get(stat)
        for role, figures in (entry.get("processes") or {}).items():
            row[f"cpu.{role}"] = figures.get("cpu_s")
            row[f"rss.{role}"] = figures.get("rss_mb")
        cache = entry.get("embedding_cache") or {}
        row["cache_hits"], row["cache_misses"] = cache.get("hits"), cache.get("misses")
        rows.append(row)
    meta = {k: v for k, v in data.items() if k != "steps"}
    return LoadRun(directory, meta, pd.DataFrame(rows).sort_values("offered"), entries)


def service_samples(run: LoadRun, op: str, steps: list[int]) -> np.ndarray:
    """Latency samples (seconds) of `op` in `steps`, expanded from their HDR histograms
    (each recorded value repeated by its count; the value is exact to 0.1 %)."""
    values = [_step_samples(run, op, entry) for entry in run.raw if entry["step"] in steps]
    values = [v for v in values if len(v)]
    return np.concatenate(values) if values else np.zeros(0)


def _step_samples(run: LoadRun, op: str, entry: dict[str, Any]) -> np.ndarray:
    """One step's samples of `op`, decoded once per run: the recorded values are read off
    the histogram's non-zero counts (as its recorded-values iterator reports them: each
    bucket's highest equivalent value)."""
    key = (op, int(entry["step"]))
    if key not in run.decoded:
        from hdrh.histogram import HdrHistogram

        encoded = (entry.get("histograms") or {}).get(op)
        if encoded is None:
            run.decoded[key] = np.zeros(0)
        else:
            hist = HdrHistogram.decode(encoded)
            counts = np.ctypeslib.as_array(hist.counts)[: hist.counts_len]
            index = np.flatnonzero(counts)
            micros = [
                hist.get_highest_equivalent_value(hist.get_value_from_index(int(i))) for i in index
            ]
            repeats = counts[index].astype(np.int64)
            run.decoded[key] = np.repeat(np.asarray(micros, dtype=float) / 1e6, repeats)
    return run.decoded[key]


@dataclass
class BenchRun:
    """A bench run: one row per operation of the real backend (service times at
    concurrency 1)."""

    path: Path
    meta: dict[str, Any]
    ops: pd.DataFrame

    @property
    def run_id(self) -> str:
        return str(self.meta.get("run_id") or self.path.name)

    @property
    def cores(self) -> float | None:
        """The cores the run's system shared (steps.json: cores), None if not recorded."""
        cores = self.meta.get("cores")
        return float(cores) if isinstance(cores, int | float) and cores > 0 else None


def read_bench(directory: Path) -> BenchRun:
    data = _read(directory / "bench.json")
    rows = [
        {
            "op": op.get("name") or op.get("op"),
            "layer": op.get("layer"),
            "n": op.get("n"),
            "p50_ms": op.get("p50_ms"),
            "p95_ms": op.get("p95_ms"),
            "p99_ms": op.get("p99_ms"),
            "mean_ms": float(np.mean(op["samples_ms"])) if op.get("samples_ms") else None,
        }
        for op in data.get("ops") or []
        if op.get("backend", "real") == "real"
    ]
    meta = {k: v for k, v in data.items() if k != "ops"}
    return BenchRun(directory, meta, pd.DataFrame(rows))


@dataclass
class SimRun:
    """A simulator run: per strategy and layer, the footprint's summary (`layers`) and its
    series over virtual time (`series`)."""

    path: Path
    meta: dict[str, Any]
    layers: pd.DataFrame
    series: pd.DataFrame

    @property
    def run_id(self) -> str:
        return str(self.meta.get("run_id") or self.path.name)

    @property
    def cores(self) -> float | None:
        """The cores the run's system shared (steps.json: cores), None if not recorded."""
        cores = self.meta.get("cores")
        return float(cores) if isinstance(cores, int | float) and cores > 0 else None

    @property
    def users(self) -> int:
        return int(self.layers["users"].max()) if len(self.layers) else 0


def read_sim(directory: Path) -> SimRun:
    """Footprint per strategy and layer over all scenarios of the run, with the turns and
    the virtual span: the inputs of Little's law (items = write rate × lifetime)."""
    data = _read(directory / "results.json")
    layer_rows: list[dict[str, Any]] = []
    series_rows: list[dict[str, Any]] = []
    for scenario in data.get("scenarios") or []:
        for strategy in scenario.get("strategies") or []:
            footprint = strategy.get("footprint")
            if strategy.get("status") != "ok" or not footprint or not footprint.get("series"):
                continue
            series = footprint["series"]
            times = np.array([p["at"] for p in series], dtype=float)
            span = float(times[-1] - times[0]) if len(times) > 1 else 0.0
            for layer in _LAYERS:
                records = np.array([p[layer][0] for p in series], dtype=float)
                size = np.array([p[layer][1] for p in series], dtype=float)
                # ∫ f dt over the samples (trapezoids); the mean over the span.
                byte_s = float(np.trapezoid(size, times)) if span else 0.0
                record_s = float(np.trapezoid(records, times)) if span else 0.0
                turns = max(int(scenario.get("turns") or 0), 1)
                layer_rows.append(
                    {
                        "scenario": scenario.get("name"),
                        "strategy": strategy.get("label"),
                        "layer": layer,
                        "users": scenario.get("users"),
                        "turns": turns,
                        "span_s": span,
                        "peak_bytes": float(size.max()),
                        "peak_records": float(records.max()),
                        "mean_bytes": byte_s / span if span else float(size.mean()),
                        "mean_records": record_s / span if span else float(records.mean()),
                        # Little's law: mean items = rate × time each stays, so the
                        # byte-seconds each turn leaves behind size a store at any rate.
                        "byte_s_per_turn": byte_s / turns,
                        "record_s_per_turn": record_s / turns,
                    }
                )
                series_rows.extend(
                    {
                        "strategy": strategy.get("label"),
                        "layer": layer,
                        "day": (t - times[0]) / 86_400.0,
                        "bytes": b,
                        "records": r,
                    }
                    for t, b, r in zip(times, size, records, strict=True)
                )
    layers = pd.DataFrame(layer_rows)
    if layers.empty:
        raise RunError(f"{directory / 'results.json'}: no strategy with a footprint series")
    meta = {k: v for k, v in data.items() if k != "scenarios"}
    return SimRun(directory, meta, layers, pd.DataFrame(series_rows))

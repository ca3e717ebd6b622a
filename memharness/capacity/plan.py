"""From measured runs and a target to a plan: per layer, how many of what, and why.

Per layer (session, STM, LTM, embedder, the turn's app tier):
- offered load λ_k = users × turns/day × peak / 86,400 × calls per turn (CAPACITY.md);
- service demand D_k (core-seconds per turn) from the step-load run's per-process CPU;
  U_k = X·D_k, and the bottleneck is the layer with the largest D (Menascé's operational
  laws: X ≤ 1/D_max);
- cores: enough to keep U under the ceiling, and enough for the SLO at the planned
  utilisation (Erlang C / Allen–Cunneen, `queueing.response_quantile`); the embedder by
  square-root staffing; the app tier in processes from the USL fit's peak throughput;
- memory and disk from the simulator's byte-seconds per turn (Little: items = rate ×
  lifetime; Netflix's `items = write_rps × TTL`), beside the engine formulas
  (`formulas.py`);
- instances = max(by CPU, by memory, by disk), the winning term named (Pelikan's
  calculator), and with a price, the monthly cost.

The maintenance process (sweeps, consolidation, business events) is a component of its
own, sized when the load run measured it: cores = CPU seconds per turn × turns/s at peak
÷ the utilisation ceiling; memory its measured RSS, else `MAINTENANCE_RSS_MB`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from memharness.capacity import formulas
from memharness.capacity.demand import (
    KEPT_UP,
    LATENCY_UTILISATION,
    Demand,
    service_demand,
    valid_steps,
)
from memharness.capacity.inputs import BenchRun, LoadRun, SimRun, service_samples
from memharness.capacity.queueing import (
    UslFit,
    fit_usl,
    response_quantile,
    sqrt_staffing,
    usl_rejections,
)
from memharness.capacity.target import LAYERS, Target

__all__ = ["HOURS_PER_MONTH", "MAINTENANCE_RSS_MB", "Measured", "measure", "size_layers"]

HOURS_PER_MONTH = 730.0
#: Peak RSS of a Python process holding the reference built under hybrid with the
#: Redis, PostgreSQL and Chroma clients imported (measured: 104 MB, ru_maxrss), the
#: maintenance process's memory when its run reported none.
MAINTENANCE_RSS_MB = 104.0
#: Load-step op whose latency samples describe each layer's calls.
LAYER_OP = {"session": "session", "stm": "stm", "ltm": "ltm", "embedder": "embed", "turn": "turn"}
#: Bench op (concurrency 1, inside a real turn) shown beside each layer's service time.
BENCH_OP = {
    "session": "turn[uncached].session",
    "stm": "turn[uncached].stm",
    "ltm": "turn[uncached].ltm",
    "embedder": "turn[uncached].embed",
    "turn": "turn[uncached]",
}
#: Server process whose CPU is each layer's demand, when the run measured it.
LAYER_ROLE = {"session": "redis", "ltm": "postgres", "stm": "chroma"}


@dataclass
class Measured:
    """What the runs say, independent of the target: the system's service demand and
    X_max, demands per layer, samples, the USL fit (a cross-check: None or rejected)."""

    demand: Demand
    demand_s: dict[str, float]
    demand_source: dict[str, str]
    samples: dict[str, np.ndarray]
    light_steps: list[int]
    unsaturated: list[int]
    usl: UslFit | None
    #: Why the USL is no model of this run (empty: accepted as a cross-check).
    usl_rejected: list[str]
    rss_mb: dict[str, float]
    cache_hit_ratio: float | None
    bench_ms: dict[str, dict[str, float]] = field(default_factory=dict)
    #: The maintenance process: cpu_s_per_turn, rss_mb and where each came from, and its
    #: event lag; None when the load run did not measure it.
    maintenance: dict[str, Any] | None = None


def _maintenance(load: LoadRun, unsat: pd.DataFrame) -> dict[str, Any] | None:
    """The maintenance process's figures: CPU per turn over the unsaturated steps when
    the steps sampled it, else the run's `cpu_s_per_turn.maintenance`."""
    cpu = _ratio(unsat, "cpu.maintenance")
    cpu_source = "measured: maintenance process CPU s / turn, unsaturated steps (load run)"
    if cpu is None:
        figure = (load.meta.get("cpu_s_per_turn") or {}).get("maintenance")
        if not isinstance(figure, int | float):
            return None
        cpu, cpu_source = float(figure), "measured: cpu_s_per_turn.maintenance (load run)"
    figures = load.meta.get("maintenance") or {}
    rss = float(unsat["rss.maintenance"].max()) if "rss.maintenance" in unsat else math.nan
    rss_source = "measured: the maintenance process's peak RSS (load run)"
    if not math.isfinite(rss) and isinstance(figures.get("rss_mb"), int | float):
        rss = float(figures["rss_mb"])
    if not math.isfinite(rss):
        rss, rss_source = MAINTENANCE_RSS_MB, f"measured constant: {MAINTENANCE_RSS_MB:g} MB RSS"
    lag = (figures.get("event_lag_ms") or {}).get("p95")
    return {
        "cpu_s_per_turn": cpu,
        "cpu_source": cpu_source,
        "rss_mb": rss,
        "rss_source": rss_source,
        "event_lag_p95_ms": lag,
    }


def _ratio(df: pd.DataFrame, column: str) -> float | None:
    if column not in df or df[column].isna().all():
        return None
    done = float(df["completed"].sum())
    return float(df[column].sum()) / done if done else None


def measure(load: LoadRun, bench: BenchRun | None, *, steps: list[int] | None = None) -> Measured:
    """Demands, latency samples and the USL fit from `load` (only `steps` when given).

    Raises ValueError, saying what to run, when the steps cannot give a plan."""
    df = load.steps if steps is None else load.steps[load.steps["step"].isin(steps)]
    system = service_demand(df, load.cores)
    df, _ = valid_steps(df)
    unsat = df[df["achieved"] >= KEPT_UP * df["offered"]]
    if len(unsat) < 2:
        unsat = df
    # The app process: the load process in-process; with `memharness load --apart` the
    # service's process tree (`memharness serve` and its maintenance child).
    app = "load" if _ratio(unsat, "cpu.load") is not None else "service"
    load_cpu = _ratio(unsat, f"cpu.{app}") or 0.0
    # Service-time samples at light load, the quietest of the steps the demand was read
    # on (CAPACITY.md: never read service time from a loaded run).
    achieved = df.set_index("step")["achieved"]
    light_steps = [
        s for s in system.steps if achieved[s] <= LATENCY_UTILISATION * system.x_max
    ] or [min(system.steps, key=lambda s: float(achieved[s]))]
    samples = {layer: service_samples(load, op, light_steps) for layer, op in LAYER_OP.items()}
    for layer, values in samples.items():
        if len(values) == 0:
            raise ValueError(f"{load.path}: no '{LAYER_OP[layer]}' samples in steps {light_steps}")
    demand: dict[str, float] = {}
    source: dict[str, str] = {}
    for layer in ("session", "stm", "ltm"):
        cpu = _ratio(unsat, f"cpu.{LAYER_ROLE[layer]}")
        if cpu is not None:
            demand[layer] = cpu
            source[layer] = f"measured: {LAYER_ROLE[layer]} CPU s / turn (load run)"
        else:
            demand[layer] = float(samples[layer].mean())
            source[layer] = "measured latency at light load, assumed all on-CPU (in-process)"
    demand["embedder"] = float(samples["embedder"].mean())
    source["embedder"] = "measured embed latency at light load (1 torch thread: on-CPU)"
    in_process = demand["embedder"] + (0.0 if "cpu.chroma" in df else demand["stm"])
    demand["turn"] = max(load_cpu - in_process, 0.1 * load_cpu)
    source["turn"] = f"measured: {app}-process CPU s / turn, less the embedder" + (
        "" if "cpu.chroma" in df else " and the in-process Chroma client"
    )
    if app == "service":
        source["turn"] += " (the service's maintenance child included)"
    usl, usl_rejected = _usl(df)
    rss = {
        col.removeprefix("rss."): float(df[col].max())
        for col in df.columns
        if col.startswith("rss.")
    }
    hits, misses = df["cache_hits"].sum(), df["cache_misses"].sum()
    bench_ms: dict[str, dict[str, float]] = {}
    if bench is not None and not bench.ops.empty:
        for layer, op in BENCH_OP.items():
            row = bench.ops[bench.ops["op"] == op]
            if len(row):
                bench_ms[layer] = {
                    k: float(row.iloc[0][k]) for k in ("mean_ms", "p50_ms", "p95_ms")
                }
    maintenance = _maintenance(load, unsat)
    if maintenance is not None:
        demand["maintenance"] = maintenance["cpu_s_per_turn"]
        source["maintenance"] = maintenance["cpu_source"]
    return Measured(
        demand=system,
        demand_s=demand,
        demand_source=source,
        samples=samples,
        light_steps=light_steps,
        unsaturated=[int(s) for s in unsat["step"]],
        usl=usl,
        usl_rejected=usl_rejected,
        rss_mb=rss,
        cache_hit_ratio=float(hits / (hits + misses)) if hits + misses else None,
        bench_ms=bench_ms,
        maintenance=maintenance,
    )


def _usl(steps: pd.DataFrame) -> tuple[UslFit | None, list[str]]:
    """The USL over the valid steps, and why it is rejected (a cross-check only)."""
    points = steps[(steps["concurrency"] > 0) & (steps["achieved"] > 0)]
    levels = int(points["offered"].nunique())
    if len(points) < 3:
        return None, [f"{levels} load levels; the USL needs at least 6 (not fitted)"]
    fit = fit_usl(points["concurrency"].to_numpy(), points["achieved"].to_numpy())
    return fit, usl_rejections(fit, levels)


def _min_servers(
    start: int,
    slo_s: float,
    q: float,
    *,
    lam: float,
    occupancy: float,
    latency: np.ndarray,
    pooled: bool,
) -> tuple[int | None, float]:
    """The fewest servers (≥ start) whose predicted q-quantile meets `slo_s`; None if the
    latency alone is over it (no number of servers helps)."""
    floor = float(np.quantile(latency, q))
    c = max(start, 1)
    for _ in range(200):
        p = response_quantile(
            q, c=c, lam=lam, occupancy_s=occupancy, latency_s=latency, pooled=pooled
        )
        if p <= slo_s:
            return c, p
        if floor > slo_s:
            return None, p
        c = c + 1 if c < 64 else math.ceil(c * 1.1)
    return None, math.inf


def size_layers(target: Target, measured: Measured, sim: SimRun | None) -> pd.DataFrame:
    """One row per layer: load, demand, cores (CPU and SLO), memory, disk, instances."""
    lam_peak, lam_mean = target.peak_turns_per_s, target.mean_turns_per_s
    q = target.slo_ms.percentile / 100.0
    ceiling = target.utilisation_ceiling
    footprint = formulas.footprint(target, sim, lam_peak=lam_peak, lam_mean=lam_mean)
    rows = []
    for layer in LAYERS:
        d = measured.demand_s[layer]
        latency = measured.samples[layer]
        a = lam_peak * d  # offered work in cores (Erlangs): U = X·D
        slo_ms = getattr(target.slo_ms, layer, None)
        row: dict[str, Any] = {
            "layer": layer,
            "calls_per_turn": 1.0,
            "lambda_peak_per_s": lam_peak,
            "demand_ms": d * 1000.0,
            "demand_source": measured.demand_source[layer],
            "offered_cores": a,
            "latency_mean_ms": float(latency.mean()) * 1000.0,
            "slo_ms": slo_ms,
        }
        pooled, unit = layer != "session", "cores"
        cores_cpu = a / ceiling
        occupancy = d
        if layer == "turn":
            # One Python process serves one turn on the CPU at a time (the GIL): it
            # delivers at most 1 / its CPU per turn (the operational laws).
            per_role = measured.demand.per_role_s
            load_d = per_role.get("load", per_role.get("service", 0.0))
            x_max = 1.0 / load_d if load_d > 0 else 1.0 / d
            cores_cpu = max(cores_cpu, lam_peak / (x_max * ceiling))
            occupancy, unit = 1.0 / x_max, "processes"
        elif layer == "session":
            unit = "shards (1 core each)"  # Redis runs commands on one thread
        cores_by = f"U <= {ceiling:g}"
        cores = max(1, math.ceil(cores_cpu - 1e-9))
        if layer == "embedder":
            staffed = math.ceil(sqrt_staffing(a) - 1e-9)
            row["sqrt_staffing_cores"] = sqrt_staffing(a)
            if staffed > cores:
                cores, cores_by = staffed, "square-root staffing (a + 1.761·√a)"
        if slo_ms is not None:
            need, p = _min_servers(
                cores,
                slo_ms / 1000.0,
                q,
                lam=lam_peak,
                occupancy=occupancy,
                latency=latency,
                pooled=pooled,
            )
            row["slo_met"] = need is not None
            if need is not None and need > cores:
                cores, cores_by = need, f"p{target.slo_ms.percentile:g} SLO"
            row["predicted_p_ms"] = p * 1000.0 if math.isfinite(p) else None
        else:
            p = response_quantile(
                q, c=cores, lam=lam_peak, occupancy_s=occupancy, latency_s=latency, pooled=pooled
            )
            row["predicted_p_ms"] = p * 1000.0 if math.isfinite(p) else None
            row["slo_met"] = None
        row.update({"cores": cores, "cores_unit": unit, "cores_by": cores_by})
        row["utilisation"] = a / cores if layer != "turn" else lam_peak * occupancy / cores
        row.update(footprint[layer])
        if layer == "turn":  # each app process holds the model, Chroma's client, the turn code
            app = "load" if "load" in measured.rss_mb else "service"
            row["ram_gb"] = cores * measured.rss_mb.get(app, 0.0) / 1024.0
            row["memory_source"] = f"measured: the {app} process's peak RSS, per process"
        elif layer == "embedder":
            row["memory_source"] = "inside the app processes' RSS (in-process model)"
        rows.append(_instances(target, row))
    if measured.maintenance is not None:
        rows.append(_instances(target, _maintenance_row(target, measured.maintenance)))
    return pd.DataFrame(rows)


def _maintenance_row(target: Target, figures: dict[str, Any]) -> dict[str, Any]:
    """The maintenance process: its cores for sweeps and events at the target's peak
    rate, one process's RSS per instance; it holds no records and serves no calls."""
    lam_peak, ceiling = target.peak_turns_per_s, target.utilisation_ceiling
    a = lam_peak * figures["cpu_s_per_turn"]
    cores = max(1, math.ceil(a / ceiling - 1e-9))
    return {
        "layer": "maintenance",
        "calls_per_turn": None,
        "lambda_peak_per_s": lam_peak,
        "demand_ms": figures["cpu_s_per_turn"] * 1000.0,
        "demand_source": figures["cpu_source"],
        "offered_cores": a,
        "latency_mean_ms": None,
        "slo_ms": None,
        "slo_met": None,
        "predicted_p_ms": None,
        "cores": cores,
        "cores_unit": "cores (one sweeper per namespace; events shared)",
        "cores_by": f"U <= {ceiling:g}",
        "utilisation": a / cores,
        "records": 0.0,
        "payload_gb": 0.0,
        "ram_gb": figures["rss_mb"] / 1024.0,
        "disk_gb": 0.0,
        "memory_source": figures["rss_source"],
        "event_lag_p95_ms": figures.get("event_lag_p95_ms"),
    }


def _instances(target: Target, row: dict[str, Any]) -> dict[str, Any]:
    """Instances = max(by CPU, by memory, by disk) on the layer's node, the winner named,
    and the monthly cost."""
    node, given = target.node(row["layer"])
    by = {
        "cpu": math.ceil(row["cores"] / node.cores - 1e-9),
        "memory": math.ceil(row["ram_gb"] / (node.ram_gb * target.memory_ceiling) - 1e-9),
        "disk": math.ceil(row["disk_gb"] / node.disk_gb - 1e-9),
    }
    winner = max(by, key=lambda k: (by[k], k == "cpu"))
    instances = max(1, by[winner])
    row.update(
        {
            "node": f"{node.cores:g} cores, {node.ram_gb:g} GB, {node.disk_gb:g} GB disk",
            "node_source": "target" if given else "assumed (default node)",
            "instances_by_cpu": by["cpu"],
            "instances_by_memory": by["memory"],
            "instances_by_disk": by["disk"],
            "instances": instances,
            "bound_by": winner,
            "monthly_cost": instances * node.price_per_hour * HOURS_PER_MONTH
            if node.price_per_hour is not None
            else None,
        }
    )
    return row

"""The figures of the strategy comparison page, read from result files only, one pandas
table per kind of run, each keyed by strategy:

- simulator runs (`results.json`): recall@k, stale@k, over-forget, leakage and bytes per
  user (the layers' peak bytes over the scenario's users), the mean over the run's
  scenarios; PII raw and sealed max (`memharness.sim.metrics`), the longest over them:
  `inf` when an item outlived the run, `-inf` (sealed) when the strategy sealed none;
- load runs (`steps.json`, `load_hdr.json`, or a multi-strategy load's
  `load_strategies.json`): p95 per layer, the highest rate whose step held every SLA,
  the maintenance process's CPU per turn and event lag p95;
- capacity runs (`capacity.json`): instances and monthly cost at the target.

A load run with no `strategy` key ran the stores' defaults (`store_defaults`); the page
says so. Figures a run does not have stay missing (NaN): the page shows "not measured".
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from memharness.capacity.runs import NO_STRATEGY
from memharness.load_results import sustainable_rate

__all__ = ["FILES", "Inputs", "PageError", "read_inputs"]

#: The files a run is recognised by, most specific first.
FILES = ("capacity.json", "load_strategies.json", "steps.json", "load_hdr.json", "results.json")
#: Load-run operation -> the layer the page names.
LAYER_OPS = {"session": "session", "stm": "stm", "ltm": "ltm", "embed": "embedder", "turn": "turn"}
QUALITY = ("recall_at_k", "stale_at_k", "over_forget_rate", "leakage")
#: PII figures: the longest over a strategy's scenarios, not the mean.
PII = ("pii_raw_max_s", "pii_sealed_max_s")
#: `pii_sealed_max_s` of a strategy that sealed none of its PII items.
NEVER_SEALED = -math.inf


class PageError(ValueError):
    """A path that is not a run the page reads, or a file that cannot be read."""


@dataclass
class Inputs:
    """The tables, and what was read (with notes about it)."""

    quality: pd.DataFrame
    load: pd.DataFrame
    capacity: pd.DataFrame
    sources: list[dict[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    currency: str | None = None
    target_users: int | None = None


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise PageError(f"{path}: cannot be read: {exc}") from None
    if not isinstance(data, dict):
        raise PageError(f"{path}: not a JSON object")
    return data


def _file(path: Path) -> Path:
    if path.is_file():
        if path.name not in FILES:
            raise PageError(f"{path}: not a result file this page reads ({', '.join(FILES)})")
        return path
    for name in FILES:
        if (path / name).is_file():
            return path / name
    raise PageError(
        f"{path}: not a run (none of {', '.join(FILES)} there); give a directory of "
        "memharness run, load or capacity"
    )


def _quality(path: Path, data: dict[str, Any]) -> list[dict[str, Any]]:
    if not isinstance(data.get("scenarios"), list):
        raise PageError(f"{path}: not a simulator results file (no 'scenarios' list)")
    rows = []
    for scenario in data["scenarios"]:
        users = scenario.get("users") or 0
        for entry in scenario.get("strategies") or []:
            if entry.get("status") != "ok":
                continue
            metrics = entry.get("metrics") or {}
            row: dict[str, Any] = {"strategy": entry.get("label"), "scenario": scenario.get("name")}
            for name in QUALITY:
                value = metrics.get(name)
                row[name] = float(value) if isinstance(value, int | float) else math.nan
            row.update(_pii(metrics))
            peak = (entry.get("footprint") or {}).get("peak") or {}
            total = sum(float((figures or {}).get("bytes") or 0) for figures in peak.values())
            row["bytes_per_user"] = total / users if peak and users else math.nan
            rows.append(row)
    return rows


def _strategy_of(data: dict[str, Any], path: Path, notes: list[str]) -> str:
    name = data.get("strategy")
    if isinstance(name, str) and name:
        return name
    notes.append(
        f"{path} records no strategy: it ran the stores' defaults ({NO_STRATEGY}), before "
        "strategies were recorded"
    )
    return NO_STRATEGY


def _background(data: dict[str, Any]) -> dict[str, float]:
    per_turn = (data.get("cpu_s_per_turn") or {}).get("maintenance")
    lag = ((data.get("maintenance") or {}).get("event_lag_ms") or {}).get("p95")
    return {
        "maintenance_cpu_ms_per_turn": float(per_turn) * 1000.0
        if isinstance(per_turn, int | float)
        else math.nan,
        "event_lag_p95_ms": float(lag) if isinstance(lag, int | float) else math.nan,
    }


def _p95(ops: dict[str, Any]) -> dict[str, float]:
    out = {}
    for op, layer in LAYER_OPS.items():
        value = (ops.get(op) or {}).get("p95_ms")
        out[f"p95_{layer}_ms"] = float(value) if isinstance(value, int | float) else math.nan
    return out


def _load_row(path: Path, data: dict[str, Any], notes: list[str]) -> dict[str, Any]:
    row: dict[str, Any] = {"strategy": _strategy_of(data, path, notes), **_background(data)}
    if path.name == "steps.json":
        steps = data.get("steps") or []
        if not steps:
            raise PageError(f"{path}: no steps")
        rate = sustainable_rate(data) if any("sla_held" in s for s in steps) else None
        at = next((s for s in steps if s["offered_rate"] == rate), None) or min(
            steps, key=lambda s: s["offered_rate"]
        )
        row.update(_p95(at.get("ops") or {}))
        row["sustainable_rate"] = rate if rate is not None else math.nan
        row["p95_at_rate"] = float(at["offered_rate"])
    else:
        row.update(_p95(data.get("ops") or {}))
        row["sustainable_rate"] = math.nan
        offered = data.get("offered_rate") or data.get("rate")
        row["p95_at_rate"] = float(offered) if isinstance(offered, int | float) else math.nan
    return row


def _listing_rows(path: Path, data: dict[str, Any], inputs: Inputs) -> list[dict[str, Any]]:
    rows = []
    for entry in data.get("runs") or []:
        name = Path(str(entry.get("dir") or ""))
        directory = next(
            (c for c in (name, path.parent.parent / name, path.parent / name) if c.is_dir()), None
        )
        found = None
        if directory is not None:
            found = next(
                (
                    directory / f
                    for f in ("steps.json", "load_hdr.json")
                    if (directory / f).is_file()
                ),
                None,
            )
        if found is not None:
            rows.append(_load_row(found, _read(found), inputs.notes))
            inputs.sources.append({"kind": "load", "path": str(found)})
            continue
        # The listing's headline figures, when the run directory is not at hand.
        p95 = entry.get("p95_ms") or {}
        row = {
            "strategy": entry.get("strategy"),
            **_p95({k: {"p95_ms": v} for k, v in p95.items()}),
        }
        rate = entry.get("sustainable_rate")
        row["sustainable_rate"] = float(rate) if isinstance(rate, int | float) else math.nan
        row.update(_background({"maintenance": entry.get("maintenance") or {}}))
        rows.append(row)
        inputs.notes.append(f"{entry.get('strategy')}: headline figures of {path} ({name} absent)")
    return rows


def _capacity_rows(path: Path, data: dict[str, Any], inputs: Inputs) -> list[dict[str, Any]]:
    target = data.get("target") or {}
    currency = data.get("currency") or target.get("currency") or "USD"
    if inputs.currency not in (None, currency):
        raise PageError(
            f"{path}: costs in {currency}, an earlier capacity run's in {inputs.currency}"
        )
    inputs.currency = currency
    users = target.get("users")
    if inputs.target_users not in (None, users):
        inputs.notes.append(f"{path}: a target of {users} users, unlike the other capacity run")
    inputs.target_users = users
    answers = data.get("answer")
    if answers is None and "sizing" in data:  # a one-strategy plan from before `answer`
        answers = [
            {"strategy": target.get("strategy"), "monthly_cost": data.get("monthly_cost_total"),
             "instances": sum(r.get("instances") or 0 for r in data["sizing"])}
        ]  # fmt: skip
    rows = []
    for answer in answers or []:
        cost = answer.get("monthly_cost")
        rows.append(
            {
                "strategy": answer.get("strategy"),
                "monthly_cost": float(cost) if isinstance(cost, int | float) else math.nan,
                "instances": answer.get("instances"),
            }
        )
    return rows


def read_inputs(paths: list[Path]) -> Inputs:
    """Every run's figures, one table per kind, keyed by strategy."""
    inputs = Inputs(pd.DataFrame(), pd.DataFrame(), pd.DataFrame())
    quality: list[dict[str, Any]] = []
    load: list[dict[str, Any]] = []
    capacity: list[dict[str, Any]] = []
    for given in paths:
        path = _file(given)
        data = _read(path)
        kind = {"results.json": "simulator", "capacity.json": "capacity"}.get(path.name, "load")
        inputs.sources.append({"kind": kind, "path": str(path)})
        if path.name == "results.json":
            quality += _quality(path, data)
        elif path.name == "capacity.json":
            capacity += _capacity_rows(path, data, inputs)
        elif path.name == "load_strategies.json":
            inputs.sources.pop()
            load += _listing_rows(path, data, inputs)
        else:
            load.append(_load_row(path, data, inputs.notes))
    # The latest run of a strategy wins within a kind (runs are given oldest first).
    inputs.quality = _by_strategy(pd.DataFrame(quality), mean=True)
    inputs.load = _by_strategy(pd.DataFrame(load))
    inputs.capacity = _by_strategy(pd.DataFrame(capacity))
    return inputs


def _pii(metrics: dict[str, Any]) -> dict[str, float]:
    """The PII figures of one scenario's metrics as numbers (module docstring); NaN
    without PII items or without these figures in the results."""
    if not metrics.get("pii_items"):
        return dict.fromkeys(PII, math.nan)
    raw = math.inf if metrics.get("pii_raw_at_end") else metrics.get("pii_raw_max_s")
    sealed = metrics.get("pii_sealed_max_s")
    if not metrics.get("pii_sealed_items"):
        sealed = NEVER_SEALED
    elif metrics.get("pii_sealed_at_end"):
        sealed = math.inf
    return {
        name: float(value) if isinstance(value, int | float) else math.nan
        for name, value in zip(PII, (raw, sealed), strict=True)
    }


def _combine(column: str) -> Callable[[pd.Series], float]:
    """How a figure of several scenarios becomes one: the longest for PII, else the mean;
    NaN when no scenario measured it."""

    def combine(values: pd.Series) -> float:
        if not values.notna().any():
            return math.nan
        return float(values.max() if column in PII else values.mean())

    return combine


def _by_strategy(df: pd.DataFrame, *, mean: bool = False) -> pd.DataFrame:
    if df.empty:
        return pd.DataFrame({"strategy": pd.Series(dtype=str)})
    df = df.dropna(subset=["strategy"])
    if mean:  # a strategy over several scenarios: the mean of each figure, PII's longest
        numeric = df.drop(columns=["scenario"]).groupby("strategy", sort=False)
        figures = [c for c in df.columns if c not in ("scenario", "strategy")]
        return numeric.agg({column: _combine(column) for column in figures}).reset_index()
    return df.drop_duplicates("strategy", keep="last").reset_index(drop=True)

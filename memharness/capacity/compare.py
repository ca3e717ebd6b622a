"""`memharness compare RUN_A RUN_B`: what changed between two runs of the same kind.

Runs are recognised by their files: `results.json` (simulator: strategy metrics and
footprint), `steps.json` (step-load: per-step rate and latency), `load_hdr.json` (load:
latency per operation), `bench.json` (bench: latency per operation), `capacity.json`
(a plan: sizes per strategy and layer). The two are joined with pandas on their keys
(scenario, strategy, operation, step, layer); each figure gets A, B, B − A and B / A − 1.

`select` applies the command's filters, `scenario_notices` says when the two runs did not
replay the same scenarios, and `terminal_tables` shows the rows for a person (units,
change in percent; for simulator runs the quality figures of `run_tables.QUALITY_COLUMNS`
first). Nothing here writes: the command writes a file only when given `--out`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from memharness.result_figures import peak_total
from memharness.run_tables import LAYER_COLUMNS, QUALITY_COLUMNS, SUMMARY_COLUMNS
from memharness.tables import Column, Unit, format_value, render

__all__ = [
    "CompareError",
    "Comparison",
    "compare_runs",
    "diff_runs",
    "figure_unit",
    "select",
    "terminal_tables",
    "unchanged",
]

#: File of each kind, most specific first (a step-load run also has load_hdr.json).
_FILES = ("capacity.json", "steps.json", "results.json", "bench.json", "load_hdr.json")


class CompareError(ValueError):
    """Runs that cannot be compared."""


def _kind(path: Path) -> tuple[str, Path]:
    if path.is_file():
        return path.name, path
    for name in _FILES:
        if (path / name).is_file():
            return name, path / name
    raise CompareError(f"{path}: none of {', '.join(_FILES)} there")


def _read(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CompareError(f"{path}: cannot be read: {exc}") from None


def _flat(figures: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """`figures` with nested mappings spelled out (`pii_detector.phone.recall`)."""
    out: list[tuple[str, Any]] = []
    for name, value in figures.items():
        if isinstance(value, dict):
            out += _flat(value, f"{prefix}{name}.")
        else:
            out.append((f"{prefix}{name}", value))
    return out


def _frame(kind: str, data: Any) -> tuple[pd.DataFrame, list[str]]:
    """The comparable figures of one run, long-form: keys, then `figure`, `value`."""
    rows: list[dict[str, Any]] = []
    if kind == "results.json":
        for scenario in data.get("scenarios") or []:
            ceiling = (scenario.get("ceiling") or {}).get("recall_at_k")
            if ceiling is not None:  # the dense retrieval ceiling, beside the strategies
                rows.append({"scenario": scenario.get("name"), "strategy": "(dense ceiling)",
                             "figure": "recall_at_k", "value": ceiling})  # fmt: skip
            for s in scenario.get("strategies") or []:
                base = {"scenario": scenario.get("name"), "strategy": s.get("label")}
                for name, value in _flat(s.get("metrics") or {}):
                    rows.append({**base, "figure": name, "value": value})
                total = peak_total(s, "bytes")  # the summary's peak bytes
                if total is not None:
                    rows.append({**base, "figure": "peak_bytes", "value": total})
                for layer, figures in ((s.get("footprint") or {}).get("peak") or {}).items():
                    rows.append(
                        {**base, "figure": f"peak_bytes.{layer}", "value": figures.get("bytes")}
                    )
                for op, figures in (s.get("latency_ms") or {}).items():
                    for stat in ("p50", "p95", "p99"):
                        rows.append(
                            {**base, "figure": f"{op}.{stat}_ms", "value": figures.get(stat)}
                        )
        return pd.DataFrame(rows), ["scenario", "strategy"]
    if kind == "steps.json":
        for step in data.get("steps") or []:
            base = {"step": step["step"]}
            rows.append({**base, "figure": "offered_rate", "value": step.get("offered_rate")})
            rows.append({**base, "figure": "achieved_rate", "value": step.get("achieved_rate")})
            for op, figures in (step.get("ops") or {}).items():
                for stat in ("p50_ms", "p95_ms", "p99_ms"):
                    rows.append({**base, "figure": f"{op}.{stat}", "value": figures.get(stat)})
        return pd.DataFrame(rows), ["step"]
    if kind in ("load_hdr.json", "bench.json"):
        ops = data.get("ops") or {}
        items = ops.items() if isinstance(ops, dict) else ((o.get("name"), o) for o in ops)
        for op, figures in items:
            for stat in ("count", "n", "p50_ms", "p95_ms", "p99_ms"):
                if stat in figures:
                    rows.append({"op": op, "figure": stat, "value": figures[stat]})
        return pd.DataFrame(rows), ["op"]
    if kind == "capacity.json":
        for plan in data.get("plans") or []:
            base = {"strategy": plan.get("strategy")}
            for row in plan.get("sizing") or []:
                for figure in (
                    "cores",
                    "ram_gb",
                    "disk_gb",
                    "instances",
                    "monthly_cost",
                    "predicted_p_ms",
                    "bound_by",
                ):
                    rows.append(
                        {**base, "layer": row["layer"], "figure": figure, "value": row.get(figure)}
                    )
        return pd.DataFrame(rows), ["strategy", "layer"]
    raise CompareError(f"cannot compare {kind}")


def compare_runs(a: Path, b: Path) -> tuple[str, pd.DataFrame]:
    """The kind of the two runs and their differences, one row per key and figure."""
    found = diff_runs(a, b)
    return found.kind, found.table


@dataclass(frozen=True)
class Comparison:
    """Two runs of one kind: their differences (`table`: keys, `figure`, A, B, delta,
    change) and what makes them less comparable (`notices`, for stderr)."""

    kind: str
    keys: list[str]
    table: pd.DataFrame
    notices: list[str]


def diff_runs(a: Path, b: Path) -> Comparison:
    """Read two runs and join their figures; raises `CompareError` when they are of
    different kinds, unreadable, or hold nothing to compare."""
    kind_a, file_a = _kind(a)
    kind_b, file_b = _kind(b)
    if kind_a != kind_b:
        raise CompareError(f"different kinds of run: {file_a} and {file_b}")
    data_a, data_b = _read(file_a), _read(file_b)
    frame_a, keys = _frame(kind_a, data_a)
    frame_b, _ = _frame(kind_b, data_b)
    if frame_a.empty and frame_b.empty:
        raise CompareError(f"nothing to compare in {file_a} and {file_b}")
    notices = scenario_notices(kind_a, data_a, data_b)
    if "scenario" in keys and not set(frame_a["scenario"]) & set(frame_b["scenario"]):
        # Different populations (e.g. 1,000 and 10,000 generated users): match by strategy.
        frame_a["scenario"] = frame_b["scenario"] = "(each run's)"
    on = [*keys, "figure"]
    # An outer merge sorts its keys: keep the runs' own order (A's rows, then B's new ones).
    frame_a["_order"] = range(len(frame_a))
    frame_b["_order"] = range(len(frame_a), len(frame_a) + len(frame_b))
    joined = frame_a.merge(frame_b, on=on, how="outer", suffixes=("_a", "_b"))
    joined = joined.assign(_order=joined["_order_a"].fillna(joined["_order_b"]))
    joined = joined.sort_values(by="_order", kind="stable")
    numeric_a = pd.to_numeric(joined["value_a"], errors="coerce")
    numeric_b = pd.to_numeric(joined["value_b"], errors="coerce")
    joined["delta"] = numeric_b - numeric_a
    joined["change"] = (numeric_b / numeric_a - 1).where(numeric_a.abs() > 0)
    joined = joined.rename(columns={"value_a": "A", "value_b": "B"})
    table = joined[[*on, "A", "B", "delta", "change"]].reset_index(drop=True)
    return Comparison(kind_a.removesuffix(".json"), keys, table, notices)


def scenario_notices(kind: str, a: Any, b: Any) -> list[str]:
    """How the scenarios of two runs differ, in words; empty when they are the same.

    Simulator runs: each scenario's name and content hash (results.json); load runs:
    the scenario file played and its users (`scenario` of steps.json / load_hdr.json)."""
    if kind == "results.json":
        named_a = {str(s.get("name")): s.get("hash") for s in a.get("scenarios") or []}
        named_b = {str(s.get("name")): s.get("hash") for s in b.get("scenarios") or []}
        if named_a == named_b:
            return []
        parts = []
        if only := [n for n in named_a if n not in named_b]:
            parts.append(f"only in A: {', '.join(only)}")
        if only := [n for n in named_b if n not in named_a]:
            parts.append(f"only in B: {', '.join(only)}")
        if other := [n for n in named_a if n in named_b and named_a[n] != named_b[n]]:
            parts.append(
                "same name, other content: "
                + ", ".join(f"{n} (hash {named_a[n]} vs {named_b[n]})" for n in other)
            )
        if not set(named_a) & set(named_b):
            parts.append("no scenario in common: strategies are matched across them")
        return [
            f"the runs' scenarios differ ({'; '.join(parts)}); "
            "where they differ, A and B come from different conversations"
        ]
    if kind in ("steps.json", "load_hdr.json"):
        played_a, played_b = _played(a), _played(b)
        if played_a != played_b:
            return [f"the runs played different scenarios: A {played_a}, B {played_b}"]
    return []


def _played(data: Any) -> str:
    scenario = data.get("scenario") if isinstance(data, dict) else None
    if not isinstance(scenario, dict):
        return "the built-in conversations"
    return f"{scenario.get('file') or 'generated users'} ({scenario.get('users', '?')} users)"


# --------------------------------------------------------------------------- filters


def _normal(name: str) -> str:
    return name.strip().lower().replace("-", "_").replace(" ", "_")


def select(
    found: Comparison,
    *,
    figures: Sequence[str] = (),
    strategies: Sequence[str] = (),
    only_changed: bool = False,
) -> pd.DataFrame:
    """The rows of `found.table` that `--figure` (a substring of the figure, or of the
    operation for load and bench runs; `-` and spaces read as `_`), `--strategy` (a label,
    or a name with its `--grid` points) and `--only-changed` (not equal, not empty on both
    sides) keep. A figure or strategy that matches nothing raises `CompareError` listing
    the valid ones."""
    table = found.table
    keep = pd.Series(True, index=table.index)
    if figures:
        searched = [c for c in ("figure", "op") if c in table.columns]
        texts = table[searched].astype(str).agg(" ".join, axis=1).str.lower()
        matched = pd.Series(False, index=table.index)
        for name in figures:
            hits = texts.str.contains(_normal(name), regex=False)
            if not hits.any():
                valid = ", ".join(dict.fromkeys(str(v) for c in searched for v in table[c]))
                raise CompareError(f"--figure {name!r} matches no figure; there are: {valid}")
            matched |= hits
        keep &= matched
    if strategies:
        if "strategy" not in table.columns:
            raise CompareError(f"--strategy: a {found.kind} run has no strategies to choose")
        labels = table["strategy"].astype(str)
        matched = pd.Series(False, index=table.index)
        for name in strategies:
            hits = (labels == name) | labels.str.startswith(f"{name}[")
            if not hits.any():
                valid = ", ".join(dict.fromkeys(labels))
                raise CompareError(f"--strategy {name!r} is in neither run; there are: {valid}")
            matched |= hits
        keep &= matched
    if only_changed:
        keep &= ~unchanged(table)
    return table[keep].reset_index(drop=True)


def unchanged(table: pd.DataFrame) -> pd.Series:
    """Rows equal on both sides, or empty on both."""
    empty = table["A"].isna() & table["B"].isna()
    same = table["A"].astype(str) == table["B"].astype(str)
    numeric = table["delta"].fillna(1.0) == 0
    return empty | (same & table["A"].notna()) | numeric


# --------------------------------------------------------------------------- display

#: Counts among the figures of every kind of run (shown as integers).
_COUNTS = frozenset(
    {"turns", "probes", "probes_recorded", "events", "needed", "pii_items", "pii_unmeasured",
     "pii_still_resident", "count", "n", "instances", "leakage"}
)  # fmt: skip


def figure_unit(figure: str) -> Unit:
    """The unit a figure is shown in: the run tables' own for their figures, else by its
    name (`*_ms`, `*_at_k`, `peak_bytes*`, `*_max_s`, counts), else a plain number."""
    known = {c.field: c.unit for c in (*SUMMARY_COLUMNS, *LAYER_COLUMNS, *QUALITY_COLUMNS)}
    if figure in known:
        return known[figure]
    if figure.startswith("peak_bytes"):
        return "bytes"
    if figure.endswith("_ms"):
        return "ms"
    if figure.endswith(("_at_k", "_ratio")):
        return "%"
    if figure.endswith("_max_s") or figure in ("wall_s", "inside_s"):
        return "s"
    if figure in _COUNTS or figure.endswith("_items"):
        return "count"
    return "num"


def _change(row: dict[str, Any]) -> str:
    """B / A − 1 in percent; `from 0` when A is 0 and B is not."""
    change, delta = row["change"], row["delta"]
    if pd.notna(change) and change != 0:
        return f"{change * 100:+.1f}%"
    if pd.notna(delta):
        return "0.0%" if delta == 0 else "from 0"
    return "-"


def _shown(
    rows: list[dict[str, Any]], keys: list[str], names: dict[str, str]
) -> list[dict[str, Any]]:
    """Rows with their cells in units; a key repeated from the row above left blank."""
    out = []
    above: list[Any] = []
    for row in rows:
        own = [row[k] for k in keys]
        same = 0
        while same < len(keys) and same < len(above) and own[same] == above[same]:
            same += 1
        unit = figure_unit(str(row["figure"]))
        shown = {k: ("" if i < same else row[k]) for i, k in enumerate(keys)}
        shown.update(
            figure=names.get(str(row["figure"]), row["figure"]),
            A=format_value(row["A"], unit),
            B=format_value(row["B"], unit),
            change=_change(row),
        )
        out.append(shown)
        above = own
    return out


def terminal_tables(found: Comparison, table: pd.DataFrame) -> str:
    """`table` (rows of `found.table`) for a person: units, change in percent, repeated
    keys blank; for simulator runs the quality figures first, per scenario and strategy."""
    keys = found.keys
    columns = (
        *(Column(k, k, "text") for k in keys),
        Column("figure", "figure", "text"),
        Column("A", "A", "num"),
        Column("B", "B", "num"),
        Column("change", "change", "num"),
    )
    rows = [{str(k): v for k, v in r.items()} for r in table.to_dict("records")]
    if found.kind != "results":
        return render(columns, _shown(rows, keys, {}))
    quality = {c.field: i for i, c in enumerate(QUALITY_COLUMNS)}
    first = {k: {v: i for i, v in enumerate(dict.fromkeys(table[k]))} for k in keys}
    head = sorted(
        (r for r in rows if r["figure"] in quality),
        key=lambda r: (*(first[k][r[k]] for k in keys), quality[r["figure"]]),
    )
    rest = [r for r in rows if r["figure"] not in quality]
    out = []
    if head:
        names = {c.field: c.header for c in QUALITY_COLUMNS}
        out += ["quality, per scenario and strategy:", render(columns, _shown(head, keys, names))]
    if rest:
        out += [f"other figures ({len(rest)} rows):", render(columns, _shown(rest, keys, {}))]
    return "\n".join(out)

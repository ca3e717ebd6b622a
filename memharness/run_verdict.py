"""The end of a run: each strategy over all the run's scenarios, and which one to take.

Per strategy: its mean recall@k and stale@k over the scenarios (each scenario counts
once: a hand-written scenario tests one behaviour, and would vanish beside a generated
population if needed facts were pooled), its leakage summed, its peak bytes summed over
the scenarios (each scenario's peak, `result_figures.peak_total`), its worst scenario
(lowest recall@k, shown with it; `none: R in each` when every scenario gave the same), and
whether it is on the recall/footprint Pareto frontier: no other strategy has at least its
mean recall with no more bytes. A strategy that did not complete every scenario (failed,
interrupted, not run) is shown as incomplete, off the frontier, with its leakage and worst
scenario but no means. An oracle strategy (`oracle: true`: it reads the script to keep
exactly what the probes need) is the upper bound: shown first, never on the frontier nor ranked, for
it would push every strategy one can deploy off.

The recommendation follows an objective, printed with it (`objective.py`): constraints a
strategy must meet, then aims that rank the ones that do. The run's objective is in
`results.json` (`objective`); without one, the default (`default_objective.yaml`).
"""

from __future__ import annotations

from typing import Any

from memharness.objective import (
    Decision,
    Objective,
    decide,
    decision_lines,
    default_objective,
    parse_objective,
)
from memharness.result_figures import pareto_frontier, peak_total
from memharness.strategy_verdict import ALIKE, StrategyVerdict
from memharness.tables import Column, render, render_markdown, wrapped

__all__ = [
    "VERDICT_COLUMNS",
    "StrategyVerdict",
    "cross_scenario",
    "objective_of",
    "recommend",
    "verdict_markdown",
    "verdict_terminal",
]

FRONTIER_NOTE = (
    "frontier: no other strategy has at least its mean recall with no more peak bytes "
    "(recall and stale: mean over the scenarios; leakage, PII at end (marked personal values "
    "still in plaintext) and peak bytes: summed; PII plaintext: the longest a value stayed so)"
)

#: The summary's columns: field of `StrategyVerdict.row`, header, unit, better.
VERDICT_COLUMNS = (
    Column("strategy", "strategy", "text"),
    Column("frontier", "frontier", "text"),
    Column("recall", "recall", "%", "higher"),
    Column("stale", "stale", "%", "lower"),
    Column("leakage", "leakage", "count", alarm=True),
    Column("pii_raw_at_end", "PII at end", "count", alarm=True),
    Column("pii_plaintext", "PII plaintext", "s", "lower"),
    Column("peak_bytes", "peak bytes", "bytes", "lower"),
    Column("worst", "worst scenario (recall)", "text"),
)


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def cross_scenario(results: dict[str, Any]) -> list[StrategyVerdict]:
    """Each strategy of the run (in the order they first appear) over all its scenarios."""
    scenarios = results.get("scenarios") or []
    labels: list[str] = []
    for scenario in scenarios:
        for strategy in scenario.get("strategies") or []:
            if str(strategy.get("label")) not in labels:
                labels.append(str(strategy.get("label")))
    verdicts = []
    for label in labels:
        missing: list[str] = []
        recalls: list[tuple[float, str]] = []
        stales: list[float] = []
        leakage = 0
        nbytes = 0
        raw_at_end = 0
        pii_items = 0
        plaintext: float = 0.0
        oracle = False
        for scenario in scenarios:
            name = str(scenario.get("name") or "?")
            entry = next(
                (s for s in scenario.get("strategies") or [] if str(s.get("label")) == label),
                None,
            )
            metrics = (entry or {}).get("metrics")
            if entry is None or entry.get("status") != "ok" or not metrics:
                missing.append(name)
                continue
            oracle = oracle or bool((entry.get("config") or {}).get("oracle"))
            if metrics.get("recall_at_k") is not None:
                recalls.append((float(metrics["recall_at_k"]), name))
            if metrics.get("stale_at_k") is not None:
                stales.append(float(metrics["stale_at_k"]))
            leakage += int(metrics.get("leakage") or 0)
            raw_at_end += int(metrics.get("pii_raw_at_end") or 0)
            pii_items += int(metrics.get("pii_items") or 0)
            if metrics.get("pii_raw_at_end"):
                plaintext = float("inf")  # its time has no bound the run can give
            elif metrics.get("pii_raw_max_s") is not None:
                plaintext = max(plaintext, float(metrics["pii_raw_max_s"]))
            nbytes += peak_total(entry, "bytes") or 0
        worst = min(recalls, key=lambda pair: pair[0], default=None)
        if len(recalls) > 1 and len({r for r, _ in recalls}) == 1:
            worst = (recalls[0][0], ALIKE)  # no scenario is worse than another
        done = len(scenarios) - len(missing)
        verdicts.append(
            StrategyVerdict(
                label=label,
                missing=missing,
                recall=_mean([r for r, _ in recalls]),
                stale=_mean(stales),
                leakage=leakage,
                peak_bytes=nbytes if done else None,
                worst=worst[1] if worst else None,
                worst_recall=worst[0] if worst else None,
                upper_bound=oracle,
                pii_raw_at_end=raw_at_end,
                pii_plaintext_s=plaintext,
                pii_items=pii_items,
            )
        )
    points = [
        (v.label, float(v.peak_bytes), v.recall)
        for v in verdicts
        if v.complete and not v.upper_bound and v.recall is not None and v.peak_bytes is not None
    ]
    on_frontier = set(pareto_frontier(points))
    for v in verdicts:
        v.frontier = v.label in on_frontier
    return verdicts


def objective_of(results: dict[str, Any]) -> Objective:
    """The objective the run recorded (`results.json`, `objective`), else the default."""
    recorded = results.get("objective")
    if isinstance(recorded, dict):
        return parse_objective(recorded, str(recorded.get("source") or "results.json"))
    return default_objective()


def recommend(verdicts: list[StrategyVerdict], objective: Objective | None = None) -> Decision:
    """The decision under `objective` (the default without one)."""
    return decide(objective or default_objective(), verdicts)


def _closing(verdicts: list[StrategyVerdict], decision: Decision) -> list[str]:
    """The lines under the table: incomplete strategies, the frontier, the decision."""
    lines = [
        f"{v.label} is incomplete: not completed in {', '.join(v.missing)}"
        for v in verdicts
        if v.missing
    ]
    lines.append(FRONTIER_NOTE)
    lines += [
        f"{v.label}: an oracle (it reads the script to keep what the probes need), the upper "
        "bound, not ranked"
        for v in verdicts
        if v.upper_bound
    ]
    if sum(not v.upper_bound for v in verdicts) < 2:
        lines.append("One strategy: nothing to choose between.")
        return lines
    return lines + decision_lines(decision, verdicts)


def _columns(results: dict[str, Any]) -> tuple[Column, ...]:
    """The summary's columns; with one scenario, no worst one to name."""
    if len(results.get("scenarios") or []) > 1:
        return VERDICT_COLUMNS
    return tuple(c for c in VERDICT_COLUMNS if c.field != "worst")


def _heading(results: dict[str, Any]) -> str:
    n = len(results.get("scenarios") or [])
    return f"across the {n} scenarios of the run" if n != 1 else "over the run's one scenario"


def verdict_terminal(results: dict[str, Any]) -> str:
    """The cross-scenario summary as aligned text; empty when no strategy ran."""
    verdicts = cross_scenario(results)
    if not verdicts:
        return ""
    decision = recommend(verdicts, objective_of(results))
    bounds = [v.row() for v in verdicts if v.upper_bound]
    table = render(
        _columns(results), [v.row() for v in verdicts if not v.upper_bound], reference=bounds
    )
    closing = "".join(wrapped(line) for line in _closing(verdicts, decision))
    return f"\n== {_heading(results)}\n{table}{closing}"


def verdict_markdown(results: dict[str, Any]) -> str:
    """The cross-scenario summary as a `summary.md` section; empty when no strategy ran."""
    verdicts = cross_scenario(results)
    if not verdicts:
        return ""
    decision = recommend(verdicts, objective_of(results))
    table = render_markdown(
        _columns(results),
        [v.row() for v in verdicts if not v.upper_bound],
        reference=[v.row() for v in verdicts if v.upper_bound],
    )
    marks = "bold: the best of its column; ties are unmarked"
    closing = "\n".join(f"- {line}" for line in [marks, *_closing(verdicts, decision)])
    return f"## {_heading(results).capitalize()}\n\n{table}\n{closing}\n"

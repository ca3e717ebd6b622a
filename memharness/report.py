"""Turn a run's `results.json` into `summary.md` and PNG plots in the same directory.

Reports read result files only: nothing here imports the simulator or touches a store, so
a report can be rebuilt from a copied run directory. Failed and interrupted strategies are
results too: they stay in the table, and only the plots leave them out.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from memharness.diagnostics import disagreement_section, layer_table
from memharness.monitoring_tables import monitoring_markdown
from memharness.pii_detector_table import detector_markdown
from memharness.report_plots import PLOT_KINDS, PNG_TITLES, plot_stems, write_plots
from memharness.result_figures import error_line, metric, peak, peak_total
from memharness.run_verdict import verdict_markdown
from memharness.systems_table import systems_markdown
from memharness.units import human_bytes, human_duration

LAYERS = ("session", "stm", "ltm")
_HOW_TO_READ = """\
## How to read this

- **recall@k**: share of needed facts retrieved in the top-k of the layers.
- **stale@k**: share of probes whose top-k held a superseded or invalidated fact.
- **over-forget**: needed facts that had been reachable by the probe and no longer were.
- **unstored**: needed facts the memory never stored.
- **dense ceiling**: recall@k of a plain dense search, with the run's embedder, over \
every turn the user said before the probe (no forgetting, no intent filter, no session \
scope): what was findable at all. **of ceiling** is a strategy's recall@k over it. It \
can pass 1: the memory returns the top-k of STM and of LTM, the ceiling k turns, and the \
memory's intent filter drops small talk that the ceiling ranks.
- **recall STM / LTM**: share of needed facts in that layer's top-k (a fact both layers \
return counts in each; probes do not search the session layer, which holds message ids).
- Of the needed facts not retrieved: **missed** were still stored where the probe looks; \
**over-forget** had been stored where the probe could find them (LTM, or the probe's own \
session's STM) and no longer were; **unreachable** were stored only in other sessions' \
STM, which a probe never sees (a scoping or promotion gap, not forgetting). With recall \
and unstored, these add up to 1.
- **leakage**: erased facts that came back — must be 0.
- **PII raw max**: of the statements whose personal values the scenario marks (`pii:`), \
the longest time from the statement until no layer showed those values in plaintext; \
`0.0 s` when the memory masked them on the way in. **to the end (n of m)**: n items \
were still in plaintext when the run ended, so no longest time is known. A statement \
marked `sensitive` without values is not measured (counted as `pii_unmeasured`).
- **PII sealed max**: of the items a layer held sealed (the original encrypted in an LTM \
value, recoverable with the key), the longest time from the statement until none did \
(anonymised or deleted), and how many were sealed; **never sealed**: the strategy kept \
no sealed copy (it masked or deleted the values instead, see PII raw max).
- **PII detector**: the memory's detector against the marked values, per kind: \
**recall** the share of marked values that detected spans cover (whatever kind they \
name), **precision** the share of detections that overlap a marked value, measured on \
users marked `pii_complete` only (their statements list every personal value).
- **peak records / bytes**: sum over the layers of each layer's own peak (the layers may \
peak at different times, so this bounds the simultaneous peak from above), over the \
daily samples and the moment of every probe; the over-time plot draws the daily samples \
only, so a peak within a day shows in the table and not in that plot.
- **turn p95**: 95th percentile of the wall time of one turn; **turns/s**: simulated turns \
per wall-clock second.
- In the recall-vs-footprint plot, ringed points joined by the step line are the Pareto \
frontier: no other strategy has at least their recall with no more bytes. With more than \
a few strategies (a `--grid` sweep), points carry numbers and the key beside the plot \
names them (the frontier's in red); points that coincide share one spot (`2,5-7`).
- `-` means not measured: the strategy did not finish, or the scenario had nothing to \
measure (e.g. no needed facts).
"""


class ResultsError(ValueError):
    """A results file is missing or is not a readable results document."""


def load_results(run_dir: Path) -> dict[str, Any]:
    """Read `run_dir/results.json`; any failure raises `ResultsError` naming the file."""
    path = Path(run_dir) / "results.json"
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ResultsError(f"{path}: cannot read results file ({exc.strerror or exc})") from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ResultsError(
            f"{path}: invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
        ) from exc
    if not isinstance(data, dict) or not isinstance(data.get("scenarios"), list):
        raise ResultsError(f"{path}: not a results document (no 'scenarios' list)")
    return data


# --------------------------------------------------------------------------- formatting


def pii_raw_text(metrics: dict[str, Any]) -> str:
    """`PII raw max` of a strategy's metrics: a time, `to the end (n of m)` when n of
    the m items were still in plaintext when the run ended, `-` without PII items (or
    without these figures in the results)."""
    items = metrics.get("pii_items")
    if not items:
        return "-"
    at_end = metrics.get("pii_raw_at_end") or 0
    if at_end:
        return f"to the end ({at_end} of {items})"
    return human_duration(metrics.get("pii_raw_max_s"))


def pii_sealed_text(metrics: dict[str, Any]) -> str:
    """`PII sealed max`: a time and how many items were sealed, `never sealed`, or `to
    the end (n of m)` when n of the m sealed items were still sealed at the end."""
    items = metrics.get("pii_items")
    if not items:
        return "-"
    sealed = metrics.get("pii_sealed_items") or 0
    if not sealed:
        return "never sealed"
    at_end = metrics.get("pii_sealed_at_end") or 0
    if at_end:
        return f"to the end ({at_end} of {sealed})"
    return f"{human_duration(metrics.get('pii_sealed_max_s'))} ({sealed} sealed)"


def _num(value: float | None, fmt: str = ".3f") -> str:
    return "-" if value is None else format(value, fmt)


def _cell(text: str) -> str:
    # A bare '|' would end the cell, even inside a code span (GFM tables).
    return text.replace("|", "\\|")


# --------------------------------------------------------------------------- table


def summary_table(scenario: dict[str, Any]) -> str:
    """A Markdown table of one scenario's strategies, in the order given.

    Failed strategies keep their row, marked `failed [n]`, with the first line of their
    error in a numbered list under the table. The best recall among ok rows is bold when
    no other row shares it (a tie marks nothing, as on the terminal).
    """
    strategies: list[dict[str, Any]] = scenario.get("strategies") or []
    recalls = [metric(s, "recall_at_k") for s in strategies if s.get("status") == "ok"]
    best = max((r for r in recalls if r is not None), default=None)
    header = (
        "| strategy | status | recall@k | stale@k | over-forget | unstored | leakage "
        "| PII raw max | PII sealed max | peak records (session/stm/ltm) | peak bytes "
        "| turn p95 ms | turns/s |"
    )
    lines = [header, "|" + "---|" * 2 + "---:|" * 11]
    notes: list[str] = []
    for strategy in strategies:
        label = str(strategy.get("label") or strategy.get("name") or "?")
        status = str(strategy.get("status") or "?")
        if status == "failed":
            notes.append(f"- [{len(notes) + 1}] `{label}`: {error_line(strategy.get('error'))}")
            status = f"failed [{len(notes)}]"
        recall = metric(strategy, "recall_at_k")
        recall_text = _num(recall)
        if status == "ok" and recall is not None and recall == best and recalls.count(best) == 1:
            recall_text = f"**{recall_text}**"
        leakage = metric(strategy, "leakage")
        leakage_text = _num(leakage, "d")
        if leakage:
            leakage_text = f"**{leakage_text}** ⚠"
        records = peak(strategy, "records")
        records_text = "-"
        if records is not None:
            split = "/".join(str(records.get(layer, 0)) for layer in LAYERS)
            records_text = f"{sum(records.values())} ({split})"
        turn_latency = (strategy.get("latency_ms") or {}).get("turn") or {}
        cells = [
            f"`{label}`",
            status,
            recall_text,
            _num(metric(strategy, "stale_at_k")),
            _num(metric(strategy, "over_forget_rate")),
            _num(metric(strategy, "unstored_rate")),
            leakage_text,
            pii_raw_text(strategy.get("metrics") or {}),
            pii_sealed_text(strategy.get("metrics") or {}),
            records_text,
            human_bytes(peak_total(strategy, "bytes")),
            _num(turn_latency.get("p95"), ".1f"),
            _num(metric(strategy, "turns_per_s"), ".1f"),
        ]
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    if notes:
        lines += ["", "Failed:", "", *notes]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- summary


def write_summary(run_dir: Path, results: dict[str, Any], *, plots: bool = True) -> Path:
    """Write `run_dir/summary.md`: run header, a section per scenario (with its plots
    unless not `plots`), the strategies across scenarios (`run_verdict.py`), metric
    glossary."""
    versions = results.get("versions") or {}
    status = str(results.get("status") or "?")
    stopped = status
    if status == "interrupted":
        status = (
            f"**interrupted** — some strategies did not run to the end; `memharness run "
            f"--resume {run_dir}` with the run's --scenario, --strategy and --grid options "
            "completes it (an interrupted `run` prints the whole command)"
        )
    elif status != "complete":
        status = f"**{status}** — some strategies did not run to the end"
    out = [
        f"# memharness run {results.get('run_id', '?')}",
        "",
        f"- created: {results.get('created_at', '-')}",
        f"- backend: {results.get('backend', '-')} · embedder: {results.get('embedder', '-')}"
        f" · workers: {results.get('workers', '-')} · k: {results.get('k', '-')}"
        f" · seed: {results.get('seed', '-')}",
        "- versions: " + (", ".join(f"{k} {v}" for k, v in versions.items()) or "-"),
        f"- status: {status}",
        "",
        *systems_markdown(results),  # a run with --system: its answer comes first
    ]
    for scenario, stem in zip(results.get("scenarios") or [], plot_stems(results), strict=True):
        seed = scenario.get("seed")
        out += [
            f"## {scenario.get('name', '?')}",
            "",
            f"{scenario.get('users', '-')} users, {scenario.get('turns', '-')} turns,"
            f" {scenario.get('probes', '-')} probes · hash `{scenario.get('hash', '-')}`"
            f" · seed {'-' if seed is None else seed}"
            f" · source `{scenario.get('source', '-')}`",
            "",
        ]
        if not scenario.get("strategies"):  # the run stopped before any strategy finished
            out += [f"No strategy finished for this scenario: the run was {stopped}.", ""]
            continue
        out += [
            summary_table(scenario),
            *_diagnostics(Path(run_dir), scenario),
            *detector_markdown(scenario),
            *monitoring_markdown(scenario),
            *(
                (f"![{PNG_TITLES[kind]}]({stem}-{kind}.png)\n" for kind in PLOT_KINDS)
                if plots
                else ["Plots: drawn when the run is completed (`memharness run --resume`).\n"]
            ),
        ]
    verdict = verdict_markdown(results)
    if verdict:
        out.append(verdict)
    out.append(_HOW_TO_READ)
    path = Path(run_dir) / "summary.md"
    path.write_text("\n".join(out), encoding="utf-8")
    return path


def _diagnostics(run_dir: Path, scenario: dict[str, Any]) -> list[str]:
    """The ceiling and layer table, and the probes where strategies disagree; nothing
    for results without these figures."""
    ok = [s.get("metrics") or {} for s in scenario.get("strategies") or []]
    if "ceiling" not in scenario and not any("recall_stm_at_k" in m for m in ok):
        return []
    out = ["Recall against the dense retrieval ceiling, by layer, and why the rest was not:"]
    out += ["", layer_table(scenario)]
    disagree = disagreement_section(run_dir, scenario)
    return [*out, disagree] if disagree else out


# --------------------------------------------------------------------------- entry


def write_report(run_dir: Path, *, plots: bool = True) -> Path:
    """Load `run_dir/results.json`, write the plots (unless not `plots`: an interrupted
    run stops without drawing them, its resumed run draws them) and `summary.md`; returns
    its path."""
    results = load_results(run_dir)
    if plots:
        write_plots(run_dir, results)
    return write_summary(run_dir, results, plots=plots)

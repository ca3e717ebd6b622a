"""Turn a run's `results.json` into `summary.md` and PNG plots in the same directory.

Reports read result files only: nothing here imports the simulator or touches a store, so
a report can be rebuilt from a copied run directory. Failed and interrupted strategies are
results too: they stay in the table, and only the plots leave them out.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import re
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memharness.diagnostics import disagreement_section, layer_table

LAYERS = ("session", "stm", "ltm")
MAX_SERIES_POINTS = 2000
#: Points are labelled in place when this few and this short; else numbered, with a key.
INLINE_POINTS_MAX = 4
INLINE_LABEL_CHARS = 32
#: Above this many series, the footprint legend goes beside the plot.
LEGEND_INSIDE_MAX = 5
PLOT_KINDS = ("recall-vs-footprint", "stale-vs-recall", "footprint-over-time")
_PNG_TITLES = {
    "recall-vs-footprint": "recall@k against peak footprint",
    "stale-vs-recall": "stale@k against recall@k",
    "footprint-over-time": "live records over virtual time",
}
_NO_DATA = "no completed strategy to plot"
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
- **PII raw max**: of the statements the scenario marks as carrying PII (`sensitive`, \
`pii:` values), the longest time from the statement until no layer showed its values in \
plaintext; `0.0 s` when the memory masked them on the way in. **to the end (n of m)**: n \
items were still in plaintext when the run ended, so no longest time is known.
- **PII sealed max**: of the items a layer held sealed (the original encrypted in an LTM \
value, recoverable with the key), the longest time from the statement until none did \
(anonymised or deleted), and how many were sealed; **never sealed**: the strategy kept \
no sealed copy (it masked or deleted the values instead, see PII raw max).
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


def human_duration(seconds: float | None) -> str:
    """`86400` -> `24.0 h`, `259200` -> `3.0 d`; hours up to 48 h, `-` for None."""
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{seconds:.1f} s"
    if seconds < 3600:
        return f"{seconds / 60:.1f} min"
    if seconds < 48 * 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"


def human_bytes(n: float | None) -> str:
    """Binary units: `900 B`, `1.5 KiB`, `2.0 MiB`, `1.1 GiB`; `-` for None."""
    if n is None:
        return "-"
    if n < 1024:
        return f"{n:.0f} B"
    for unit in ("KiB", "MiB"):
        n /= 1024
        if n < 1024:
            return f"{n:.1f} {unit}"
    return f"{n / 1024:.1f} GiB"


def binary_unit(n: float) -> tuple[str, int]:
    """The binary unit `human_bytes` writes `n` bytes in, and its size in bytes."""
    for power, unit in enumerate(("B", "KiB", "MiB")):
        if n < 1024 ** (power + 1):
            return unit, 1024**power
    return "GiB", 1024**3


def pii_raw_text(metrics: dict[str, Any]) -> str:
    """`PII raw max` of a strategy's metrics: a time, `to the end (n of m)` when n of
    the m items were still in plaintext when the run ended, `-` without PII items (or in
    results made before these figures)."""
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


def _error_line(error: str | None) -> str:
    """The line that names the exception: the first, or the last of a bare traceback."""
    lines = [line.strip() for line in (error or "").splitlines() if line.strip()]
    if not lines:
        return "(no error message recorded)"
    if lines[0].startswith("Traceback (most recent call last)"):
        return lines[-1]
    return lines[0]


# --------------------------------------------------------------------------- extraction


def _metric(strategy: dict[str, Any], name: str) -> Any:
    return (strategy.get("metrics") or {}).get(name)


def _peak(strategy: dict[str, Any], index: str) -> dict[str, int] | None:
    """Per-layer peak `index` ('records' or 'bytes'), or None without a footprint."""
    peak = (strategy.get("footprint") or {}).get("peak")
    if not peak:
        return None
    return {layer: int((peak.get(layer) or {}).get(index) or 0) for layer in peak}


def _peak_total(strategy: dict[str, Any], index: str) -> int | None:
    layers = _peak(strategy, index)
    return None if layers is None else sum(layers.values())


def _plottable(strategy: dict[str, Any]) -> bool:
    return strategy.get("status") == "ok" and strategy.get("metrics") is not None


# --------------------------------------------------------------------------- table


def summary_table(scenario: dict[str, Any]) -> str:
    """A Markdown table of one scenario's strategies, in the order given.

    Failed strategies keep their row, marked `failed [n]`, with the first line of their
    error in a numbered list under the table. The best recall among ok rows is bold when
    no other row shares it (a tie marks nothing, as on the terminal).
    """
    strategies: list[dict[str, Any]] = scenario.get("strategies") or []
    recalls = [_metric(s, "recall_at_k") for s in strategies if s.get("status") == "ok"]
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
            notes.append(f"- [{len(notes) + 1}] `{label}`: {_error_line(strategy.get('error'))}")
            status = f"failed [{len(notes)}]"
        recall = _metric(strategy, "recall_at_k")
        recall_text = _num(recall)
        if status == "ok" and recall is not None and recall == best and recalls.count(best) == 1:
            recall_text = f"**{recall_text}**"
        leakage = _metric(strategy, "leakage")
        leakage_text = _num(leakage, "d")
        if leakage:
            leakage_text = f"**{leakage_text}** ⚠"
        records = _peak(strategy, "records")
        records_text = "-"
        if records is not None:
            split = "/".join(str(records.get(layer, 0)) for layer in LAYERS)
            records_text = f"{sum(records.values())} ({split})"
        turn_latency = (strategy.get("latency_ms") or {}).get("turn") or {}
        cells = [
            f"`{label}`",
            status,
            recall_text,
            _num(_metric(strategy, "stale_at_k")),
            _num(_metric(strategy, "over_forget_rate")),
            _num(_metric(strategy, "unstored_rate")),
            leakage_text,
            pii_raw_text(strategy.get("metrics") or {}),
            pii_sealed_text(strategy.get("metrics") or {}),
            records_text,
            human_bytes(_peak_total(strategy, "bytes")),
            _num(turn_latency.get("p95"), ".1f"),
            _num(_metric(strategy, "turns_per_s"), ".1f"),
        ]
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    if notes:
        lines += ["", "Failed:", "", *notes]
    return "\n".join(lines) + "\n"


def pareto_frontier(points: Sequence[tuple[str, float, float]]) -> list[str]:
    """Labels of the (label, bytes, recall) points no other point dominates.

    A point is dominated when another has <= bytes and >= recall, one of them strictly;
    identical points therefore both stay. Returned by bytes ascending, then recall
    descending, then input order — the order a step line through them takes.
    """
    frontier = [
        (nbytes, -recall, i, label)
        for i, (label, nbytes, recall) in enumerate(points)
        if not any(b <= nbytes and r >= recall and (b < nbytes or r > recall) for _, b, r in points)
    ]
    return [label for *_, label in sorted(frontier)]


# --------------------------------------------------------------------------- summary


def plot_stems(results: dict[str, Any]) -> list[str]:
    """A file-name stem per scenario: its name, made unique when a run repeats a name."""
    scenarios = results.get("scenarios") or []
    names = [re.sub(r"[^A-Za-z0-9._-]+", "_", str(s.get("name") or "scenario")) for s in scenarios]
    counts = Counter(names)
    stems: list[str] = []
    for name, scenario in zip(names, scenarios, strict=True):
        stem = name
        if counts[name] > 1:
            stem = f"{name}-{scenario.get('hash')}-s{scenario.get('seed')}"
        while stem in stems:
            stem += "-x"
        stems.append(stem)
    return stems


def write_summary(run_dir: Path, results: dict[str, Any]) -> Path:
    """Write `run_dir/summary.md`: run header, a section per scenario, the strategies
    across scenarios (`run_verdict.py`), metric glossary."""
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
            *(f"![{_PNG_TITLES[kind]}]({stem}-{kind}.png)\n" for kind in PLOT_KINDS),
        ]
    # Imported here: run_verdict reads this module's frontier and peaks.
    from memharness.run_verdict import verdict_markdown

    verdict = verdict_markdown(results)
    if verdict:
        out.append(verdict)
    out.append(_HOW_TO_READ)
    path = Path(run_dir) / "summary.md"
    path.write_text("\n".join(out), encoding="utf-8")
    return path


def _diagnostics(run_dir: Path, scenario: dict[str, Any]) -> list[str]:
    """The ceiling and layer table, and the probes where strategies disagree; nothing
    for results made before these figures existed."""
    ok = [s.get("metrics") or {} for s in scenario.get("strategies") or []]
    if "ceiling" not in scenario and not any("recall_stm_at_k" in m for m in ok):
        return []
    out = ["Recall against the dense retrieval ceiling, by layer, and why the rest was not:"]
    out += ["", layer_table(scenario)]
    disagree = disagreement_section(run_dir, scenario)
    return [*out, disagree] if disagree else out


# --------------------------------------------------------------------------- plots


def downsample(n: int, limit: int = MAX_SERIES_POINTS) -> list[int]:
    """At most `limit` evenly spaced indices into a sequence of `n`, first and last kept."""
    if n <= limit:
        return list(range(n))
    if limit <= 1:
        return [0] if limit == 1 else []
    step = (n - 1) / (limit - 1)
    return sorted({round(i * step) for i in range(limit)})


def write_plots(
    run_dir: Path, results: dict[str, Any], *, processes: int | None = None
) -> list[Path]:
    """Write three PNGs per scenario into `run_dir`; returns their paths.

    Only ok strategies with the plotted metrics appear. A scenario with none still gets
    its PNGs (with a note) so the links in summary.md never break. Scenarios are drawn in
    parallel, by up to `processes` (default: one per core): matplotlib draws in Python,
    and the 27 plots of `make run` took 9.9 s in one process.
    """
    jobs = list(zip(results.get("scenarios") or [], plot_stems(results), strict=True))
    processes = min(len(jobs), processes or os.cpu_count() or 1)
    if processes <= 1:
        return [path for scenario, stem in jobs for path in _plots(run_dir, scenario, stem)]
    # Spawned, not forked: the caller may hold threads (Ray's) that a fork would copy.
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(processes, mp_context=context) as pool:
        drawn = pool.map(_plots, [run_dir] * len(jobs), *zip(*jobs, strict=True))
        return [path for paths in drawn for path in paths]


def _plots(run_dir: Path, scenario: dict[str, Any], stem: str) -> list[Path]:
    """The three PNGs of one scenario."""
    import matplotlib

    matplotlib.use("Agg")  # no display: reports run in CI and on servers
    import matplotlib.pyplot as plt

    written: list[Path] = []
    strategies = [s for s in scenario.get("strategies") or [] if _plottable(s)]
    drawers = (_recall_vs_footprint, _stale_vs_recall, _footprint_over_time)
    for kind, draw in zip(PLOT_KINDS, drawers, strict=True):
        fig, ax = plt.subplots(figsize=(8, 5.5))
        try:
            if not draw(ax, strategies):
                ax.text(0.5, 0.5, _NO_DATA, ha="center", va="center", transform=ax.transAxes)
            ax.set_title(f"{scenario.get('name', '?')}: {_PNG_TITLES[kind]}")
            fig.tight_layout()
            path = Path(run_dir) / f"{stem}-{kind}.png"
            # A key beside the plot is out of tight_layout (the plot keeps its size)
            # and in the saved image, which grows to hold it.
            beside = [key for key in (ax.get_legend(),) if key and not key.get_in_layout()]
            fig.savefig(path, dpi=110, bbox_inches="tight", bbox_extra_artists=beside)
            written.append(path)
        finally:
            plt.close(fig)
    return written


def point_marks(labels: Sequence[str]) -> list[str] | None:
    """What to write beside each point: None for the labels themselves (few and short),
    else the point's number (1-based, in the order given), for a key that names them."""
    if len(labels) <= INLINE_POINTS_MAX and all(len(x) <= INLINE_LABEL_CHARS for x in labels):
        return None
    return [str(i) for i in range(1, len(labels) + 1)]


def number_runs(numbers: Sequence[int]) -> str:
    """`[1, 2, 3, 5, 7, 8]` -> `1-3,5,7,8`: the points that share one spot."""
    runs: list[list[int]] = []
    for n in sorted(set(numbers)):
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    return ",".join(f"{r[0]}-{r[-1]}" if len(r) > 2 else ",".join(map(str, r)) for r in runs)


def _mark_points(
    ax: Any,
    points: Sequence[tuple[str, float, float]],
    numbers: Sequence[int],
    highlight: Sequence[str] = (),
) -> None:
    """Label each (label, x, y) point: in place, or by `numbers` with a key beside the
    plot listing `n  label`, the `highlight`ed labels in red. Points on the same spot
    get one annotation (`2,5-7`), never overprinted text."""
    from matplotlib.lines import Line2D

    marks = point_marks([label for label, _, _ in points])
    spots: dict[tuple[float, float], list[int]] = {}
    for i, (_, x, y) in enumerate(points):
        spots.setdefault((x, y), []).append(i)
    for (x, y), members in spots.items():
        if marks is None:
            text = " / ".join(points[i][0] for i in members)
        else:
            text = number_runs([numbers[i] for i in members])
        ax.annotate(text, (x, y), xytext=(4, 4), textcoords="offset points", fontsize=7)
    if marks is None:
        return
    handles = [*ax.get_legend_handles_labels()[0]]
    names = [*ax.get_legend_handles_labels()[1]]
    for (label, _, _), n in zip(points, numbers, strict=True):
        handles.append(Line2D([], [], linestyle="none"))
        names.append(f"{n}  {label}")
    key = ax.legend(
        handles,
        names,
        loc="upper left",
        bbox_to_anchor=(1.02, 1.0),
        fontsize=7,
        handlelength=0 if not highlight else 1.5,
        ncols=1 if len(points) <= 30 else 2,
        title="red: on the Pareto frontier" if highlight else None,
        title_fontsize=7,
        alignment="left",
        frameon=False,
    )
    key.set_in_layout(False)  # the plot keeps its size; the saved image grows to the key
    red = set(highlight)
    for text, (label, _, _) in zip(key.get_texts()[-len(points) :], points, strict=True):
        if label in red:
            text.set_color("tab:red")


def _recall_vs_footprint(ax: Any, strategies: list[dict[str, Any]]) -> bool:
    numbered = [
        (n, str(s["label"]), float(nbytes), float(recall))
        for n, s in enumerate(strategies, start=1)
        if (recall := _metric(s, "recall_at_k")) is not None
        and (nbytes := _peak_total(s, "bytes")) is not None
    ]
    if not numbered:
        return False
    # Bytes in the binary unit of the largest, so that the ticks are round numbers of it.
    unit, size = binary_unit(max(x for _, _, x, _ in numbered))
    points = [(label, x / size, y) for _, label, x, y in numbered]
    ax.scatter([x for _, x, _ in points], [y for _, _, y in points], color="tab:blue", zorder=3)
    by_label = {label: (x, y) for label, x, y in points}
    frontier = pareto_frontier(points)
    front = [by_label[label] for label in frontier]
    fx, fy = [x for x, _ in front], [y for _, y in front]
    ax.scatter(fx, fy, s=160, facecolors="none", edgecolors="tab:red", zorder=4)
    ax.step(fx, fy, where="post", color="tab:red", alpha=0.6, zorder=2, label="Pareto frontier")
    xs = [x for _, x, _ in points]
    if min(xs) > 0 and max(xs) / min(xs) > 100:
        ax.set_xscale("log")
    ax.set_xlabel(f"peak footprint, summed over layers ({unit}; 1 KiB = 1024 B)")
    ax.set_ylabel("recall@k")
    ax.set_ylim(-0.05, 1.05)
    if point_marks([label for label, _, _ in points]) is None:
        ax.legend(loc="lower right", fontsize=8)
    _mark_points(ax, points, [n for n, *_ in numbered], frontier)
    return True


def _stale_vs_recall(ax: Any, strategies: list[dict[str, Any]]) -> bool:
    numbered = [
        (n, str(s["label"]), float(recall), float(stale))
        for n, s in enumerate(strategies, start=1)
        if (recall := _metric(s, "recall_at_k")) is not None
        and (stale := _metric(s, "stale_at_k")) is not None
    ]
    points = [(label, x, y) for _, label, x, y in numbered]
    ax.scatter([x for _, x, _ in points], [y for _, _, y in points], color="tab:blue")
    _mark_points(ax, points, [n for n, *_ in numbered])
    ax.set_xlabel("recall@k (higher is better)")
    ax.set_ylabel("stale@k (lower is better)")
    ax.set_xlim(-0.05, 1.05)
    ax.set_ylim(-0.05, 1.05)
    return bool(points)


#: Line styles and markers that tell series apart where their colours repeat or their
#: lines coincide.
LINE_STYLES = ("-", "--", "-.", ":")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "*", "h")


def series_style(n: int, count: int) -> dict[str, Any]:
    """The matplotlib style of the `n`-th of `count` series on one plot: its own colour,
    line style and hollow marker (a line drawn on top of another leaves it visible), and
    a width that narrows from the first series drawn to the last, so that where two
    strategies' lines coincide the earlier one shows around the later one."""
    widest, narrowest = 3.2, 1.0
    width = widest - (widest - narrowest) * n / max(count - 1, 1)
    return {
        "color": f"C{n % 10}",
        "linestyle": LINE_STYLES[n % len(LINE_STYLES)],
        "marker": MARKERS[n % len(MARKERS)],
        "markersize": 4 + 3 * (width - narrowest) / (widest - narrowest),
        "markerfacecolor": "none",
        "markevery": (0.02 * (n % 5), 0.1),  # staggered: markers on one spot overlap less
        "linewidth": width,
        "zorder": 2 + n,
    }


def _footprint_over_time(ax: Any, strategies: list[dict[str, Any]]) -> bool:
    import matplotlib.dates as mdates

    drawn = 0
    plotted = [s for s in strategies if (s.get("footprint") or {}).get("series")]
    for n, strategy in enumerate(plotted):
        series = strategy["footprint"]["series"]
        picked = [series[i] for i in downsample(len(series))]
        times = [datetime.fromtimestamp(float(p["at"]), tz=UTC) for p in picked]
        # Every key but "at" is a layer's [records, bytes].
        records = [sum(int(v[0]) for k, v in p.items() if k != "at") for p in picked]
        ax.plot(times, records, label=str(strategy["label"]), **series_style(n, len(plotted)))
        drawn += 1
    if drawn:
        locator = mdates.AutoDateLocator()
        ax.xaxis.set_major_locator(locator)
        ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))
        if drawn <= LEGEND_INSIDE_MAX:
            ax.legend(fontsize=7, loc="best")
        else:
            beside = ax.legend(
                fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False
            )
            beside.set_in_layout(False)
    ax.set_xlabel("virtual time (UTC)")
    ax.set_ylabel("live records, summed over layers")
    return bool(drawn)


# --------------------------------------------------------------------------- entry


def write_report(run_dir: Path) -> Path:
    """Load `run_dir/results.json`, write the plots and `summary.md`; returns its path."""
    results = load_results(run_dir)
    write_plots(run_dir, results)
    return write_summary(run_dir, results)

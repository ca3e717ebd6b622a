"""The PNG plots of a run's report: recall against footprint (with the Pareto frontier),
stale against recall, and live records over virtual time, three per scenario.

Only ok strategies with the plotted metrics appear; the plots read result files only.
"""

from __future__ import annotations

import multiprocessing
import os
import re
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memharness.result_figures import metric, pareto_frontier, peak_total, plottable
from memharness.units import binary_unit

MAX_SERIES_POINTS = 2000
#: Points are labelled in place when this few and this short; else numbered, with a key.
INLINE_POINTS_MAX = 4
INLINE_LABEL_CHARS = 32
#: Above this many series, the footprint legend goes beside the plot.
LEGEND_INSIDE_MAX = 5
PLOT_KINDS = ("recall-vs-footprint", "stale-vs-recall", "footprint-over-time")
PNG_TITLES = {
    "recall-vs-footprint": "recall@k against peak footprint",
    "stale-vs-recall": "stale@k against recall@k",
    "footprint-over-time": "live records over virtual time",
}
_NO_DATA = "no completed strategy to plot"


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
    strategies = [s for s in scenario.get("strategies") or [] if plottable(s)]
    drawers = (_recall_vs_footprint, _stale_vs_recall, _footprint_over_time)
    for kind, draw in zip(PLOT_KINDS, drawers, strict=True):
        fig, ax = plt.subplots(figsize=(8, 5.5))
        try:
            if not draw(ax, strategies):
                ax.text(0.5, 0.5, _NO_DATA, ha="center", va="center", transform=ax.transAxes)
            ax.set_title(f"{scenario.get('name', '?')}: {PNG_TITLES[kind]}")
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
        if (recall := metric(s, "recall_at_k")) is not None
        and (nbytes := peak_total(s, "bytes")) is not None
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
        if (recall := metric(s, "recall_at_k")) is not None
        and (stale := metric(s, "stale_at_k")) is not None
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

"""The report: summary.md and PNGs built from a synthetic results.json, the Pareto
frontier, human units, and errors that name the file.

No simulator and no stores: the report reads result files only, so a hand-written
results document is all these tests need.
"""

from __future__ import annotations

import copy
import json
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from memharness.report import ResultsError, load_results, summary_table, write_report
from memharness.report_plots import (
    MAX_SERIES_POINTS,
    downsample,
    number_runs,
    plot_stems,
    point_marks,
    series_style,
    write_plots,
)
from memharness.result_figures import pareto_frontier
from memharness.units import binary_unit, human_bytes, human_duration

T0 = 1_767_225_600.0  # 2026-01-01T00:00:00Z
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
TTL = "fixed_ttl[ttl.default_s=86400]"
DECAY = "decay[decay.half_life_s=3600]"
BROKEN = "broken_policy"
ERROR_LINE = "ValueError: ttl.default_s must be positive"


def _layers(session: int, stm: int, ltm: int, per_record: int) -> dict[str, Any]:
    return {
        name: {"records": n, "bytes": n * per_record}
        for name, n in (("session", session), ("stm", stm), ("ltm", ltm))
    }


def _ok(label: str, *, recall: float, stale: float, pii_s: float, records: int) -> dict[str, Any]:
    series = [
        {"at": T0 + 60.0 * i, "session": [1, 300], "stm": [i % 7, 700], "ltm": [i // 100, 9000]}
        for i in range(3000)  # more than MAX_SERIES_POINTS: the plot downsamples
    ]
    return {
        "label": label,
        "name": label.split("[")[0],
        "params": {},
        "fingerprint": "ab12cd34",
        "config": {},
        "file": f"drift-3f2a9c0d1e2b-s7-{label}.json",
        "status": "ok",
        "error": None,
        "metrics": {
            "recall_at_k": recall,
            "stale_at_k": stale,
            "over_forget_rate": 0.05,
            "unstored_rate": None,
            "leakage": 0,
            "pii_items": 2,  # both masked on the way in, and kept sealed for `pii_s`
            "pii_raw_max_s": 0.0,
            "pii_raw_at_end": 0,
            "pii_sealed_items": 2,
            "pii_sealed_max_s": pii_s,
            "pii_sealed_at_end": 0,
            "turns": 120,
            "probes": 30,
            "wall_s": 1.5,
            "turns_per_s": 80.0,
        },
        "footprint": {
            "peak": _layers(3, 10, records, 1000),
            "final": _layers(0, 2, records, 1000),
            "series": series,
        },
        "latency_ms": {"turn": {"p50": 1.2, "p95": 3.4, "p99": 5.0, "n": 120}},
    }


def _failed(label: str, status: str, error: str | None) -> dict[str, Any]:
    return {
        "label": label,
        "name": label,
        "params": {},
        "fingerprint": "deadbeef",
        "config": {},
        "file": f"x-{label}.json",
        "status": status,
        "error": error,
        "metrics": None,
        "footprint": None,
        "latency_ms": None,
    }


def _scenario(name: str, strategies: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "name": name,
        "hash": "3f2a9c0d1e2b",
        "seed": 7,
        "source": f"scenarios/{name}.yaml",
        "users": 3,
        "turns": 12,
        "probes": 5,
        "strategies": strategies,
    }


@pytest.fixture
def results() -> dict[str, Any]:
    error = f'{ERROR_LINE}\nTraceback (most recent call last):\n  File "x.py", line 3\n'
    drift = [
        _ok(TTL, recall=0.8, stale=0.1, pii_s=86_400.0, records=40),
        _failed(BROKEN, "failed", error),
        _ok(DECAY, recall=0.9, stale=0.3, pii_s=259_200.0, records=4000),
    ]
    return {
        "run_id": "20261129-231500-ab12",
        "created_at": "2026-11-29T23:15:00Z",
        "backend": "memory",
        "embedder": "hashing",
        "workers": 2,
        "k": 5,
        "seed": 7,
        "versions": {"memharness": "0.1.0", "python": "3.11.7", "ray": "2.60.0"},
        "status": "interrupted",
        "scenarios": [
            _scenario("drift", drift),
            _scenario("erasure", [_failed("lru", "interrupted", None)]),
        ],
    }


def test_write_report_writes_summary_and_plots(tmp_path: Path, results: dict[str, Any]) -> None:
    (tmp_path / "results.json").write_text(json.dumps(results), encoding="utf-8")

    summary_path = write_report(tmp_path)

    assert summary_path == tmp_path / "summary.md"
    summary = summary_path.read_text(encoding="utf-8")
    for text in (
        "# memharness run 20261129-231500-ab12",
        "backend: memory · embedder: hashing · workers: 2 · k: 5",
        "versions: memharness 0.1.0, python 3.11.7, ray 2.60.0",
        "status: **interrupted**",
        "## drift",
        "## erasure",
        "3 users, 12 turns, 5 probes · hash `3f2a9c0d1e2b` · seed 7",
        f"`{TTL}`",
        f"`{DECAY}`",
        f"`{BROKEN}` | failed [1] |",
        f"- [1] `{BROKEN}`: {ERROR_LINE}",
        "`lru` | interrupted |",
        "## How to read this",
        "**leakage**: erased facts that came back — must be 0.",
    ):
        assert text in summary, text
    assert "Traceback" not in summary  # only the error's first line is shown
    stems = ("drift", "erasure")
    kinds = ("recall-vs-footprint", "stale-vs-recall", "footprint-over-time")
    for stem in stems:
        for kind in kinds:
            png = tmp_path / f"{stem}-{kind}.png"
            assert f"]({png.name})" in summary
            data = png.read_bytes()
            assert data.startswith(PNG_MAGIC), png
            assert len(data) > 1000, png


def test_write_plots_returns_every_file_it_wrote(tmp_path: Path, results: dict[str, Any]) -> None:
    paths = write_plots(tmp_path, results)

    assert len(paths) == 6
    assert sorted(paths) == sorted(tmp_path.glob("*.png"))


def test_summary_table_rows_in_order_with_units_and_failures(results: dict[str, Any]) -> None:
    table = summary_table(results["scenarios"][0])

    rows = [line for line in table.splitlines() if line.startswith("| `")]
    assert [row.split("`")[1] for row in rows] == [TTL, BROKEN, DECAY]
    ttl, broken, decay = rows
    # 53 = 3 + 10 + 40 records; 53 000 bytes = 51.8 KiB
    assert (
        "| 0.800 | 0.100 | 0.050 | - | 0 | 0.0 s | 24.0 h (2 sealed) | 53 (3/10/40) | 51.8 KiB "
        "| 3.4 | 80.0 |" in ttl
    )
    assert "| **0.900** |" in decay  # best recall is bold
    assert "3.0 d (2 sealed)" in decay
    assert "3.8 MiB" in decay  # (3 + 10 + 4000) * 1000 bytes = 3.83 MiB
    assert broken.count("| - ") == 11  # every measurement of a failed strategy is '-'
    assert table.rstrip().endswith(f"- [1] `{BROKEN}`: {ERROR_LINE}")


@pytest.mark.parametrize(
    ("figures", "raw", "sealed"),
    [({"pii_items": 0}, "-", "-"),  # nothing to measure
     ({}, "-", "-"),  # results without these figures
     ({"pii_items": 3, "pii_raw_max_s": 0.0, "pii_sealed_items": 0}, "0.0 s", "never sealed"),
     ({"pii_items": 3, "pii_raw_max_s": None, "pii_raw_at_end": 2, "pii_sealed_items": 0},
      "to the end (2 of 3)", "never sealed"),
     ({"pii_items": 3, "pii_raw_max_s": 7200.0, "pii_sealed_items": 2,
       "pii_sealed_max_s": None, "pii_sealed_at_end": 1}, "2.0 h", "to the end (1 of 2)")],
)  # fmt: skip
def test_pii_cells_say_raw_and_sealed_apart(
    results: dict[str, Any], figures: dict[str, Any], raw: str, sealed: str
) -> None:
    scenario = copy.deepcopy(results["scenarios"][0])
    metrics = scenario["strategies"][0]["metrics"]
    for key in [k for k in metrics if k.startswith("pii_")]:
        del metrics[key]
    metrics.update(figures)

    row = next(line for line in summary_table(scenario).splitlines() if TTL in line)

    assert f"| 0 | {raw} | {sealed} | 53 (3/10/40) |" in row


def test_every_footprint_series_has_its_own_line_style_marker_and_colour() -> None:
    styles = [series_style(n, 12) for n in range(12)]
    looks = {(s["color"], s["linestyle"], s["marker"]) for s in styles}
    assert len(looks) == 12
    widths = [s["linewidth"] for s in styles]
    assert widths == sorted(widths, reverse=True) and widths[0] > widths[-1]  # first widest
    assert all(s["markerfacecolor"] == "none" for s in styles)  # hollow: others show through


def test_footprint_axis_is_in_binary_units(results: dict[str, Any]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from memharness.report_plots import _recall_vs_footprint

    ok = [s for s in results["scenarios"][0]["strategies"] if s["status"] == "ok"]
    fig, ax = plt.subplots()
    try:
        assert _recall_vs_footprint(ax, ok)
        label = ax.get_xlabel()
        xs = sorted(float(x) for x in ax.collections[0].get_offsets()[:, 0])
    finally:
        plt.close(fig)
    # 53,000 and 4,013,000 bytes: in MiB, the unit of the largest.
    assert "(MiB; 1 KiB = 1024 B)" in label
    assert xs == pytest.approx([53_000 / 2**20, 4_013_000 / 2**20])


@pytest.mark.parametrize(
    ("n", "unit"), [(0, "B"), (1023, "B"), (1024, "KiB"), (5 * 2**20, "MiB"), (3 * 2**30, "GiB")]
)
def test_binary_unit_matches_human_bytes(n: int, unit: str) -> None:
    assert binary_unit(n)[0] == unit
    assert human_bytes(n).endswith(f" {unit}")


def test_summary_table_flags_leakage_and_escapes_pipes(results: dict[str, Any]) -> None:
    scenario = copy.deepcopy(results["scenarios"][0])
    scenario["strategies"][0]["metrics"]["leakage"] = 2
    scenario["strategies"][0]["label"] = "a|b"

    table = summary_table(scenario)

    assert "`a\\|b`" in table
    assert "| **2** ⚠ |" in table


def test_failed_error_from_a_bare_traceback_shows_the_exception_line() -> None:
    error = "Traceback (most recent call last):\n  File \"x.py\", line 1\nKeyError: 'ttl'\n"
    table = summary_table(_scenario("s", [_failed("x", "failed", error)]))

    assert "- [1] `x`: KeyError: 'ttl'" in table


def test_pareto_frontier_with_ties_and_dominated_points() -> None:
    points = [
        ("big-best", 300.0, 0.9),
        ("same-bytes-less-recall", 100.0, 0.4),  # dominated by "a" (bytes tie)
        ("a", 100.0, 0.5),
        ("more-bytes-same-recall", 200.0, 0.5),  # dominated by "a" (recall tie)
        ("a-twin", 100.0, 0.5),  # identical to "a": neither dominates the other
        ("tiny", 50.0, 0.3),
        ("worse-everywhere", 400.0, 0.2),
        ("big-best-twin-more-bytes", 301.0, 0.9),  # dominated by "big-best"
    ]

    assert pareto_frontier(points) == ["tiny", "a", "a-twin", "big-best"]


def _grid_point(value: int, *, recall: float, records: int) -> dict[str, Any]:
    point = _ok(f"importance[importance.base_s={value},importance.low_score=1]",
                recall=recall, stale=0.1, pii_s=0.0, records=records)  # fmt: skip
    point["footprint"]["series"] = point["footprint"]["series"][:10]
    return point


def test_a_grid_of_many_points_is_numbered_with_a_key_and_the_frontier_in_red(
    tmp_path: Path,
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from memharness.report_plots import _recall_vs_footprint

    # 8 points, three pairs on one spot; the frontier: 1 (cheapest), 2 and 3 (one spot),
    # 8 (best recall); 4 to 7 cost more than 2 and 3 for less recall.
    values = [86400, 1, 2, 3, 4, 5, 6, 8]
    recalls = [0.2, 0.5, 0.5, 0.4, 0.4, 0.3, 0.3, 0.9]
    records = [10, 100, 100, 200, 200, 300, 300, 400]
    strategies = [
        _grid_point(v, recall=r, records=n)
        for v, r, n in zip(values, recalls, records, strict=True)
    ]
    fig, ax = plt.subplots()
    try:
        assert _recall_vs_footprint(ax, strategies)
        marks = sorted(text.get_text() for text in ax.texts)
        key = {t.get_text(): t.get_color() for t in ax.get_legend().get_texts()}
    finally:
        plt.close(fig)

    assert marks == ["1", "2,3", "4,5", "6,7", "8"]  # numbers, one per spot
    for n, strategy in enumerate(strategies, start=1):
        assert f"{n}  {strategy['label']}" in key  # the key names every point
    red = {text for text, colour in key.items() if colour == "tab:red"}
    assert red == {f"{n}  {strategies[n - 1]['label']}" for n in (1, 2, 3, 8)}
    scenario = _scenario("sweep", strategies)
    paths = write_plots(tmp_path, {"scenarios": [scenario]})
    assert all(p.read_bytes().startswith(PNG_MAGIC) for p in paths)


def test_point_marks_label_few_short_points_in_place_and_number_the_rest() -> None:
    assert point_marks(["keep_all", "hybrid", TTL]) is None
    assert point_marks(["a", "b", "c", "d", "e"]) == ["1", "2", "3", "4", "5"]
    assert point_marks(["importance[importance.base_s=86400,importance.low_score=1]"]) == ["1"]
    assert number_runs([7, 1, 2, 3, 5, 8]) == "1-3,5,7,8"
    assert number_runs([4]) == "4"


def test_pareto_frontier_edge_cases() -> None:
    assert pareto_frontier([]) == []
    assert pareto_frontier([("only", 10.0, 0.0)]) == ["only"]
    assert pareto_frontier([("cheap", 1.0, 0.1), ("dear", 9.0, 0.1)]) == ["cheap"]


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(None, "-"), (12.0, "12.0 s"), (90.0, "1.5 min"), (86_400.0, "24.0 h"), (259_200, "3.0 d")],
)
def test_human_duration(seconds: float | None, text: str) -> None:
    assert human_duration(seconds) == text


@pytest.mark.parametrize(
    ("n", "text"),
    [
        (None, "-"),
        (900, "900 B"),
        (1536, "1.5 KiB"),
        (2 * 1024**2, "2.0 MiB"),
        (3 * 1024**3, "3.0 GiB"),
    ],
)
def test_human_bytes(n: int | None, text: str) -> None:
    assert human_bytes(n) == text


def test_downsample_keeps_ends_and_spaces_evenly() -> None:
    picked = downsample(5001)

    assert len(picked) == MAX_SERIES_POINTS
    assert picked[0] == 0
    assert picked[-1] == 5000
    assert {b - a for a, b in pairwise(picked)} <= {2, 3}
    assert downsample(10) == list(range(10))


def test_plot_stems_are_unique_when_a_run_repeats_a_scenario() -> None:
    first, second = _scenario("drift", []), _scenario("drift", [])
    second["seed"] = 8
    results = {"scenarios": [first, second, _scenario("a b/c", [])]}

    assert plot_stems(results) == ["drift-3f2a9c0d1e2b-s7", "drift-3f2a9c0d1e2b-s8", "a_b_c"]


def test_load_results_names_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ResultsError, match="cannot read") as info:
        load_results(tmp_path)

    assert str(tmp_path / "results.json") in str(info.value)


def test_load_results_names_a_file_with_invalid_json(tmp_path: Path) -> None:
    (tmp_path / "results.json").write_text('{"run_id": "x",\n  oops}', encoding="utf-8")

    with pytest.raises(ResultsError, match="invalid JSON at line 2") as info:
        load_results(tmp_path)

    assert str(tmp_path / "results.json") in str(info.value)


def test_load_results_rejects_json_that_is_not_a_results_document(tmp_path: Path) -> None:
    (tmp_path / "results.json").write_text("[1, 2]", encoding="utf-8")

    with pytest.raises(ResultsError, match="no 'scenarios' list"):
        load_results(tmp_path)


def test_a_tie_for_the_best_recall_is_not_bold() -> None:
    def entry(label: str, recall: float) -> dict[str, Any]:
        return {"label": label, "status": "ok", "metrics": {"recall_at_k": recall}}

    tied = summary_table({"strategies": [entry("a", 1.0), entry("b", 1.0), entry("c", 0.5)]})
    assert "**" not in tied
    alone = summary_table({"strategies": [entry("a", 1.0), entry("b", 0.9)]})
    assert "| **1.000** |" in alone and "| **0.900** |" not in alone

"""The A/B regression gate (memharness/ab): its statistics on synthetic samples, its git
plumbing, its history lines, and `memharness bench --ab` end to end on the null backend
(this tree against itself as a PATH: A/A passes; an injected 20% slowdown of one
operation fails that operation and only that one).

Fast and not flaky: the bootstrap is seeded; the null backend's primitives busy-wait 1 ms
(a floor that load can lengthen but not shorten), and both arms alternate call by call on
one CPU, so load lands on both alike. End to end, the decisions are on p50, which a few
preempted calls cannot move: with six rounds of 1 ms calls on a CPU shared with other
work, p95 intervals span 0.5-3x, so those runs tolerate +100% at p95 (`--t95 1`) rather
than let a tail made of preemptions decide a test; the p95 rule is tested on synthetic
samples above. The workers are not pinned (`--ab-cpu -1`): a real gate running at the
same time pins its workers to the last CPU, and sharing it stretched the null turn (five
busy waits) by 50%; unpinned, the scheduler moves the test's workers away from it.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from scipy.stats.mstats import hdquantiles

from memharness.ab.arms import AbError, default_ref, is_path, resolve_baseline
from memharness.ab.command import parse_inject
from memharness.ab.report import append_history, sla_history_line
from memharness.cli import main
from memharness.verdict.ab import (
    compare,
    label_swap_false_alarms,
    looks,
    op_verdict,
    paired_bootstrap,
    suspected,
)
from memharness.verdict.intervals import Verdict, decide, hd_quantiles

ROOT = Path(__file__).resolve().parents[1]
BACKGROUND = ("sweep.batch", "consolidate.session", "event.apply", "shard.replay")
THRESHOLDS = {0.5: 0.10, 0.95: 0.15}


def _rounds(
    rng: np.random.Generator, *, rounds: int = 24, calls: int = 30, scale: float = 1.0
) -> list[np.ndarray]:
    """Latency-like samples: a per-round level (load) times per-call noise."""
    levels = rng.lognormal(0.0, 0.05, size=rounds)
    return [level * scale * rng.lognormal(0.0, 0.15, size=calls) for level in levels]


# --------------------------------------------------------------------------- statistics


@pytest.mark.parametrize("n", [2, 7, 100, 1001])
def test_hd_quantiles_equal_scipys(n: int) -> None:
    data = np.random.default_rng(n).exponential(1.0, size=n)
    probs = (0.1, 0.5, 0.95)
    expected = np.asarray(hdquantiles(data, prob=probs))
    assert np.allclose(hd_quantiles(data, probs), expected, rtol=1e-12, atol=0)
    # Vectorised over rows: every row its own estimate.
    rows = np.stack([data, data * 2])
    assert np.allclose(hd_quantiles(rows, probs), [expected, expected * 2], rtol=1e-12)


def test_identical_arms_pass_with_a_degenerate_interval() -> None:
    base = _rounds(np.random.default_rng(1))
    (p50, p95) = compare("op", base, [r.copy() for r in base], THRESHOLDS, comparisons=18)
    for c in (p50, p95):
        assert (c.ratio, c.low, c.high) == (1.0, 1.0, 1.0)
        assert c.verdict is Verdict.PASS
    assert op_verdict([p50, p95], final=True) is Verdict.PASS


def test_a_30_percent_slowdown_fails_at_both_quantiles() -> None:
    rng = np.random.default_rng(2)
    base = _rounds(rng)
    cand = [r * 1.3 * rng.lognormal(0.0, 0.02, size=r.size) for r in base]
    comparisons = compare("op", base, cand, THRESHOLDS, comparisons=18)
    for c in comparisons:
        assert c.verdict is Verdict.FAIL
        assert 1.0 + c.threshold < c.low <= c.ratio <= c.high
        assert c.ratio == pytest.approx(1.3, rel=0.03)
    assert op_verdict(comparisons, final=True) is Verdict.FAIL


def test_a_noisy_borderline_is_inconclusive_then_a_warning_not_a_failure() -> None:
    rng = np.random.default_rng(3)
    # 10% slower on average (right at T50), very noisy, few rounds: no verdict either way.
    base = [rng.lognormal(0.0, 0.5, size=10) for _ in range(8)]
    cand = [rng.lognormal(np.log(1.1), 0.5, size=10) for _ in range(8)]
    comparisons = compare("op", base, cand, THRESHOLDS, comparisons=18)
    p50 = comparisons[0]
    assert p50.low < 1.1 < p50.high
    assert p50.verdict is Verdict.INCONCLUSIVE
    assert op_verdict(comparisons, final=False) is Verdict.INCONCLUSIVE
    assert op_verdict(comparisons, final=True) is Verdict.WARN


def test_decision_rule_boundaries() -> None:
    assert decide(1.11, 1.3, 1.0 + 0.10) is Verdict.FAIL
    assert decide(0.9, 1.09, 1.0 + 0.10) is Verdict.PASS
    assert decide(1.05, 1.15, 1.0 + 0.10) is Verdict.INCONCLUSIVE
    assert decide(1.10, 1.10, 1.0 + 0.10) is Verdict.INCONCLUSIVE  # on the line: no claim


def test_the_bootstrap_is_paired_by_round() -> None:
    """A load level shared by both arms of a round cancels in the ratio; breaking the
    pairing (shuffling the candidate's rounds) must widen the interval."""
    rng = np.random.default_rng(4)
    levels = rng.lognormal(0.0, 0.4, size=24)  # strong round-to-round load swings
    base = [lv * rng.lognormal(0.0, 0.05, size=20) for lv in levels]
    cand = [lv * 1.2 * rng.lognormal(0.0, 0.05, size=20) for lv in levels]
    paired = paired_bootstrap(base, cand, (0.5,), resamples=2000)
    shuffled = [cand[i] for i in rng.permutation(24)]
    unpaired = paired_bootstrap(base, shuffled, (0.5,), resamples=2000)
    assert np.std(paired) * 3 < np.std(unpaired)
    assert np.exp(np.median(paired)) == pytest.approx(1.2, rel=0.03)


def test_p50_decides_a_pass_and_any_quantile_a_failure() -> None:
    """An operation PASSes on its p50 interval; a p95 that is merely inconclusive is
    reported, not a WARN; a p95 proven slower FAILs the operation."""
    base = _rounds(np.random.default_rng(7))
    p50, p95 = compare("op", base, [r.copy() for r in base], THRESHOLDS, comparisons=18)
    open_tail = dataclasses.replace(p95, verdict=Verdict.INCONCLUSIVE, ratio=1.05)
    assert op_verdict([p50, open_tail], final=True) is Verdict.PASS
    slow_tail = dataclasses.replace(p95, verdict=Verdict.FAIL)
    assert op_verdict([p50, slow_tail], final=True) is Verdict.FAIL
    open_median = dataclasses.replace(p50, verdict=Verdict.INCONCLUSIVE)
    assert op_verdict([open_median, p95], final=False) is Verdict.INCONCLUSIVE
    assert op_verdict([open_median, p95], final=True) is Verdict.WARN


def test_the_pass_bound_is_corrected_over_looks_only_the_fail_bound_over_everything() -> None:
    rng = np.random.default_rng(8)
    base, cand = _rounds(rng, rounds=8), _rounds(rng, rounds=8)
    both = compare("op", base, cand, THRESHOLDS, comparisons=72)[0]
    split = compare("op", base, cand, THRESHOLDS, comparisons=72, pass_comparisons=4)[0]
    assert split.low == both.low  # a FAIL needs the same evidence
    assert split.high < both.high  # a PASS is an intersection-union test: looks only
    assert split.upper_confidence == pytest.approx(1 - 0.05 / 4)


def test_the_gate_looks_every_lifetime_and_once_more_for_a_suspected_slowdown() -> None:
    assert looks(24, 8, 8) == [8, 16, 24, 32]
    assert looks(24, 8, 0) == [8, 16, 24]
    assert looks(6, 4, 0) == [4, 6]
    assert looks(3, 8, 0) == [3]


def test_bonferroni_widens_the_interval_and_seeds_repeat() -> None:
    rng = np.random.default_rng(5)
    base, cand = _rounds(rng), _rounds(rng)
    one = compare("op", base, cand, THRESHOLDS, comparisons=1)[0]
    many = compare("op", base, cand, THRESHOLDS, comparisons=18)[0]
    assert many.low < one.low and one.high < many.high
    assert many.confidence == pytest.approx(1 - 2 * 0.05 / 18)
    assert compare("op", base, cand, THRESHOLDS, comparisons=18)[0] == many


def test_only_a_suspected_slowdown_earns_more_rounds() -> None:
    rng = np.random.default_rng(6)
    base = [rng.lognormal(0.0, 0.5, size=10) for _ in range(8)]
    above = compare("op", base, [r * 1.25 for r in _shuffle(rng, base)], THRESHOLDS, comparisons=18)
    below = compare("op", base, [r * 0.98 for r in _shuffle(rng, base)], THRESHOLDS, comparisons=18)
    assert above[0].verdict is Verdict.INCONCLUSIVE and above[0].ratio > 1.1
    assert suspected(above)
    assert below[0].verdict is Verdict.INCONCLUSIVE and below[0].ratio < 1.1
    assert not suspected(below)
    # An operation that already FAILs at one quantile needs no more rounds for the other.
    failing = dataclasses.replace(above[1], verdict=Verdict.FAIL)
    assert not suspected([above[0], failing])


def _shuffle(rng: np.random.Generator, rounds: list[np.ndarray]) -> list[np.ndarray]:
    return [rounds[i] for i in rng.permutation(len(rounds))]


def test_label_swaps_see_no_difference_even_when_there_is_one() -> None:
    rng = np.random.default_rng(7)
    base = _rounds(rng)
    same = [r * rng.lognormal(0.0, 0.05, size=r.size) for r in base]
    slower = [r * 1.3 for r in same]
    for cand in (same, slower):
        c = compare("op", base, cand, THRESHOLDS, comparisons=18)[0]
        share, spread = label_swap_false_alarms(base, cand, c, swaps=300)
        assert share == 0.0
        assert 1.0 <= spread < 1.1  # balanced swaps cancel the real 30%


# --------------------------------------------------------------------------- arms, options


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_default_baseline_is_head_minus_one_on_main_and_the_merge_base_elsewhere(
    tmp_path: Path,
) -> None:
    path = tmp_path / "r"
    path.mkdir()
    _git(path, "init", "-q", "-b", "main")
    _git(path, "config", "user.email", "t@example.com")
    _git(path, "config", "user.name", "t")
    shas = []
    for index in range(3):
        (path / "f.txt").write_text(str(index))
        _git(path, "add", "f.txt")
        _git(path, "commit", "-qm", f"c{index}")
        shas.append(_git(path, "rev-parse", "HEAD"))
    assert default_ref(path) == "HEAD~1"
    _git(path, "checkout", "-qb", "topic", shas[1])
    (path / "g.txt").write_text("x")
    _git(path, "add", "g.txt")
    _git(path, "commit", "-qm", "topic")
    assert default_ref(path) == shas[1]
    # A worktree of the default ref, removed by the cleanup.
    tree, remove = resolve_baseline(path, "auto", tmp_path / "work")
    assert tree.sha == shas[1] and (tree.tree / "f.txt").read_text() == "1"
    remove()
    assert not tree.tree.exists()
    assert str(tree.tree) not in _git(path, "worktree", "list")
    with pytest.raises(AbError, match="not a commit"):
        resolve_baseline(path, "no-such-ref", tmp_path / "work")


def test_a_path_needs_a_separator_and_an_existing_directory(tmp_path: Path) -> None:
    assert is_path(str(tmp_path))
    assert not is_path(str(tmp_path / "missing"))
    assert not is_path("main")  # a bare word is a ref, even if ./main existed


def test_inject_parses_op_and_fraction() -> None:
    import click

    assert parse_inject("stm.query[cached]=0.2") == ("stm.query[cached]", 0.2)
    for bad in ("stm.query[cached]", "nope=0.2", "stm.add=x", "stm.add=0"):
        with pytest.raises(click.BadParameter):
            parse_inject(bad)


def test_history_lines_are_flat_and_appended(tmp_path: Path) -> None:
    bench_doc = {
        "run_id": "r1",
        "finished_at": "2026-01-01T00:00:00+00:00",
        "embedder": "minilm",
        "size": "small",
        "gate": {"passed": False},
        "loadavg_end": [1.5, 1.0, 0.5],
        "ops": [
            {
                "op": "session.get",
                "backend": "real",
                "p50_ms": 0.2,
                "p95_ms": 0.4,
                "verdict": "PASS",
            },
            {
                "op": "stm.add",
                "backend": "real",
                "p50_ms": 20.0,
                "p95_ms": 60.0,
                "verdict": "FAIL",
                "slowdown": 1.1,
            },
            {"op": "stm.add", "backend": "null", "p50_ms": 0.1, "p95_ms": 0.2, "verdict": "PASS"},
        ],
    }
    line = sla_history_line(bench_doc, commit="abc", dirty=False)
    assert line["gate"] == "sla" and line["verdict"] == "FAIL" and line["commit"] == "abc"
    assert line["ops.stm.add.p95_ms"] == 60.0 and line["ops.stm.add.verdict"] == "FAIL"
    assert line["ops.stm.add.slowdown"] == 1.1  # the machine's, beside the operation
    assert line["ops.session.get.slowdown"] == 1.0  # a bench.json from before the probe
    path = tmp_path / "history.jsonl"
    append_history(path, line)
    append_history(path, line)
    rows = [json.loads(text) for text in path.read_text().splitlines()]
    assert len(rows) == 2
    assert all(not isinstance(v, dict | list) for row in rows for v in row.values())


# --------------------------------------------------------------------------- end to end


def _gate(tmp_path: Path, *extra: str) -> tuple[int, str, dict]:
    args = [
        *("bench", "--ab", str(ROOT), "--backend", "null"),
        *("--ab-rounds", "6", "--restart-every", "3", "--ab-calls-scale", "0.5"),
        *("--ab-extra-rounds", "0", "--t95", "1", "--ab-cpu", "-1"),
        *("--run-id", "t", "--report-dir", str(tmp_path)),
        *extra,
    ]
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    path = tmp_path / "t" / "ab.json"
    doc = json.loads(path.read_text()) if path.is_file() else {}
    return result.exit_code, result.output, doc


def test_a_tree_against_itself_runs_end_to_end(tmp_path: Path) -> None:
    """Every operation judged, each arm from its tree, the verdict in the exit code and the
    history. Not that nothing FAILs: how often identical trees FAIL (the false-alarm rate)
    is the calibration's measurement (bench/ab_calibrate.py), and six rounds on a machine
    busy with the rest of the suite have made one background operation FAIL."""
    code, output, doc = _gate(tmp_path)
    verdicts = {op["op"]: op["verdict"] for op in doc["ops"]}
    assert code == (1 if "FAIL" in verdicts.values() else 0), output
    assert len(verdicts) == 13 and set(verdicts.values()) <= {"PASS", "WARN", "FAIL", "INFO"}
    # The background operations are measured and reported, not gated.
    assert {verdicts[op] for op in BACKGROUND} == {"INFO"} and doc["new_ops"] == {}
    assert "reported, not gated: sweep.batch p50" in output
    assert doc["strategy"] == "hybrid"
    assert all({"p50", "p95"} <= set(op) for op in doc["ops"]), output
    # Each arm's reference came from its own tree (here both: this checkout).
    files = {w["arm"]: w["reference_file"] for w in doc["workers"]}
    assert files == dict.fromkeys(
        ("baseline", "candidate"), str(ROOT / "reference" / "__init__.py")
    )
    # It looks after rounds 3 and 6 and stops at the first look where all is decided.
    assert doc["rule"]["looks"] == [3, 6] and doc["rounds_run"] in (3, 6)
    assert doc["loadavg"]["start"] and doc["loadavg"]["end"]
    history = [json.loads(x) for x in (tmp_path / "history.jsonl").read_text().splitlines()]
    assert history[-1]["gate"] == "ab" and history[-1]["verdict"] == doc["verdict"]
    assert {op: history[-1][f"ops.{op}.verdict"] for op in verdicts} == verdicts
    assert f"A/B gate {doc['verdict']}" in output


def test_an_injected_slowdown_fails_that_operation_only(tmp_path: Path) -> None:
    code, output, doc = _gate(tmp_path, "--inject", "stm.query[cached]=0.2")
    assert code == 1, output
    ops = {op["op"]: op for op in doc["ops"]}
    failed = [name for name, op in ops.items() if op["verdict"] == "FAIL"]
    assert failed == ["stm.query[cached]"], output
    hit = ops["stm.query[cached]"]["p50"]
    assert hit["ci"][0] > 1.0 + hit["threshold"]
    # Each candidate worker (a lifetime per 3 rounds) measured its own share of the median.
    lifetimes = doc["rounds_run"] // 3
    assert len(doc["inject_ms"]) == lifetimes and all(ms > 0 for ms in doc["inject_ms"])
    # The failing operation is named, with how much slower and how sure.
    assert "FAIL stm.query[cached]: p50 +" in output and "CI of the ratio" in output


def test_an_operation_the_baseline_cannot_run_is_new_not_judged(tmp_path: Path) -> None:
    """A baseline that predates an operation (here: a `memharness` without the simulator's
    population, and no bench/sim_throughput.py, where it was before, so no shard replay)
    runs every other one; that one is timed on the candidate alone, reported NEW with the
    reason, and fails nothing."""
    tree = tmp_path / "old"
    shutil.copytree(ROOT / "reference", tree / "reference")
    (tree / "memharness").mkdir()
    (tree / "memharness" / "__init__.py").write_text("")
    (tree / "bench").mkdir()
    for name in ("__init__.py", "null_backend.py", "seed.py"):
        shutil.copy(ROOT / "bench" / name, tree / "bench" / name)
    args = [
        *("bench", "--ab", str(tree), "--backend", "null"),
        *("--ab-rounds", "3", "--restart-every", "3", "--ab-calls-scale", "0.3"),
        *("--ab-extra-rounds", "0", "--t50", "10", "--t95", "10", "--ab-cpu", "-1"),
        *("--run-id", "t", "--report-dir", str(tmp_path)),
    ]
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    doc = json.loads((tmp_path / "t" / "ab.json").read_text())
    ops = {op["op"]: op for op in doc["ops"]}
    assert list(doc["new_ops"]) == ["shard.replay"]
    assert "bench.sim_throughput" in doc["new_ops"]["shard.replay"]
    new = ops["shard.replay"]
    assert new["verdict"] == "NEW" and new["n_baseline"] == 0 and new["n_candidate"] >= 3
    assert new["p50"]["candidate_ms"] > 0
    judged = [op for name, op in ops.items() if name != "shard.replay"]
    assert len(judged) == 12 and all(op["n_baseline"] > 0 for op in judged)
    assert all(op["verdict"] in ("PASS", "WARN", "INFO") for op in judged), result.output
    assert "NEW shard.replay: the baseline cannot run it" in result.output
    history = json.loads((tmp_path / "history.jsonl").read_text().splitlines()[-1])
    assert history["ops.shard.replay.verdict"] == "NEW"


def test_a_baseline_without_what_the_worker_needs_is_named(tmp_path: Path) -> None:
    tree = tmp_path / "old"
    (tree / "bench").mkdir(parents=True)
    (tree / "bench" / "__init__.py").write_text("")
    (tree / "reference").symlink_to(ROOT / "reference", target_is_directory=True)
    args = ["bench", "--ab", str(tree), "--backend", "null", "--report-dir", str(tmp_path)]
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    assert result.exit_code == 2
    assert f"baseline: {tree}" in result.output
    assert "lacks bench.null_backend" in result.output


def test_options_of_the_two_gates_do_not_mix() -> None:
    runner = CliRunner()
    alone = runner.invoke(main, ["bench", "--inject", "stm.add=0.2"])
    assert alone.exit_code == 2 and "add --ab" in alone.output
    mixed = runner.invoke(main, ["bench", "--ab", "HEAD", "--ltm-1m"])
    assert mixed.exit_code == 2 and "no --ltm-1m" in mixed.output
    unknown = runner.invoke(main, ["bench", "--ab", "HEAD", "--inject", "stm.nope=0.2"])
    assert unknown.exit_code == 2 and "OP one of" in unknown.output

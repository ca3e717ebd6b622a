"""The simulator: ground truth, plans, and whole replays on Ray.

The replays prove the issue's promises: the same results with 1 or 3 workers; the same
quality figures on the in-memory and the embedded backends; and the hand-written suite's
known outcomes (no leakage, the oracle on top, keep_all staler than hybrid, a fixed TTL
over-forgetting across a long gap).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import ray
from click.testing import CliRunner
from pydantic import SecretStr

from memharness.cli import main
from memharness.run_inputs import file_scenario, generated_users
from memharness.scenarios import load_scenario, parse_scenario
from memharness.sim import ScenarioInput, SpecError, StrategySpec
from memharness.sim.plan import sweep_ticks
from memharness.sim.results import ResultWriter
from memharness.sim.runner import RunOptions, StrategyOutcome
from memharness.sim.simulator import Simulator
from memharness.sim.truth import FactState, UserTruth
from reference.crypto import generate_key
from reference.policy.loading import list_strategies
from reference.settings import Settings

SUITE = Path(__file__).resolve().parents[1] / "scenarios"
QUALITY = (
    "recall_at_k",
    "recall_stm_at_k",
    "recall_ltm_at_k",
    "stale_at_k",
    "missed_rate",
    "over_forget_rate",
    "unreachable_rate",
    "unstored_rate",
    "leakage",
    "pii_items",
    "pii_raw_max_s",
    "pii_raw_at_end",
    "pii_sealed_items",
    "pii_sealed_max_s",
    "pii_sealed_at_end",
    "turns",
    "probes",
    "needed",
)


# ---------------------------------------------------------------------- ground truth
def test_truth_follows_supersede_event_and_forget() -> None:
    user = load_scenario(SUITE / "drift.yaml").users[0]  # alice: window, then aisle
    truth = UserTruth.of(user)
    changed = truth.changes["seat_aisle"][0][0]
    assert truth.state("seat_window", changed - 1) is FactState.VALID
    assert truth.state("seat_window", changed) is FactState.STALE
    assert truth.state("seat_aisle", changed) is FactState.VALID
    first_probe = truth.needed_at["seat_window"][0]
    assert truth.needed_from("seat_window", first_probe)  # a sweep at the probe's moment
    assert not truth.needed_from("seat_window", first_probe + 1)


def test_truth_erased_is_final() -> None:
    scenario = parse_scenario(
        """
name: t
users:
  - id: a
    timeline:
      - {at: 100, session: s, say: My address is 1 Main St., facts: [{id: f, type: profile}]}
      - {at: 200, session: s, forget: forget my address, facts: [f]}
      - {at: 300, event: profile_updated, invalidates: [f]}
"""
    )
    truth = UserTruth.of(scenario.users[0])
    assert truth.state("f", 150) is FactState.VALID
    assert truth.state("f", 250) is FactState.ERASED
    assert truth.state("f", 400) is FactState.ERASED


# ---------------------------------------------------------------------- plans
def test_strategy_spec_parses_overrides_into_a_label() -> None:
    spec = StrategySpec.parse("fixed_ttl:ttl.default_s=86400")
    assert spec.label == "fixed_ttl[ttl.default_s=86400]"
    assert spec.strategy.ttl is not None and spec.strategy.ttl.default_s == 86400
    assert spec.strategy.fingerprint() != StrategySpec.parse("fixed_ttl").strategy.fingerprint()


@pytest.mark.parametrize(
    ("text", "needle"),
    [("no_such_strategy", "no_such_strategy"), ("fixed_ttl:ttl", "is not key=value"),
     ("fixed_ttl:ttl.default_s=-5", "ttl.default_s")],
)  # fmt: skip
def test_strategy_spec_errors_name_the_argument(text: str, needle: str) -> None:
    with pytest.raises(SpecError) as info:
        StrategySpec.parse(text)
    assert needle in str(info.value)


def test_every_step_has_a_sweep_within_one_interval_before_it() -> None:
    steps = [1000.0, 1299.0, 50_000.0, 50_001.0, 400_000.0]
    ticks = sweep_ticks(steps, 300.0, 21_600.0)
    for at in steps:
        assert any(at - 300.0 < t <= at for t in ticks)
    gaps = [b - a for a, b in itertools.pairwise(ticks)]
    assert max(gaps) <= 21_600.0  # idle stretches are swept too
    assert ticks == sorted(set(ticks))


# ---------------------------------------------------------------------- replays
def _settings(backend: str, tmp: Path) -> Settings:
    return Settings(
        backend=backend,  # type: ignore[arg-type]
        embedder="hashing",
        data_dir=tmp,
        prefix="simtest",
        encryption_key=SecretStr(generate_key()),
    )


def _inputs() -> list[ScenarioInput]:
    names = ("drift", "address_change", "forget_commands", "pii_disclosure", "long_gap")
    return [*(file_scenario(SUITE / f"{n}.yaml", None) for n in names), generated_users(12, 3)]


ALL = [StrategySpec.parse(s.name) for s in list_strategies()]


def simulate(
    settings: Settings,
    inputs: list[ScenarioInput],
    specs: list[StrategySpec],
    workers: int,
    cohort_users: int = RunOptions.cohort_users,
) -> dict[tuple[str, str], StrategyOutcome]:
    found: dict[tuple[str, str], StrategyOutcome] = {}
    options = RunOptions(workers=workers, cohort_users=cohort_users)
    with Simulator(settings, options, run_tag="t") as sim:
        for position, scenario in enumerate(inputs):

            def keep(outcome: StrategyOutcome, name: str = scenario.name) -> None:
                found[(name, outcome.spec.label)] = outcome

            sim.run_scenario(position, scenario, specs, on_result=keep)
    return found


def quality(outcome: StrategyOutcome) -> dict[str, Any]:
    assert outcome.status == "ok", outcome.error
    assert outcome.figures is not None
    return {key: outcome.figures["metrics"][key] for key in QUALITY}


def records(outcome: StrategyOutcome) -> list[Any]:
    assert outcome.figures is not None
    return [
        (p["at"], p["session"][0], p["stm"][0], p["ltm"][0])
        for p in outcome.figures["footprint"]["series"]
    ]


@pytest.fixture(scope="module")
def ray_session() -> Iterator[None]:
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def memory_one_worker(
    ray_session: None, tmp_path_factory: pytest.TempPathFactory
) -> dict[tuple[str, str], StrategyOutcome]:
    return simulate(_settings("memory", tmp_path_factory.mktemp("m1")), _inputs(), ALL, 1)


def test_one_or_three_workers_in_cohorts_give_the_same_results(
    memory_one_worker: dict[tuple[str, str], StrategyOutcome], tmp_path: Path
) -> None:
    # Three workers, each replaying its 4 generated users in cohorts of 3 and 1.
    three = simulate(_settings("memory", tmp_path), _inputs(), ALL, 3, cohort_users=3)
    assert three.keys() == memory_one_worker.keys()
    for key, outcome in memory_one_worker.items():
        assert quality(three[key]) == quality(outcome), key
        assert records(three[key]) == records(outcome), key
        assert three[key].figures["footprint"]["peak"] == outcome.figures["footprint"]["peak"]  # type: ignore[index]
        # The per-probe records and the ceiling merge across workers in scenario order.
        assert three[key].figures["probes"] == outcome.figures["probes"], key  # type: ignore[index]
        assert three[key].figures["ceiling"] == outcome.figures["ceiling"], key  # type: ignore[index]


def test_embedded_backends_give_the_quality_figures_of_the_memory_ones(
    memory_one_worker: dict[tuple[str, str], StrategyOutcome], tmp_path: Path
) -> None:
    embedded = simulate(_settings("embedded", tmp_path), _inputs(), ALL, 2)
    assert embedded.keys() == memory_one_worker.keys()
    for key, outcome in memory_one_worker.items():
        assert quality(embedded[key]) == quality(outcome), key
        assert records(embedded[key]) == records(outcome), key


def test_the_suite_shows_each_strategys_known_trade_off(
    memory_one_worker: dict[tuple[str, str], StrategyOutcome],
) -> None:
    m = {key: quality(outcome) for key, outcome in memory_one_worker.items()}
    scenarios = {name for name, _ in m}
    for name in scenarios:
        recalls = {label: m[(name, label)]["recall_at_k"] for n, label in m if n == name}
        assert all(m[(name, label)]["leakage"] == 0 for label in recalls), name
        assert recalls["oracle"] == max(recalls.values()), name
    # keep_all remembers every conversation and has no event rules: it returns what a
    # business event made stale; hybrid's events invalidate it. (In drift and
    # address_change a newer statement supersedes the older one under both.)
    generated = next(name for name in scenarios if name.startswith("generated"))
    assert m[(generated, "keep_all")]["stale_at_k"] > m[(generated, "hybrid")]["stale_at_k"]
    for name in ("drift", "address_change"):
        assert m[(name, "keep_all")]["stale_at_k"] >= m[(name, "hybrid")]["stale_at_k"], name
    assert m[("long_gap", "fixed_ttl")]["over_forget_rate"] > 0
    assert m[("long_gap", "keep_all")]["over_forget_rate"] == 0
    # The three marked statements: every strategy masks them on the way in (nothing in
    # plaintext); hybrid keeps the originals sealed until it anonymises them after 24 h,
    # keep_all never seals (what it keeps is masked).
    hybrid, keep_all = m[("pii_disclosure", "hybrid")], m[("pii_disclosure", "keep_all")]
    assert hybrid["pii_items"] == keep_all["pii_items"] == 3
    assert hybrid["pii_raw_max_s"] == keep_all["pii_raw_max_s"] == 0
    assert hybrid["pii_sealed_items"] >= 1 and hybrid["pii_sealed_at_end"] == 0
    assert 86_400 <= hybrid["pii_sealed_max_s"] <= 86_400 + 21_600  # to an idle tick
    assert keep_all["pii_sealed_items"] == 0 and keep_all["pii_sealed_max_s"] is None


@pytest.mark.parametrize("workers", [1, 2])  # sharing each strategy's users; or whole ones
def test_a_failing_strategy_is_recorded_and_the_others_complete_in_order(
    ray_session: None, tmp_path: Path, workers: int
) -> None:
    settings = _settings("memory", tmp_path).model_copy(update={"encryption_key": None})
    names = ["keep_all", "hybrid", "typed_ttl"]  # hybrid seals PII: it needs the key
    specs = [StrategySpec.parse(name) for name in names]
    found = simulate(settings, [file_scenario(SUITE / "drift.yaml", None)], specs, workers)
    assert [label for _, label in found] == names  # reported in the order given
    assert found[("drift", "hybrid")].status == "failed"
    assert "encryption" in (found[("drift", "hybrid")].error or "").lower()
    assert found[("drift", "keep_all")].status == "ok"
    assert found[("drift", "typed_ttl")].status == "ok"


def test_an_interrupt_keeps_the_finished_strategies(ray_session: None, tmp_path: Path) -> None:
    scenario = file_scenario(SUITE / "drift.yaml", None)
    writer = ResultWriter(tmp_path / "run", {"run_id": "r", "backend": "memory",
                                              "embedder": "hashing", "k": 5})  # fmt: skip
    writer.start_scenario(scenario)
    specs = [StrategySpec.parse("keep_all"), StrategySpec.parse("typed_ttl")]

    def stop_after_first(outcome: StrategyOutcome) -> None:
        writer.add(scenario, outcome)
        if outcome.status == "ok":
            raise KeyboardInterrupt

    with (
        pytest.raises(KeyboardInterrupt),
        Simulator(_settings("memory", tmp_path), RunOptions(workers=1), run_tag="i") as sim,
    ):
        sim.run_scenario(0, scenario, specs, on_result=stop_after_first)
    writer.finish("interrupted")
    document = json.loads((tmp_path / "run" / "results.json").read_text())
    kept = document["scenarios"][0]["strategies"]
    assert [s["label"] for s in kept] == ["keep_all"]
    assert (tmp_path / "run" / kept[0]["file"]).exists()
    assert document["status"] == "interrupted"


def test_run_command_writes_results_and_report(ray_session: None, tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main,
        ["run", "--scenario", str(SUITE / "drift.yaml"), "--strategy", "keep_all",
         "--strategy", "fixed_ttl:ttl.default_s=86400", "--backend", "memory",
         "--embedder", "hashing", "--workers", "2", "--out", str(tmp_path), "--run-id", "smoke"],
        env={"MEMH_DATA_DIR": str(tmp_path / "data")},
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    # Progress on stderr, piped (not a terminal): a line as each phase starts and ends.
    assert "\r" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if ": still running, " not in line]
    phases = [line.split(" ...")[0].split(": done in ")[0] for line in lines]
    assert phases == [
        phase
        for title in (
            "starting Ray and 2 worker(s), each loading its embedder",
            "embedding ahead: drift, 3 users on 2 worker(s)",  # all of them on each
            "replaying drift under 2 strategies, 2 at a time",
            f"writing the report in {tmp_path / 'smoke'}",
        )
        for phase in (title, title)
    ], result.stderr
    assert "Token authentication" not in result.stderr  # Ray's notice: with -v only
    # The terminal: tables for people (no Markdown), the ceiling said once, the run's end.
    out = result.stdout
    assert "|" not in out and "`" not in out and "**" not in out
    # By default a line per scenario; its tables go to details.txt (-v prints them).
    assert "== drift (3 users): recall " in out and "dense ceiling (" not in out
    details = (tmp_path / "smoke" / "details.txt").read_text()
    assert details.count("dense ceiling (") == 2  # its row, and the line that says what it is
    assert max(len(line) for line in out.splitlines()) <= 120
    assert "== over the run's one scenario" in out and "frontier" in out
    assert "Recommended: " in out or "No recommendation" in out
    assert out.index("== over the run's") < out.index("report: ")
    run_dir = tmp_path / "smoke"
    document = json.loads((run_dir / "results.json").read_text())
    assert document["status"] == "complete"
    entries = document["scenarios"][0]["strategies"]
    assert [e["label"] for e in entries] == ["keep_all", "fixed_ttl[ttl.default_s=86400]"]
    for entry in entries:
        own = json.loads((run_dir / entry["file"]).read_text())
        assert own["metrics"] == entry["metrics"]
        assert entry["file"].startswith(f"drift-{document['scenarios'][0]['hash']}-")
    summary = (run_dir / "summary.md").read_text()
    assert "keep_all" in summary and "## Over the run's one scenario" in summary
    assert (run_dir / "drift-recall-vs-footprint.png").stat().st_size > 0
    again = CliRunner().invoke(
        main, ["run", "--scenario", str(SUITE / "drift.yaml"), "--out", str(tmp_path),
               "--run-id", "smoke", "--backend", "memory"],
    )  # fmt: skip
    assert again.exit_code != 0 and "exists" in again.output


def test_latencies_bin_whole_microseconds_at_least_one() -> None:
    """A replay's latencies, binned at the end: each value in whole microseconds,
    rounded half to even (as `round`), never below 1; ops outside LATENCY_OPS ignored."""
    from collections import Counter

    from hdrh.histogram import HdrHistogram

    from memharness.sim.tally import Latencies, new_histogram

    def recorded(histogram: HdrHistogram) -> Counter[int]:
        return Counter(
            {
                i.value_iterated_to: i.count_at_value_iterated_to
                for i in histogram.get_recorded_iterator()
            }
        )

    values = [0.0, 0.0004, 0.0015, 0.0025, 0.187, 0.187, 12.3456, 250.0]
    latencies = Latencies()
    for ms in values[:4]:
        latencies.record("sweep", ms)
    latencies.record_all({"sweep": values[4], "not-an-op": 1.0})
    for ms in values[5:]:
        latencies.record_all({"sweep": ms, "turn": ms})
    encoded = {op: HdrHistogram.decode(h) for op, h in latencies.encoded().items()}
    assert "not-an-op" not in encoded

    expected = Counter(max(1, round(ms * 1000.0)) for ms in values)
    assert expected == Counter({1: 2, 2: 2, 187: 2, 12346: 1, 250000: 1})
    bucketed = new_histogram()  # HDR keeps 3 significant digits: compare on its buckets
    for micros, n in expected.items():
        bucketed.record_value(micros, n)
    assert recorded(encoded["sweep"]) == recorded(bucketed)
    assert encoded["turn"].get_total_count() == 3
    assert encoded["recall"].get_total_count() == 0

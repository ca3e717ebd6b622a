"""Which runs a plan reads, chosen by what they measured: the strategy, then the population.

Demand (a step-load run, optionally a bench run) and footprint (a simulator run) must
come from the same strategy. A load or bench run names its strategy at the top of its
file (`"strategy"`); a file that names none is taken as a run of the stores'
defaults (`store_defaults`, `reference.factory.default_strategy`). A simulator run holds one
entry per strategy label. Among runs under `reports/`, the newest whose strategy matches
is taken; a run given by option must match, or the plan is refused with an error naming
the option, the run's strategy and what to pass instead.

A multi-strategy load (`memharness load --strategy A --strategy B`) writes one run
directory per strategy and `<run-id>/load_strategies.json` listing them: giving that
directory to `--load` gives all of its runs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memharness.capacity.inputs import KINDS, RunError, find_runs

__all__ = [
    "ALL",
    "NO_STRATEGY",
    "Choice",
    "RunStrategy",
    "choose_runs",
    "expand_load",
    "run_strategy",
    "sim_strategies",
]

#: The strategy of a run that does not record one: the stores' defaults.
NO_STRATEGY = "store_defaults"
#: `--strategy all`: every strategy that both a load run and a simulator run have.
ALL = "all"
_MAKE = {
    "load": "memharness load --strategy {s} --rates auto --step-duration 10s",
    "bench": "memharness bench --strategy {s}",
    "sim": "memharness run --strategy {s} --scenario SCENARIO.yaml",
}
_OPTION = {"load": "--load", "bench": "--bench", "sim": "--sim"}


@dataclass(frozen=True)
class RunStrategy:
    """A load or bench run and the strategy it ran under."""

    path: Path
    strategy: str
    #: False when the file names no strategy: taken as the stores' defaults.
    recorded: bool
    fingerprint: str | None = None

    def describe(self) -> str:
        note = "" if self.recorded else ", no strategy recorded: the stores' defaults"
        return f"{self.path} ({self.strategy}{note})"


def _json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise RunError(f"{path}: cannot be read: {exc}") from None
    if not isinstance(data, dict):
        raise RunError(f"{path}: not a JSON object")
    return data


def run_strategy(directory: Path, kind: str) -> RunStrategy:
    """The strategy of a load (`steps.json`) or bench (`bench.json`) run."""
    data = _json(directory / KINDS[kind])
    name = data.get("strategy")
    if isinstance(name, str) and name:
        return RunStrategy(directory, name, True, data.get("strategy_fingerprint"))
    return RunStrategy(directory, NO_STRATEGY, False)


def sim_strategies(directory: Path) -> dict[str, str | None]:
    """Strategy label -> fingerprint of each strategy of a simulator run with a footprint."""
    data = _json(directory / KINDS["sim"])
    found: dict[str, str | None] = {}
    for scenario in data.get("scenarios") or []:
        for entry in scenario.get("strategies") or []:
            if entry.get("status") == "ok" and (entry.get("footprint") or {}).get("series"):
                found[str(entry.get("label"))] = entry.get("fingerprint")
    return found


def _sim_users(directory: Path) -> int:
    data = _json(directory / KINDS["sim"])
    return max((int(s.get("users") or 0) for s in data.get("scenarios") or []), default=0)


def expand_load(given: Path) -> list[Path]:
    """The load run directories `given` names: a run (its directory or steps.json), or a
    multi-strategy load's directory (or its load_strategies.json): each of its runs."""
    directory = given.parent if given.is_file() else given
    listing = directory / "load_strategies.json"
    if (directory / KINDS["load"]).is_file():
        return [directory]
    if listing.is_file():
        runs = []
        for entry in _json(listing).get("runs") or []:
            name = Path(str(entry.get("dir") or ""))
            candidates = [name, directory.parent / name, directory / name]
            found = next((c for c in candidates if (c / KINDS["load"]).is_file()), None)
            if found is None:
                raise RunError(
                    f"--load {given}: {listing} lists {name}, which has no steps.json "
                    "(not a step-load run: was it made with --rates?)"
                )
            runs.append(found)
        if runs:
            return runs
    raise RunError(
        f"--load {given}: not a step-load run (no steps.json or load_strategies.json there); "
        "make one with: memharness load --strategy S --rates auto"
    )


@dataclass
class Choice:
    """The runs one strategy's plan reads, and how each was chosen."""

    strategy: str
    load: RunStrategy
    load_chosen: str
    bench: RunStrategy | None = None
    bench_chosen: str = ""
    sims: list[Path] = field(default_factory=list)
    sim_chosen: str = ""
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _strategies_text(runs: list[RunStrategy]) -> str:
    return "; ".join(r.describe() for r in runs) or "none"


def _pick_load(
    strategy: str, given: list[RunStrategy], found: list[RunStrategy], reports: Path, source: str
) -> tuple[RunStrategy, str]:
    if given:
        match = [r for r in given if r.strategy == strategy]
        if match:
            return match[0], "given"
        others = sorted({r.strategy for r in given})
        raise RunError(
            f"strategy mismatch: {source} asks for {strategy!r}, but --load gives "
            f"{_strategies_text(given)}. Pass --strategy {' --strategy '.join(others)} to plan "
            f"for what was measured, or --load with a run of `{_MAKE['load'].format(s=strategy)}`"
        )
    match = [r for r in found if r.strategy == strategy]
    if match:
        return match[0], f"newest under {reports}/ with strategy {strategy}"
    have = sorted({r.strategy for r in found})
    raise RunError(
        f"no step-load run with strategy {strategy!r} under {reports}/ ({source} asks for it; "
        f"the load runs there have: {', '.join(have) or 'none'}). Make one with "
        f"`{_MAKE['load'].format(s=strategy)}`, or pass --load RUN"
    )


def _pick_sims(
    strategy: str, given: list[Path], reports: Path, source: str
) -> tuple[list[Path], str, list[str]]:
    """The plan's simulator run first, then a smaller population for validation."""
    if given:
        for path in given:
            have = sim_strategies(path)
            if strategy not in have:
                raise RunError(
                    f"strategy mismatch: {source} asks for {strategy!r}, but --sim {path} has "
                    f"{', '.join(sorted(have)) or 'no strategy with a footprint'}. Pass --sim "
                    f"with a run of `{_MAKE['sim'].format(s=strategy)}`"
                )
        return sorted(given, key=_sim_users, reverse=True), "given", []
    found = [p for p in find_runs(reports, "sim") if strategy in sim_strategies(p)]
    if not found:
        return (
            [],
            "",
            [
                f"memory not planned for {strategy}: no simulator run with it under {reports}/ "
                f"(make one with `{_MAKE['sim'].format(s=strategy)}`, or pass --sim RUN)"
            ],
        )
    plan = found[0]
    chosen = [plan]
    smaller = [p for p in found[1:] if _sim_users(p) < _sim_users(plan)]
    if smaller:
        chosen.append(smaller[0])
    return chosen, f"newest under {reports}/ with strategy {strategy}", []


def _pick_bench(
    strategy: str, given: list[RunStrategy], found: list[RunStrategy], reports: Path, source: str
) -> tuple[RunStrategy | None, str, list[str]]:
    if given:
        match = [r for r in given if r.strategy == strategy]
        if match:
            return match[0], "given", []
        raise RunError(
            f"strategy mismatch: {source} asks for {strategy!r}, but --bench gives "
            f"{_strategies_text(given)}. Pass --bench with a run of "
            f"`{_MAKE['bench'].format(s=strategy)}`, or leave --bench out"
        )
    match = [r for r in found if r.strategy == strategy]
    if match:
        return match[0], f"newest under {reports}/ with strategy {strategy}", []
    return (
        None,
        "",
        [
            f"no bench run with strategy {strategy} under {reports}/ (optional; "
            f"`{_MAKE['bench'].format(s=strategy)}` makes one)"
        ],
    )


def choose_runs(
    strategies: list[str],
    *,
    source: str,
    reports: Path,
    load_given: tuple[Path, ...] = (),
    bench_given: tuple[Path, ...] = (),
    sim_given: tuple[Path, ...] = (),
) -> list[Choice]:
    """One `Choice` per strategy (`[ALL]`: every strategy the load and simulator runs share).

    `source` names where the strategies come from in errors (the target file or the
    `--strategy` option). Raises `RunError` naming the option and what to pass."""
    given_loads = [run_strategy(p, "load") for g in load_given for p in expand_load(g)]
    found_loads = (
        [] if given_loads else [run_strategy(p, "load") for p in find_runs(reports, "load")]
    )
    given_benches = []
    for path in bench_given:
        directory = path.parent if path.is_file() else path
        if not (directory / KINDS["bench"]).is_file():
            raise RunError(f"--bench {path}: not a bench run (no bench.json there)")
        given_benches.append(run_strategy(directory, "bench"))
    found_benches = (
        [] if given_benches else [run_strategy(p, "bench") for p in find_runs(reports, "bench")]
    )
    for path in sim_given:
        directory = path.parent if path.is_file() else path
        if not (directory / KINDS["sim"]).is_file():
            raise RunError(f"--sim {path}: not a simulator run (no results.json there)")
    sims = [p.parent if p.is_file() else p for p in sim_given]
    if strategies == [ALL]:
        loads = given_loads or found_loads
        sim_dirs = sims or find_runs(reports, "sim")
        in_sims = set().union(*(sim_strategies(p) for p in sim_dirs)) if sim_dirs else set()
        strategies = sorted({r.strategy for r in loads} & in_sims)
        if not strategies:
            raise RunError(
                f"--strategy all: no strategy is in both a load run ({_strategies_text(loads)}) "
                f"and a simulator run ({', '.join(sorted(in_sims)) or 'none'}); name one with "
                "--strategy S"
            )
        source = "--strategy all"
    choices = []
    for strategy in strategies:
        load, load_how = _pick_load(strategy, given_loads, found_loads, reports, source)
        bench, bench_how, bench_notes = _pick_bench(
            strategy, given_benches, found_benches, reports, source
        )
        sim_paths, sim_how, sim_warnings = _pick_sims(strategy, sims, reports, source)
        choice = Choice(strategy, load, load_how, bench, bench_how, sim_paths, sim_how)
        choice.notes += bench_notes
        choice.warnings += sim_warnings
        if not load.recorded:
            choice.notes.append(
                f"load run {load.path} records no strategy: it ran the stores' defaults "
                f"({NO_STRATEGY}), before strategies were recorded"
            )
        if sim_paths and load.fingerprint:
            fingerprint = sim_strategies(sim_paths[0]).get(strategy)
            if fingerprint and fingerprint != load.fingerprint:
                raise RunError(
                    f"{strategy}: load run {load.path} ran it with other settings (fingerprint "
                    f"{load.fingerprint}) than simulator run {sim_paths[0]} ({fingerprint}); "
                    "pass --load and --sim runs of the same configuration"
                )
        choices.append(choice)
    return choices

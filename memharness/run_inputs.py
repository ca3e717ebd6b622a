"""The scenarios `memharness run` replays: the hand-written suite, scenario files, and
generated users, each as a `ScenarioInput` with the hash that names its results."""

from __future__ import annotations

from pathlib import Path

import click

from memharness.scenarios import DOMAINS, iter_users, load_scenario
from memharness.scenarios.generate import user_data
from memharness.scenarios.model import User
from memharness.sim.plan import ScenarioInput, scenario_hash

SUITE_DIR = Path(__file__).resolve().parents[1] / "scenarios"


def suite_files(directory: Path = SUITE_DIR) -> list[Path]:
    """The hand-written scenarios, in name order."""
    files = sorted(directory.glob("*.yaml"))
    if not files:
        raise click.UsageError(f"no scenarios in {directory}; pass --scenario FILE")
    return files


def generated_users(users: int, seed: int) -> ScenarioInput:
    """`users` generated users, split evenly over the domains (ids `<domain>-<n>`)."""
    built: list[User] = []
    share, extra = divmod(users, len(DOMAINS))
    for d, domain in enumerate(DOMAINS):
        count = share + (d < extra)
        if count == 0:
            continue
        for user_id, steps, _ in iter_users(domain=domain, users=count, seed=seed):
            built.append(User.model_validate(user_data(f"{domain}-{user_id}", steps)))
    name = f"generated-{users}"
    return ScenarioInput(name, scenario_hash(name, built), f"generated --seed {seed}", seed, built)


def population(domain: str, users: int, seed: int) -> ScenarioInput:
    """`users` generated users of one domain (ids as generated), named
    `<domain>-<users>-<seed>`: the population the simulator's benchmarks replay
    (bench/sim_throughput.py, bench/shard_replay.py, the A/B gate's `shard.replay`)."""
    built = [
        User.model_validate({"id": user_id, "timeline": steps})
        for user_id, steps, _ in iter_users(domain=domain, users=users, seed=seed)
    ]
    name = f"{domain}-{users}-{seed}"
    return ScenarioInput(name, scenario_hash(name, built), "bench", seed, built)


def file_scenario(path: Path, users: int | None) -> ScenarioInput:
    """The scenario of a file, cut to its first `users` users when given."""
    scenario = load_scenario(path)
    chosen = scenario.users[:users] if users else scenario.users
    return ScenarioInput(
        scenario.name, scenario_hash(scenario.name, chosen), str(path), scenario.seed, chosen
    )

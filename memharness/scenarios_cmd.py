"""`memharness scenarios`: validate, describe, generate and import scenario files."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import click

from memharness.scenarios.generate import DOMAINS, generate_scenario
from memharness.scenarios.loader import ScenarioError, write_scenario
from memharness.scenarios.locomo import LocomoError, convert_locomo, read_locomo
from memharness.scenarios.stats import file_stats, scenario_stats
from memharness.scenarios.stream import stream_scenario


@click.group()
def scenarios() -> None:
    """Scenario files: validate, stats, generate, import-locomo."""


@scenarios.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--strict", is_flag=True, help="warnings fail the check too (exit status 1)")
def validate(files: tuple[Path, ...], strict: bool) -> None:
    """Check scenario FILES; every error names the file, the line and the field.

    Warnings (a statement marked `sensitive` that lists no `pii` values: its PII cannot be
    measured) name them too; the file still replays, so they fail only with --strict.
    Files are read one user at a time, so 100,000-user files validate in flat memory.
    """
    failed = False
    for path in files:
        try:
            info = stream_scenario(path, lambda user: None)
        except ScenarioError as exc:
            click.echo(str(exc), err=True)
            failed = True
            continue
        for warning in info.warnings:
            click.echo(f"warning: {warning}", err=True)
        failed = failed or (strict and bool(info.warnings))
        found = f", {len(info.warnings)} warnings" if info.warnings else ""
        click.echo(f"{path}: ok ({info.name}, {info.users} users{found})")
    if failed:
        sys.exit(1)


@scenarios.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path))
def stats(files: tuple[Path, ...]) -> None:
    """Users, turns, facts, probes, events, forgets and the time span of each of FILES.

    A file with errors prints them and the others are still described (exit status 1).
    """
    failed = False
    for number, path in enumerate(files):
        try:
            name, found = file_stats(path)
        except ScenarioError as exc:
            click.echo(str(exc), err=True)
            failed = True
            continue
        if number:
            click.echo("")
        if len(files) > 1:
            click.echo(f"{'file':18} {path}")
        click.echo(f"{'scenario':18} {name}")
        for line in found.lines():
            click.echo(line)
    if failed:
        sys.exit(1)


@scenarios.command()
@click.option("--domain", type=click.Choice(DOMAINS), required=True)
@click.option("--users", type=click.IntRange(min=1), required=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option(
    "--zh-share",
    type=click.FloatRange(0.0, 1.0),
    default=0.5,
    show_default=True,
    help="share of users who speak Chinese (the rest English)",
)
@click.option("-o", "--output", type=click.Path(path_type=Path), required=True)
def generate(domain: str, users: int, seed: int, zh_share: float, output: Path) -> None:
    """Write a seeded scenario of N users in a domain (same seed, same bytes)."""
    started = time.perf_counter()
    with output.open("w", encoding="utf-8", newline="\n") as out:
        counts = generate_scenario(out, domain=domain, users=users, seed=seed, zh_share=zh_share)
    elapsed = time.perf_counter() - started
    episodes = " ".join(f"{k}={v}" for k, v in sorted(counts.items()))
    click.echo(f"{output}: {episodes} ({elapsed:.1f} s)")


@scenarios.command("import-locomo")
@click.argument("path", type=click.Path(path_type=Path))
@click.option("-o", "--output", type=click.Path(path_type=Path), required=True)
def import_locomo_cmd(path: Path, output: Path) -> None:
    """Turn LoCoMo's JSON at PATH into a scenario file.

    PATH is data/locomo10.json of https://github.com/snap-research/locomo (not shipped
    with memharness; tests/data/locomo_excerpt.json is a small excerpt of it)."""
    try:
        scenario, notes = convert_locomo(read_locomo(path), source=str(path))
    except (LocomoError, ScenarioError) as exc:
        raise click.ClickException(str(exc)) from None
    for note in notes:
        click.echo(f"note: {note}", err=True)
    with output.open("w", encoding="utf-8", newline="\n") as out:
        write_scenario(scenario, out)
    summary = scenario_stats(scenario)
    click.echo(
        f"{output}: {summary.users} conversations, {summary.turns} turns,"
        f" {summary.probes} probes, {summary.adversarial} adversarial kept apart"
    )

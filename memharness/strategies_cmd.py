"""`memharness strategies`: list the forgetting strategies, or show one as YAML."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import click

from memharness.tables import WIDTH, wrapped
from reference.policy.loading import BUILTINS, StrategyRegistry
from reference.policy.reach import findings, unreachable
from reference.policy.rules import ScopedRule
from reference.policy.strategy import Strategy, StrategyError

_FILE_OPTION = click.option(
    "--file",
    "files",
    multiple=True,
    type=click.Path(exists=True, path_type=Path),
    help="A user strategy YAML file, or a directory of them (repeatable).",
)


def _registry(files: tuple[Path, ...]) -> StrategyRegistry:
    registry = StrategyRegistry()
    try:
        for path in files:
            registry.register(path)
    except StrategyError as exc:
        raise click.ClickException(str(exc)) from None
    return registry


@click.group(invoke_without_command=True)
@_FILE_OPTION
@click.pass_context
def strategies(ctx: click.Context, files: tuple[Path, ...]) -> None:
    """List the forgetting strategies, one line each with their key parameters."""
    ctx.obj = files
    if ctx.invoked_subcommand is not None:
        return
    try:
        listed = _registry(files).all()
    except StrategyError as exc:
        raise click.ClickException(str(exc)) from None
    width = max(len(s.name) for s in listed)
    for strategy in listed:
        click.echo(f"{strategy.name:<{width}}  {strategy.description}  [{summary(strategy)}]")


@strategies.command("show")
@click.argument("name")
@_FILE_OPTION
@click.pass_context
def show(ctx: click.Context, name: str, files: tuple[Path, ...]) -> None:
    """Print the full configuration of strategy NAME (or a YAML file path) as YAML."""
    registry = _registry((*ctx.obj, *files))
    try:
        strategy = registry.load(name)
    except StrategyError as exc:
        raise click.ClickException(str(exc)) from None
    for line in [] if name in BUILTINS else unreachable(strategy):
        click.echo(textwrap.fill(f"warning: {line}", WIDTH, subsequent_indent="  "), err=True)
    click.echo(f"# fingerprint: {strategy.fingerprint()}")
    click.echo(strategy.to_yaml(), nl=False)


@strategies.command("check")
@click.argument("names", nargs=-1, required=True)
@click.pass_context
def check(ctx: click.Context, names: tuple[str, ...]) -> None:
    """Load each strategy NAME (or YAML file) and list the rules, types and layers it names
    that match nothing the reference stores (e.g. a TTL for `conversation` records, which
    the reference never writes); exit 1 when one matches nothing in a system under test's
    memories either (docs/strategies.md, rules that match nothing)."""
    registry = _registry(ctx.obj)
    dead = 0
    for name in names:
        try:
            strategy = registry.load(name)
        except StrategyError as exc:
            raise click.ClickException(str(exc)) from None
        found = findings(strategy)
        dead += sum(not finding.peers_follow for finding in found)
        click.echo(f"{name}:" + ("" if found else " every rule can match something"))
        for finding in found:
            click.echo(wrapped(finding.line, indent="  "), nl=False)
    if dead:
        sys.exit(1)


def summary(strategy: Strategy) -> str:
    """The key parameters of a strategy on one line, durations in human units."""
    parts: list[str] = []
    if strategy.ttl is not None:
        ttl = strategy.ttl
        typed = [f"{k}={duration(v)}" for k, v in ttl.by_type.items() if v is not None]
        parts.append(" ".join([f"ttl default={duration(ttl.default_s)}", *typed]))
    if strategy.sliding is not None:
        parts.append(
            f"sliding window={duration(strategy.sliding.window_s)}{_scope(strategy.sliding)}"
        )
    if (imp := strategy.importance) is not None:
        parts.append(
            f"importance base={duration(imp.base_s)} low<{imp.low_score:g}"
            f"->{duration(imp.low_score_ttl_s)} boost={imp.access_boost:g}"
            f" decay={imp.decay_per_day:g}/d"
            + (" from=written" if imp.ttl_from == "written" else "")
            + _scope(imp)
        )
    if strategy.decay is not None:
        parts.append(f"decay lambda={strategy.decay.lambda_per_day:g}/d{_scope(strategy.decay)}")
    if strategy.events:
        parts.append("events=" + ",".join(rule.event for rule in strategy.events))
    if strategy.pii is not None:
        parts.append(f"pii anonymise={duration(strategy.pii.anonymise_after_s)}")
    if (arch := strategy.archival) is not None:
        parts.append(
            f"archival inactive={duration(arch.inactive_s)} delete={duration(arch.delete_after_s)}"
        )
    if strategy.oracle:
        parts.append("oracle")
    if strategy.consolidates:  # `rules` is the default: only consolidation is news
        floor = strategy.consolidation_rule.min_importance
        parts.append("consolidate" + (f" importance>={floor:g}" if floor else ""))
    commands = strategy.forget_commands
    if not commands.enabled:  # on by default: only its absence is news
        parts.append("no forget commands")
    elif commands.confirm_everything:
        parts.append(f"forget-all confirmed within {duration(commands.confirm_within_s)}")
    return "; ".join(parts) or "no rules"


def _scope(rule: ScopedRule) -> str:
    # Only a narrowed scope is news: a rule covers every type of both layers by default.
    types = "" if rule.types is None else " types=" + ",".join(rule.types)
    layers = "" if len(rule.layers) == 2 else " layers=" + ",".join(rule.layers)
    return types + layers


def duration(seconds: float | None) -> str:
    """3600 -> '1h', 2592000 -> '30d', None -> 'never'."""
    if seconds is None:
        return "never"
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g}{unit}"
    return f"{seconds:g}s"

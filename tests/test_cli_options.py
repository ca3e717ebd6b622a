"""Options the commands share: every duration option reads the one duration grammar
(`reference.durations`), and `--backend` / `--embedder` are the same option wherever the
reference is built from settings. A bad value is a usage error naming the option."""

from __future__ import annotations

from collections.abc import Iterator

import click
import pytest
from click.testing import CliRunner

from memharness.cli import main
from memharness.cli_settings import DURATION, backend_option, embedder_option
from reference.durations import DurationError, parse_positive_duration

#: Options whose value is a duration, by command path.
DURATION_OPTIONS = {
    ("load", "--duration"),
    ("load", "--step-duration"),
    ("maintain", "--duration"),
    ("maintain", "--figures-every"),
}


def _commands(
    group: click.Group, path: tuple[str, ...] = ()
) -> Iterator[tuple[str, click.Command]]:
    for name, command in group.commands.items():
        yield " ".join((*path, name)), command
        if isinstance(command, click.Group):
            yield from _commands(command, (*path, name))


def test_every_duration_option_reads_the_one_grammar() -> None:
    found = {
        (path, option)
        for path, command in _commands(main)
        for param in command.params
        if isinstance(param, click.Option) and param.type is DURATION
        for option in param.opts
        if option.startswith("--")
    }
    assert found == DURATION_OPTIONS


@pytest.mark.parametrize(("text", "seconds"), [("90", 90), ("2m", 120), ("1h30m", 5400)])
def test_a_duration_option_takes_the_grammar_of_strategy_files(text: str, seconds: float) -> None:
    assert DURATION.convert(text, None, None) == seconds == parse_positive_duration(text)


@pytest.mark.parametrize(
    ("args", "option", "words"),
    [
        (["load", "--duration", "0"], "--duration", "must be more than 0"),
        (["load", "--duration", "5x"], "--duration", "unknown unit 'x'"),
        (["load", "--duration", "1.5s"], "--duration", "whole seconds"),
        (["load", "--step-duration", "-1m"], "--step-duration", "must not be negative"),
        (["maintain", "--figures-every", "soon"], "--figures-every", "is not a duration"),
        (["maintain", "--duration", "30m1h"], "--duration", "is not a duration"),
    ],
)
def test_a_bad_duration_is_a_usage_error_naming_the_option(
    args: list[str], option: str, words: str
) -> None:
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, result.output
    assert f"'{option}'" in result.output and words in result.output, result.output


def test_a_duration_of_zero_is_refused_where_a_positive_one_is_needed() -> None:
    with pytest.raises(DurationError, match="more than 0"):
        parse_positive_duration("0s")
    assert parse_positive_duration(0.5) == 0.5


@pytest.mark.parametrize(
    ("flag", "decorator"), [("--backend", backend_option), ("--embedder", embedder_option)]
)
def test_backend_and_embedder_are_one_option_everywhere(flag: str, decorator: object) -> None:
    (shared,) = _options_of(decorator)
    users = []
    for path, command in _commands(main):
        for param in command.params:
            if isinstance(param, click.Option) and flag in param.opts and path != "bench":
                users.append(path)
                assert param.to_info_dict() == shared.to_info_dict(), path
    # `bench --backend` is another option: the A/B gate's arms (embedded or null).
    assert sorted(users) == ["demo", "latency", "load", "run", "serve"]


def _options_of(decorator: object) -> list[click.Option]:
    """The options `decorator` declares, on a throwaway command."""
    command = decorator(click.command()(lambda **_: None))  # type: ignore[operator]
    return [p for p in command.params if isinstance(p, click.Option)]

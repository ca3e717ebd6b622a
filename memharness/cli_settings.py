"""What the commands share: settings from `MEMH_*` variables with the options that were
given, the `--backend` and `--embedder` options that override them, and the duration type
of every duration option (the grammar of `reference.durations`)."""

from __future__ import annotations

from typing import Any, get_args

import click
from pydantic import ValidationError

from reference.durations import DurationError, parse_positive_duration
from reference.settings import Settings

__all__ = ["DURATION", "backend_option", "embedder_option", "settings_from_options"]


def settings_from_options(**overrides: object) -> Settings:
    """Settings from MEMH_* variables, with command-line overrides that were given (not None)."""
    given = {key: value for key, value in overrides.items() if value is not None}
    try:
        return Settings(**given)  # type: ignore[arg-type]
    except ValidationError as exc:
        raise click.UsageError(f"invalid settings: {exc}") from None


def _choices(field: str) -> list[str]:
    return list(get_args(Settings.model_fields[field].annotation))


#: `--backend` of the commands that build the reference from settings (None: MEMH_BACKEND).
backend_option = click.option(
    "--backend",
    type=click.Choice(_choices("backend")),
    default=None,
    help="embedded: real Redis, Chroma and PostgreSQL+pgvector (embedded servers, or those "
    "MEMH_*_URL name); memory: in-memory stores with the same semantics, fast  "
    "[default: $MEMH_BACKEND, else embedded]",
)
#: `--embedder` of the same commands (None: MEMH_EMBEDDER).
embedder_option = click.option(
    "--embedder",
    type=click.Choice(_choices("embedder")),
    default=None,
    help="minilm: all-MiniLM-L6-v2; hashing: a fast deterministic stand-in for quick runs  "
    "[default: $MEMH_EMBEDDER, else minilm]",
)


class _Duration(click.ParamType):
    """A duration option: float seconds > 0 (90, 90s, 2m, 1.5h, 1h30m, 7d); anything else
    is a usage error naming the option and what is accepted."""

    name = "duration"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, float):
            return value
        try:
            return parse_positive_duration(value)
        except DurationError as exc:
            self.fail(str(exc), param, ctx)


DURATION = _Duration()

"""Settings for a command: `MEMH_*` variables, with the command-line options that were given."""

from __future__ import annotations

import click
from pydantic import ValidationError

from reference.settings import Settings


def settings_from_options(**overrides: object) -> Settings:
    """Settings from MEMH_* variables, with command-line overrides that were given (not None)."""
    given = {key: value for key, value in overrides.items() if value is not None}
    try:
        return Settings(**given)  # type: ignore[arg-type]
    except ValidationError as exc:
        raise click.UsageError(f"invalid settings: {exc}") from None

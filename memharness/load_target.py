"""`memharness load --target URL`: the checks made before a load against a service starts.

A target run drives a service that speaks the HTTP contract (`loadtests/
target_locustfile.py`) with the same plan, SLAs and reports as the in-process load. What
configures an in-process memory has no meaning against a service, and is refused naming
the option: the service's strategy, backends, embedder and clock are the service's own
(`--strategy` and `--grid` would only label a run they do not change; start the service
under the strategy wanted and name the run with `--run-id`). `--overload` judges the
memory's own process (RSS bounded, servers consistent), which a remote service is not.

The service must answer before anything starts: GET /v1/health with the key, so a
refused key or nothing listening is one clear line, not a run of failed turns.
"""

from __future__ import annotations

import os

import click

from loadtests.target import check_target, check_target_url
from memharness.load_contract import API_KEY_ENV

__all__ = [
    "api_key_option",
    "check_target_options",
    "refuse_stray_key",
    "target_option",
]

target_option = click.option(
    "--target",
    default=None,
    metavar="URL",
    help="Drive the memory service at URL over HTTP (the contract: docs/serve.md; "
    "docs/load.md) instead of the memory in-process: same plan, SLAs and reports, each "
    "round trip split into service time (Server-Timing) and network time. Its strategy, "
    "backends and clock are its own: --strategy, --grid, --time-scale, --backend, "
    "--embedder and --overload are refused with it.",
)
api_key_option = click.option(
    "--api-key",
    default=None,
    envvar=API_KEY_ENV,
    show_envvar=True,
    help="With --target: the tenant's key, sent as a bearer token.",
)


def refuse_stray_key() -> None:
    """--api-key typed without --target: a usage error (the variable alone is fine)."""
    context = click.get_current_context()
    if context.get_parameter_source("api_key") == click.core.ParameterSource.COMMANDLINE:
        raise click.UsageError("--api-key goes with --target URL")


def check_target_options(
    target: str,
    api_key: str | None,
    *,
    refused: dict[str, bool],
) -> tuple[str, str]:
    """The service's URL and key, checked, and the service answering its health check;
    raises a usage error naming the option otherwise. `refused` maps each option that
    has no meaning against a service to whether it was given."""
    given = [option for option, present in refused.items() if present]
    if given:
        raise click.UsageError(
            f"--target drives a service with its own strategy, backends and clock: "
            f"{', '.join(given)} cannot apply to it (start the service under the strategy "
            "wanted, and name the run with --run-id)"
        )
    try:
        url = check_target_url(target)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--target") from None
    key = api_key or os.environ.get(API_KEY_ENV, "")
    if not key.strip():
        raise click.UsageError(f"--target needs the tenant's key: --api-key KEY or {API_KEY_ENV}")
    problem = check_target(url, key.strip())
    if problem is not None:
        raise click.UsageError(f"--target {url}: {problem}")
    return url, key.strip()

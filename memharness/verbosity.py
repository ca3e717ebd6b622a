"""How much a command says: its own output always; the INFO logs and notices of the
libraries under it (Ray, Locust, pgserver) only with `memharness -v`.

`-v` is recorded in `MEMH_VERBOSE` so the processes a command starts (the Locust run of
`memharness load`, the maintenance process, Ray's workers) follow it too. Warnings and
errors of every library are shown either way, except the notices listed here that say
only that a library chose its default.
"""

from __future__ import annotations

import logging
import os
import sys

__all__ = ["VERBOSE_ENV", "configure", "locust_loglevel", "quiet_ray", "verbose"]

VERBOSE_ENV = "MEMH_VERBOSE"
#: Ray's WARNING that it enabled token authentication for a local cluster, its default
#: since 2.59 (it asks to set RAY_AUTH_MODE to opt out): a notice, not a problem.
RAY_AUTH_NOTICE_LOGGER = "ray._private.authentication"


def verbose() -> bool:
    """True when `-v` was given to this command or to the one that started this process."""
    return os.environ.get(VERBOSE_ENV, "").strip() not in ("", "0")


def configure(verbose_flag: bool) -> None:
    """Apply `-v` (the CLI's group calls this once): with it, or when the command that
    started this process had it, INFO logs of every logger go to stderr and child
    processes inherit the choice; without, logging is left as Python has it (warnings
    and errors only)."""
    if verbose_flag:
        os.environ[VERBOSE_ENV] = "1"
    if not verbose():
        return
    logging.basicConfig(stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger().setLevel(logging.INFO)


def locust_loglevel() -> str:
    """Locust's `--loglevel` for a run: INFO with -v, else WARNING (Locust's start and
    stop lines, its own statistics table and pgserver's commands stay out of it)."""
    return "INFO" if verbose() else "WARNING"


def quiet_ray() -> None:
    """Without -v: Ray's INFO lines and its token-authentication notice off (call after
    `import ray`, which sets the `ray` logger to INFO); its other warnings stay."""
    if verbose():
        return
    logging.getLogger("ray").setLevel(logging.WARNING)
    logging.getLogger(RAY_AUTH_NOTICE_LOGGER).setLevel(logging.ERROR)

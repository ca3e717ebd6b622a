"""What a load run does differently when its users drive a service over HTTP
(`memharness load --target URL`, `loadtests/target_locustfile.py`).

The plan, the pacing, the histograms, the SLA verdicts and the reports are the in-process
load's; what changes is around them:

- at init, no memory is built: the process checks the service (GET /v1/health with the
  key), warms it with one conversation over HTTP (then erases that user), and loads the
  scenario's timelines when one is played. The service's backends, strategy and clock
  are its own: the report names the URL, not them;
- only this process (`load`) is sampled for CPU and RSS: the service may be anywhere;
- after the stop, the run's users are erased through DELETE /v1/users/{id}, and the
  erasure is checked through the contract too: a recall of each erased user must find
  nothing. The servers behind the service are out of reach, so the in-process run's
  server consistency check (sessions, STM, LTM, audit, namespace) is not made; the
  report says so.
"""

from __future__ import annotations

import logging
import os
import random
from typing import Any

import requests
from locust import HttpUser
from locust.env import Environment

from loadtests.consistency import ConsistencyReport
from loadtests.conversations import render
from loadtests.run import LoadRun
from loadtests.target import ServiceError, TargetClient, check_target
from loadtests.timelines import SCENARIO_ENV, TimelineQueue, load_timelines, scenario_requested

__all__ = ["erase_target_users", "is_target", "prepare_target"]

log = logging.getLogger("memharness.load")
#: What the report says of the servers' consistency check in a target run.
NOT_REACHABLE = "the servers behind the service are not reachable from the load"


def is_target(environment: Environment) -> bool:
    """True when the run's users are HTTP users (a `--target` run)."""
    return any(issubclass(user, HttpUser) for user in environment.user_classes)


def prepare_target(run: LoadRun, environment: Environment) -> None:
    """Check and warm the service at Locust's --host; raises ValueError saying what is wrong."""
    if not environment.host:
        raise ValueError("--host is not set: the URL of the service to load")
    client = TargetClient.from_env(environment.host)
    problem = check_target(client.url, client.key)
    if problem is not None:
        raise ValueError(problem)
    run.target = client
    run.backends = {"target": client.url}
    warm_user = f"load-{run.token}-warmup"
    with run.progress.start(f"warming the service at {client.url}") as phase:
        try:
            for text in render(run.conversations[0], random.Random(0)):
                client.turn(user_id=warm_user, session_id=f"{warm_user}-c0", text=text)
            client.delete_user_data(user_id=warm_user)
        except (ServiceError, requests.RequestException) as exc:
            raise ValueError(f"the warm-up turn failed: {exc}") from None
        phase.end("one conversation played and erased")
    run.roles = {"load": os.getpid()}
    run.process_notes = {"service": f"not sampled: {client.url} may be on another machine"}
    if scenario_requested():
        users = load_timelines(os.environ[SCENARIO_ENV])
        run.timelines = TimelineQueue(users, seed=run.options.seed)


def erase_target_users(run: LoadRun) -> None:
    """Erase the run's users through the service and check, through it, that a recall
    of each finds nothing; kept in `run.consistency` for the report."""
    client = run.target
    assert client is not None
    reports: dict[str, dict[str, Any]] = {}
    if not run.options.keep_data:
        erased = ConsistencyReport("erasure (through the service)")
        done: list[str] = []
        for user_id in run.user_ids:
            try:
                client.delete_user_data(user_id=user_id)
            except (ServiceError, requests.RequestException) as exc:
                erased.errors.append(f"DELETE /v1/users/{user_id}: {exc}")
                continue
            done.append(user_id)
            erased.count("users erased")
        if run.options.check_consistency:
            for user_id in done:
                try:
                    hits = client.recall(
                        user_id=user_id, session_id=f"{user_id}-c0", query="what do you know"
                    ).get("hits")
                except (ServiceError, requests.RequestException, AttributeError) as exc:
                    erased.errors.append(f"recall of erased {user_id}: {exc}")
                    continue
                erased.count("recalls after erasure")
                if hits:
                    erased.problem(f"{user_id}: {len(hits)} hits after its erasure")
        reports["erasure"] = erased.as_dict()
        (log.info if erased.ok else log.error)("%s", erased.summary())
    run.consistency = reports or None
    client.close()
